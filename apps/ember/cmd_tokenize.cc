// ember tokenize -m DIR [--jsonl | -p TEXT]: text to token ids with the model's tokenizer files only.
#include <iostream>
#include <iterator>

#include "apps/ember/commands.h"
#include "apps/ember/jsonl.h"
#include "base/error.h"
#include "model/load_tokenizer.h"

namespace ember::app {

Run add_tokenize_command(CLI::App& app) {
  struct Opts {
    std::string model, prompt;
    bool jsonl = false, no_special = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Turn text into token ids (needs only the tokenizer files)");
  cmd->add_option("-m,--model", o->model, "Model or tokenizer folder (tokenizer.json), or a .gguf file")->required();
  cmd->add_flag("--jsonl", o->jsonl, "Read {\"text\", \"add_special_tokens\"} lines, write {\"ids\": [...]} lines");
  cmd->add_option("-p,--prompt", o->prompt, "Text to tokenize (default: all of stdin)");
  cmd->add_flag("--no-special", o->no_special, "Do not add the post-processor's special tokens (BOS, ...)");
  return [o] {
    const auto tok = model::load_tokenizer(o->model);
    if (o->jsonl) {
      return run_jsonl(std::cin, std::cout, [&](const nlohmann::ordered_json& in) {
        const auto& text = in.at("text");
        if (!text.is_string()) throw Error("\"text\" must be a string");
        const bool add = in.contains("add_special_tokens") ? in["add_special_tokens"].get<bool>() : true;
        return nlohmann::ordered_json{{"ids", tok.encode(text.get<std::string>(), add)}};
      });
    }
    std::string text = o->prompt;
    if (text.empty()) text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    const auto ids = tok.encode(text, !o->no_special);
    for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
    std::cout << '\n';
    return 0;
  };
}

}  // namespace ember::app
