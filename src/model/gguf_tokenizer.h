#pragma once
// The tokenizer a GGUF file describes in its tokenizer.ggml.* metadata, as the tokenizer.json /
// tokenizer_config.json that Hugging Face's converters write for the same vocabulary, so that it
// tokenizes exactly as Hugging Face does:
//   "gpt2":  byte-level BPE with tokenizer.ggml.merges; the pre-tokenizer (and Qwen's NFC normalizer)
//            named by tokenizer.ggml.pre: default / gpt-2, llama-bpe, qwen2, smollm.
//   "llama": SentencePiece-style BPE whose merges are ranked by tokenizer.ggml.scores (as
//            transformers' SentencePieceExtractor derives them), byte fallback to <0xXX> tokens,
//            "▁" for spaces and, with tokenizer.ggml.add_space_prefix, one prepended. Where the file
//            also has tokenizer.ggml.merges (convert writes them from a Hugging Face BPE), those
//            merges are used as they are: the scores alone are lossy for such a vocabulary.
// Token types: control and unknown tokens become special added tokens, user-defined ones plain added
// tokens; bos / eos / unk / padding ids, add_bos_token / add_eos_token and tokenizer.chat_template
// fill the config.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "model/gguf.h"
#include "tokenizer/tokenizer.h"

namespace ember::model {

struct GgufTokenizerFiles {
  nlohmann::json tokenizer;       // tokenizer.json
  nlohmann::ordered_json config;  // tokenizer_config.json
};

// Throws ember::Error naming the file and key for missing or inconsistent metadata and for a
// tokenizer model or pre-tokenizer Ember does not support.
GgufTokenizerFiles gguf_tokenizer_files(const GgufFile& gguf);
// The tokenizer.ggml.pre name of a byte-level BPE whose tokenizer.json has this normalizer and
// pre-tokenizer (one of those gguf_tokenizer_files reads), or nullopt.
std::optional<std::string> gguf_pre_tokenizer_name(const nlohmann::json& normalizer, const nlohmann::json& pre_tokenizer);

tokenizer::Tokenizer gguf_tokenizer(const GgufFile& gguf);

}  // namespace ember::model
