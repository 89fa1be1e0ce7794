#pragma once
// tokenizer_config.json (+ chat_template.jinja): special-token names, add_bos/eos, chat template.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace ember::tokenizer {

struct TokenizerConfig {
  std::string bos_token, eos_token, unk_token, pad_token;  // "" when unset
  std::optional<bool> add_bos_token, add_eos_token;
  bool clean_up_tokenization_spaces = false;
  std::string chat_template;  // "" when none
  int64_t model_max_length = 0;
  nlohmann::ordered_json raw;  // the whole file, for other special-token variables
};

// Parses tokenizer_config.json text ("" gives the defaults); `chat_template_file` (the contents of
// chat_template.jinja, may be empty) takes precedence over the JSON field.
TokenizerConfig parse_tokenizer_config(const std::string& json_text, const std::string& chat_template_file = "");

// A special-token entry: a string, or an object with "content"; "" otherwise.
std::string token_content(const nlohmann::ordered_json& entry);

// transformers' clean_up_tokenization: removes the space before punctuation and contractions.
std::string clean_up_tokenization(std::string text);

}  // namespace ember::tokenizer
