// ember embed -m DIR --jsonl: one vector per input line, as the folder's sentence-transformers
// modules pool and normalise.
#include <iostream>

#include "apps/ember/commands.h"
#include "apps/ember/jsonl.h"
#include "base/error.h"
#include "engine/embedder.h"
#include "model/load_tokenizer.h"
#include "model/model.h"

namespace ember::app {

namespace {

// {"text": str} or {"ids": [...]}, with an optional "prompt_name"; other keys are ignored. Given
// both, the text is embedded; ids are the exact tokens, so a prompt is already in them.
engine::EmbeddingInput parse_line(const nlohmann::ordered_json& in) {
  engine::EmbeddingInput e;
  const auto text = in.find("text");
  if (text != in.end() && !text->is_null()) {
    if (!text->is_string()) throw Error("\"text\" must be a string");
    e.text = text->get<std::string>();
    if (const auto p = in.find("prompt_name"); p != in.end() && !p->is_null()) {
      if (!p->is_string()) throw Error("\"prompt_name\" must be a string or null");
      e.prompt_name = p->get<std::string>();
    }
    return e;
  }
  const auto ids = in.find("ids");
  if (ids == in.end() || ids->is_null()) throw Error("a line needs \"text\" (a string) or \"ids\" (token ids)");
  if (!ids->is_array() || ids->empty()) throw Error("\"ids\" must be a non-empty array of token ids");
  e.ids.emplace();
  for (const auto& id : *ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      throw Error("\"ids\" holds " + id.dump() + ", not a token id");
    e.ids->push_back(id.get<int32_t>());
  }
  return e;
}

}  // namespace

Run add_embed_command(CLI::App& app) {
  struct Opts {
    std::string model;
    bool jsonl = false;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("embed", "Embed texts with a sentence-transformers folder (JSON lines)");
  cmd->add_option("-m,--model", o->model, "sentence-transformers model folder (modules.json, 1_Pooling/)")->required();
  cmd->add_flag("--jsonl", o->jsonl,
                "Read {\"text\": str} or {\"ids\": [...]} lines (optional \"prompt_name\"), write {\"embedding\": [...]} lines")
      ->required();
  cmd->add_option("-t,--threads", o->threads, "Threads (default: all cores)");
  return [o] {
    model::LoadOptions lo;
    lo.threads = o->threads;
    lo.lm_head = model::LoadOptions::LmHead::kNone;  // an embedding folder need not store it
    const auto model = model::Model::load(o->model, lo);
    const auto tok = model::load_tokenizer(o->model);
    engine::Embedder embedder(*model, tok);
    return run_jsonl(std::cin, std::cout, [&](const nlohmann::ordered_json& in) {
      const engine::EmbeddingInput input = parse_line(in);
      return nlohmann::ordered_json{{"embedding", embedder.embed({&input, 1}).vectors[0]}};
    });
  };
}

}  // namespace ember::app
