#pragma once
// tokenizer_config.json (+ chat_template.jinja): special-token names, add_bos/eos, chat template.
// The one reader of these files: the tokenizer, the chat prompt and `ember template` all ask it.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace ember::tokenizer {

struct TokenizerConfig {
  std::string bos_token, eos_token, unk_token, pad_token;  // "" when unset
  std::optional<bool> add_bos_token, add_eos_token;
  bool clean_up_tokenization_spaces = false;
  // The single template (chat_template.jinja or a string), or the named list's "default"; "" when none.
  std::string chat_template;
  // A list of {name, template} by name, as transformers keeps it (a repeated name: the last one).
  std::map<std::string, std::string> named_chat_templates;
  int64_t model_max_length = 0;
  nlohmann::ordered_json raw;  // the whole file, for other special-token variables
};

// Parses tokenizer_config.json text ("" gives the defaults); `chat_template_file` (the contents of
// chat_template.jinja, may be empty) takes precedence over the JSON field.
TokenizerConfig parse_tokenizer_config(const std::string& json_text, const std::string& chat_template_file = "");

// tokenizer_config.json and chat_template.jinja of a folder (either may be absent); errors name the folder.
TokenizerConfig load_tokenizer_config(const std::string& dir);

// The template transformers' apply_chat_template renders (get_chat_template): from a named list the
// "tool_use" one when tools are given and it exists, else "default". Throws ember::Error naming
// `where` when there is none, listing the names of a list without "default" (as transformers refuses).
const std::string& select_chat_template(const TokenizerConfig& config, bool with_tools, const std::string& where);

// bos_token, eos_token, unk_token, pad_token (those set) as the chat template's variables.
nlohmann::ordered_json special_token_variables(const TokenizerConfig& config);

// transformers' clean_up_tokenization: removes the space before punctuation and contractions.
std::string clean_up_tokenization(std::string text);

}  // namespace ember::tokenizer
