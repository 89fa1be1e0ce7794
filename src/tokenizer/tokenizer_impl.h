#pragma once
// The immutable state behind Tokenizer (shared by copies), for the tokenizer layer's own files.
#include <memory>
#include <span>
#include <string>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoders.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/post_processors.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/tokenizer.h"

namespace ember::tokenizer {

struct Tokenizer::Impl {
  std::unique_ptr<const Normalizer> normalizer;
  std::unique_ptr<const PreTokenizer> pre_tokenizer;
  std::unique_ptr<const BpeModel> model;
  AddedVocabulary added;
  std::unique_ptr<const PostProcessor> post_processor;
  std::unique_ptr<const Decoder> decoder;
  TokenizerConfig config;
  int32_t vocab_size = 0;

  const std::string* token_of(int32_t id) const {
    if (const AddedToken* t = added.find(id)) return &t->content;
    return model->id_to_token(id);
  }
  std::string decode(std::span<const int32_t> ids, bool skip_special) const;
};

}  // namespace ember::tokenizer
