// ember detokenize -m DIR [--jsonl]: token ids back to text with the model's tokenizer files only.
#include <cstdint>
#include <iostream>

#include "apps/ember/commands.h"
#include "apps/ember/jsonl.h"
#include "base/error.h"
#include "model/load_tokenizer.h"

namespace ember::app {

Run add_detokenize_command(CLI::App& app) {
  struct Opts {
    std::string model;
    bool jsonl = false, skip_special = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("detokenize", "Turn token ids into text (needs only the tokenizer files)");
  cmd->add_option("-m,--model", o->model, "Model or tokenizer folder (tokenizer.json), or a .gguf file")->required();
  cmd->add_flag("--jsonl", o->jsonl, "Read {\"ids\", \"skip_special_tokens\"} lines, write {\"text\": ...} lines");
  cmd->add_flag("--skip-special", o->skip_special, "Leave special tokens out (plain mode)");
  return [o] {
    const auto tok = model::load_tokenizer(o->model);
    if (o->jsonl) {
      return run_jsonl(std::cin, std::cout, [&](const nlohmann::ordered_json& in) {
        // Checked as logits and embed check them: get<int32_t> wrapped 2^32 to 0 and cut 1.9 to 1.
        const std::vector<int32_t> ids = line_ids(in.at("ids"), /*allow_empty=*/true);
        const bool skip = in.contains("skip_special_tokens") ? in["skip_special_tokens"].get<bool>() : false;
        return nlohmann::ordered_json{{"text", tok.decode(ids, skip)}};
      });
    }
    // Plain mode: whitespace-separated ids on stdin.
    std::vector<int32_t> ids;
    for (long long id; std::cin >> id;) {
      if (id < INT32_MIN || id > INT32_MAX) throw Error("token id " + std::to_string(id) + " is out of range");
      ids.push_back(static_cast<int32_t>(id));
    }
    if (!std::cin.eof()) throw Error("stdin: expected whitespace-separated token ids");
    std::cout << tok.decode(ids, o->skip_special) << '\n';
    return 0;
  };
}

}  // namespace ember::app
