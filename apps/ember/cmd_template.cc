// ember template (-m DIR | --template FILE) --jsonl: renders conversations with a chat template.
#include <ctime>
#include <iostream>
#include <map>

#include "apps/ember/commands.h"
#include "apps/ember/jsonl.h"
#include "base/error.h"
#include "base/mapped_file.h"
#include "chat/chat_template.h"
#include "model/gguf_config.h"
#include "model/load_tokenizer.h"
#include "tokenizer/tokenizer_config.h"

namespace ember::app {

namespace {

std::time_t parse_now(const std::string& text) {
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%d %H:%M:%S", &tm);
  if (!end || *end != '\0') throw Error("--now: expected \"YYYY-MM-DD HH:MM:SS\", got \"" + text + "\"");
  tm.tm_isdst = -1;
  return std::mktime(&tm);
}

}  // namespace

Run add_template_command(CLI::App& app) {
  struct Opts {
    std::string model, template_file, now;
    bool jsonl = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("template", "Render conversations with a model's chat template");
  auto* m = cmd->add_option("-m,--model", o->model, "Model or tokenizer folder (tokenizer_config.json or chat_template.jinja), or a .gguf file");
  auto* t = cmd->add_option("--template", o->template_file, "A Jinja chat template file");
  m->excludes(t);
  cmd->add_flag("--jsonl", o->jsonl,
                "Read {\"messages\", \"add_generation_prompt\", \"tools\", \"documents\", \"variables\"} lines, "
                "write {\"rendered\": str} or {\"error\": str} lines")
      ->required();
  cmd->add_option("--now", o->now, "Clock for strftime_now, \"YYYY-MM-DD HH:MM:SS\" local time (default: now)");
  return [o] {
    if (o->model.empty() && o->template_file.empty()) throw Error("template: give -m DIR or --template FILE");
    // --template FILE stands in for a folder's single template.
    tokenizer::TokenizerConfig config;
    const std::string& where = o->model.empty() ? o->template_file : o->model;
    // A GGUF's template and special tokens are in its metadata, read through the tokenizer it describes.
    if (!o->model.empty())
      config = model::is_gguf_path(o->model) ? model::load_tokenizer(o->model).config()
                                             : tokenizer::load_tokenizer_config(o->model);
    else config.chat_template = read_file(o->template_file);
    const nlohmann::ordered_json defaults = tokenizer::special_token_variables(config);
    // A named list can pick another template for lines with tools; each is parsed once.
    std::map<const std::string*, chat::ChatTemplate> parsed;
    auto template_for = [&](bool with_tools) -> const chat::ChatTemplate& {
      const std::string& source = tokenizer::select_chat_template(config, with_tools, where);
      return parsed.try_emplace(&source, source).first->second;
    };
    // No template at all (or a bad single one) fails here, once; a list fails per line as transformers does.
    if (config.named_chat_templates.empty()) template_for(/*with_tools=*/false);
    jinja::RenderOptions opts;
    if (!o->now.empty()) opts.now = parse_now(o->now);
    return run_jsonl(std::cin, std::cout, [&](const nlohmann::ordered_json& line) {
      if (!line.is_object()) throw Error("each line must be a JSON object");
      chat::TemplateInputs in;
      if (line.contains("messages")) in.messages = line["messages"];
      if (line.contains("tools")) in.tools = line["tools"];
      if (line.contains("documents")) in.documents = line["documents"];
      if (line.contains("add_generation_prompt")) {
        if (!line["add_generation_prompt"].is_boolean()) throw Error("\"add_generation_prompt\" must be a boolean");
        in.add_generation_prompt = line["add_generation_prompt"].get<bool>();
      }
      in.variables = defaults;
      if (line.contains("variables")) {
        if (!line["variables"].is_object()) throw Error("\"variables\" must be an object");
        for (const auto& [k, v] : line["variables"].items()) in.variables[k] = v;
      }
      return nlohmann::ordered_json{{"rendered", template_for(!in.tools.is_null()).render(in, opts)}};
    });
  };
}

}  // namespace ember::app
