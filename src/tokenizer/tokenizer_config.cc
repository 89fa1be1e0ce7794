#include "tokenizer/tokenizer_config.h"

#include <limits>

#include "base/error.h"
#include "tokenizer/pattern.h"

namespace ember::tokenizer {

std::string token_content(const nlohmann::ordered_json& entry) {
  if (entry.is_string()) return entry.get<std::string>();
  if (entry.is_object() && entry.contains("content") && entry["content"].is_string())
    return entry["content"].get<std::string>();
  return "";
}

TokenizerConfig parse_tokenizer_config(const std::string& json_text, const std::string& chat_template_file) {
  TokenizerConfig c;
  if (!json_text.empty()) {
    try {
      c.raw = nlohmann::ordered_json::parse(json_text);
    } catch (const nlohmann::json::exception& e) {
      fail("tokenizer_config.json", e.what());
    }
    if (!c.raw.is_object()) fail("tokenizer_config.json", "expected a JSON object");
  } else {
    c.raw = nlohmann::ordered_json::object();
  }
  const auto& r = c.raw;
  auto special = [&](const char* key) { return r.contains(key) ? token_content(r[key]) : std::string(); };
  c.bos_token = special("bos_token");
  c.eos_token = special("eos_token");
  c.unk_token = special("unk_token");
  c.pad_token = special("pad_token");
  auto opt_bool = [&](const char* key) -> std::optional<bool> {
    if (!r.contains(key) || r[key].is_null()) return std::nullopt;
    if (!r[key].is_boolean()) fail("tokenizer_config.json", std::string(key) + ": expected true or false");
    return r[key].get<bool>();
  };
  c.add_bos_token = opt_bool("add_bos_token");
  c.add_eos_token = opt_bool("add_eos_token");
  c.clean_up_tokenization_spaces = opt_bool("clean_up_tokenization_spaces").value_or(false);
  if (r.contains("model_max_length") && r["model_max_length"].is_number()) {
    const double v = r["model_max_length"].get<double>();
    c.model_max_length = v >= 9.2e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(v);
  }
  if (!chat_template_file.empty()) {
    c.chat_template = chat_template_file;
  } else if (r.contains("chat_template")) {
    const auto& t = r["chat_template"];
    if (t.is_string()) {
      c.chat_template = t.get<std::string>();
    } else if (t.is_array()) {
      for (const auto& item : t)
        if (item.is_object() && item.value("name", "") == "default" && item.contains("template") &&
            item["template"].is_string())
          c.chat_template = item["template"].get<std::string>();
    } else if (!t.is_null()) {
      fail("tokenizer_config.json", "chat_template: expected a string or a list of {name, template}");
    }
  }
  return c;
}

std::string clean_up_tokenization(std::string text) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) text = Pattern::literal(from).replace_all(text, to);
  return text;
}

}  // namespace ember::tokenizer
