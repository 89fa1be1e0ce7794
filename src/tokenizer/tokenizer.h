#pragma once
// Hugging Face tokenizer.json, token for token (the semantics of the Rust `tokenizers` library 0.22):
// added tokens, normalizer, pre-tokenizer, BPE model, post-processor and decoder.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_config.h"

namespace ember::tokenizer {

// The most token ids a vocabulary may hold: far above any published one (262,144), low enough that
// tables sized by a file's largest id stay small (a crafted id of 2^31 - 1 would ask for 64 GiB).
constexpr int64_t kMaxVocabSize = int64_t{1} << 24;

class Tokenizer {
 public:
  // tokenizer.json + optional tokenizer_config.json and chat_template.jinja from a model folder.
  static Tokenizer from_folder(const std::string& dir);
  // Throws ember::Error for malformed JSON or a component Ember does not support (naming it).
  static Tokenizer from_json(const std::string& tokenizer_json_text, const std::string& config_json_text = "");
  // The same from an already parsed tokenizer.json document (one built in memory, e.g. from a GGUF
  // file's metadata, skips printing and re-parsing a vocabulary of 150k tokens).
  static Tokenizer from_json_document(const nlohmann::json& tokenizer_json, const std::string& config_json_text = "");

  // The most text one encode call takes: it bounds the time and memory a stranger's text can ask
  // for (a whole context window is far shorter). Longer input gets an ember::Error.
  static constexpr size_t kMaxEncodeBytes = 16u << 20;

  // Thread-safe. `text` must be valid UTF-8 and at most kMaxEncodeBytes long.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // `ids` with the post-processor's special tokens added, as encode(text, true) adds them to
  // encode(text, false): what a truncation that keeps them (sentence-transformers') applies last.
  std::vector<int32_t> with_special_tokens(std::vector<int32_t> ids) const;
  // Raw Hugging Face decode (no clean_up_tokenization_spaces). Throws ember::Error for an unknown id.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // The exact bytes token `id` adds to a text after other tokens (no leading space stripped), kept
  // even when they are not valid UTF-8 alone (a character split over tokens). An added token gives
  // its content. Empty for an id the vocabulary does not have.
  std::optional<std::string> token_bytes(int32_t id) const;

  int32_t vocab_size() const;  // including added tokens (max id + 1)
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;  // throws ember::Error for an unknown id
  bool is_special(int32_t id) const;
  const TokenizerConfig& config() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
  friend class StreamDecoder;
};

// Streaming detokenizer: push ids one at a time, get the text that is final; never a partial UTF-8
// character; the concatenated deltas plus flush() equal decode(all ids). Each push decodes only a
// short window of recent ids.
class StreamDecoder {
 public:
  StreamDecoder(const Tokenizer& tok, bool skip_special_tokens);
  std::string push(int32_t id);
  std::string flush();  // the rest of the text; the decoder starts afresh afterwards

 private:
  Tokenizer tok_;
  bool skip_;
  bool groups_bytes_;
  std::vector<int32_t> window_;  // context ids followed by ids not yet emitted
  size_t read_ = 0;              // window_[0, read_) is context already emitted
  std::string prefix_;           // decode(window_[0, read_))
};

}  // namespace ember::tokenizer
