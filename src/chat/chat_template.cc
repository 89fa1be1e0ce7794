#include "chat/chat_template.h"

#include <filesystem>

#include "base/error.h"
#include "base/mapped_file.h"

namespace ember::chat {

namespace {

nlohmann::ordered_json read_json(const std::filesystem::path& p) {
  try {
    return nlohmann::ordered_json::parse(read_file(p.string()));
  } catch (const nlohmann::json::exception& e) {
    throw Error(p.string() + ": " + e.what());
  }
}

}  // namespace

nlohmann::ordered_json load_special_tokens(const std::string& model_dir) {
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  const auto path = std::filesystem::path(model_dir) / "tokenizer_config.json";
  if (!std::filesystem::exists(path)) return vars;
  const auto config = read_json(path);
  for (const char* name : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    if (!config.contains(name)) continue;
    const auto& t = config[name];
    if (t.is_string()) vars[name] = t;
    else if (t.is_object() && t.contains("content") && t["content"].is_string()) vars[name] = t["content"];
  }
  return vars;
}

std::string load_chat_template(const std::string& model_dir) {
  const std::filesystem::path dir(model_dir);
  // Newer transformers save the template beside the config, and that file takes precedence.
  if (std::filesystem::exists(dir / "chat_template.jinja")) return read_file((dir / "chat_template.jinja").string());
  const auto config_path = dir / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    const nlohmann::ordered_json config = read_json(config_path);
    if (config.contains("chat_template")) {
      const auto& t = config["chat_template"];
      if (t.is_string()) return t.get<std::string>();
      if (t.is_array()) {
        for (const auto& entry : t)
          if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
              entry["template"].is_string())
            return entry["template"].get<std::string>();
        throw Error(config_path.string() + ": field chat_template: no template named \"default\"");
      }
      if (!t.is_null()) throw Error(config_path.string() + ": field chat_template must be a string or a list");
    }
  }
  throw Error(model_dir + ": no chat template (neither tokenizer_config.json \"chat_template\" nor chat_template.jinja)");
}

ChatTemplate::ChatTemplate(std::string_view source) : template_(jinja::Template::parse(source)) {}

std::string ChatTemplate::render(const TemplateInputs& in, const jinja::RenderOptions& opts) const {
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  if (in.variables.is_object())
    for (const auto& [k, v] : in.variables.items()) ctx[k] = v;
  ctx["messages"] = in.messages;
  ctx["tools"] = in.tools;
  ctx["documents"] = in.documents;
  ctx["add_generation_prompt"] = in.add_generation_prompt;
  return template_.render(ctx, opts);
}

}  // namespace ember::chat
