// ember logits -m DIR --jsonl: last-position logits of each input id sequence.
#include <iostream>

#include "apps/ember/commands.h"
#include "apps/ember/jsonl.h"
#include "apps/ember/model_options.h"
#include "base/error.h"
#include "engine/memory_plan.h"
#include "model/model.h"

namespace ember::app {

Run add_logits_command(CLI::App& app) {
  auto o = std::make_shared<JsonlModelOptions>();
  CLI::App* cmd = app.add_subcommand("logits", "Print the last position's logits for token id sequences (JSON lines)");
  o->add_to(*cmd, "Hugging Face model folder or .gguf file",
            "Read {\"ids\": [...]} lines from stdin, write {\"logits\": [...]} lines");
  return [o] {
    auto model = model::Model::load(o->model, {.threads = o->threads, .progress = {}});
    const int64_t ctx = engine::plan_memory(*model, {}).context;  // what fits, up to the trained context
    auto cache = model->make_cache(ctx);
    return run_jsonl(std::cin, std::cout, [&](const nlohmann::ordered_json& in) {
      const std::vector<int32_t> ids = line_ids(in.at("ids"));
      if (static_cast<int64_t>(ids.size()) > ctx)
        throw Error("sequence of " + std::to_string(ids.size()) + " tokens is longer than the context (" +
                    std::to_string(ctx) + ")");
      model::KvSequence seq(*cache);
      const std::vector<float> logits = model->forward(seq, ids);
      return nlohmann::ordered_json{{"logits", logits}};
    });
  };
}

}  // namespace ember::app
