#include "tokenizer/tokenizer_config.h"

#include <filesystem>
#include <limits>

#include "base/error.h"
#include "base/mapped_file.h"
#include "tokenizer/pattern.h"

namespace ember::tokenizer {

namespace {

// A special-token entry: a string, or an AddedToken object with "content"; "" otherwise.
std::string token_content(const nlohmann::ordered_json& entry) {
  if (entry.is_string()) return entry.get<std::string>();
  if (entry.is_object() && entry.contains("content") && entry["content"].is_string())
    return entry["content"].get<std::string>();
  return "";
}

// transformers turns a list of {name, template} into a dict, so a repeated name keeps the last.
void read_chat_template(const nlohmann::ordered_json& t, TokenizerConfig& c) {
  if (t.is_string()) {
    c.chat_template = t.get<std::string>();
  } else if (t.is_array()) {
    for (size_t i = 0; i < t.size(); ++i) {
      const auto& item = t[i];
      if (!item.is_object() || !item.contains("name") || !item["name"].is_string() || !item.contains("template") ||
          !item["template"].is_string())
        fail("tokenizer_config.json", "chat_template[" + std::to_string(i) + "]: expected {\"name\": string, \"template\": string}");
      c.named_chat_templates[item["name"].get<std::string>()] = item["template"].get<std::string>();
    }
    if (auto it = c.named_chat_templates.find("default"); it != c.named_chat_templates.end())
      c.chat_template = it->second;
  } else if (!t.is_null()) {
    fail("tokenizer_config.json", "chat_template: expected a string or a list of {name, template}");
  }
}

}  // namespace

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
    read_chat_template(r["chat_template"], c);
  }
  return c;
}

TokenizerConfig load_tokenizer_config(const std::string& dir) {
  const std::filesystem::path d(dir);
  const auto text_of = [&](const char* name) {
    const auto path = d / name;
    return std::filesystem::exists(path) ? read_file(path.string()) : std::string();
  };
  const std::string config_text = text_of("tokenizer_config.json");
  const std::string template_text = text_of("chat_template.jinja");
  try {
    return parse_tokenizer_config(config_text, template_text);
  } catch (const Error& e) {
    fail(dir, e.what());
  }
}

const std::string& select_chat_template(const TokenizerConfig& c, bool with_tools, const std::string& where) {
  const auto& named = c.named_chat_templates;
  if (with_tools)
    if (auto it = named.find("tool_use"); it != named.end()) return it->second;
  if (!c.chat_template.empty()) return c.chat_template;
  if (!named.empty()) {
    std::string names;
    for (const auto& [name, text] : named) names += (names.empty() ? "" : ", ") + name;
    fail(where, "tokenizer_config.json: chat_template: the list has no template named \"default\" (it has: " +
                    names + ")");
  }
  // A GGUF's template is its metadata's, not a folder's files (model/gguf_tokenizer.cc reads it).
  if (where.ends_with(".gguf")) fail(where, "no chat template (the GGUF file has no tokenizer.chat_template)");
  fail(where, "no chat template (neither tokenizer_config.json \"chat_template\" nor chat_template.jinja)");
}

nlohmann::ordered_json special_token_variables(const TokenizerConfig& c) {
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  for (const auto& [name, value] : {std::pair{"bos_token", &c.bos_token}, {"eos_token", &c.eos_token},
                                    {"unk_token", &c.unk_token}, {"pad_token", &c.pad_token}})
    if (!value->empty()) vars[name] = *value;
  return vars;
}

std::string clean_up_tokenization(std::string text) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) text = Pattern::literal(from).replace_all(text, to);
  return text;
}

}  // namespace ember::tokenizer
