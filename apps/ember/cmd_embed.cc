// ember embed -m DIR --jsonl: one vector per input line, as the folder's sentence-transformers
// modules pool and normalise.
#include <iostream>

#include "apps/ember/commands.h"
#include "apps/ember/jsonl.h"
#include "apps/ember/model_options.h"
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
  e.ids = line_ids(*ids);
  return e;
}

}  // namespace

Run add_embed_command(CLI::App& app) {
  auto o = std::make_shared<JsonlModelOptions>();
  CLI::App* cmd = app.add_subcommand("embed", "Embed texts with a sentence-transformers folder (JSON lines)");
  o->add_to(*cmd, "sentence-transformers model folder (modules.json, 1_Pooling/)",
            "Read {\"text\": str} or {\"ids\": [...]} lines (optional \"prompt_name\"), write {\"embedding\": [...]} lines");
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
