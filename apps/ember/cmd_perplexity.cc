// ember perplexity -m MODEL -f TEXT [--ctx N]: llama-perplexity's measure (engine/perplexity.h), with
// a progress line on stderr and a JSON summary on stdout.
#include <cstdio>
#include <iostream>

#include "apps/ember/commands.h"
#include "apps/ember/jsonl.h"
#include "apps/ember/model_options.h"
#include "base/error.h"
#include "engine/perplexity.h"

namespace ember::app {

Run add_perplexity_command(CLI::App& app) {
  auto o = std::make_shared<ModelOptions>();
  auto file = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity", "Perplexity of a text file as llama-perplexity measures it (windows of --ctx tokens, default 512; "
                    "the second half of each scored)");
  o->add_to(*cmd);
  o->ctx = 512;  // llama-perplexity's default window
  cmd->add_option("-f,--file", *file, "The text file")->required();
  return [o, file] {
    const std::string text = read_file(*file);
    LoadedModel m = load_model(*o);
    const std::vector<int32_t> tokens = m.tokenizer.encode(text, /*add_special_tokens=*/true);
    const int32_t bos = m.model->config().bos_token_id;
    const bool adds_bos = bos >= 0 && !tokens.empty() && tokens.front() == bos;
    if (o->ctx > m.model->config().max_position_embeddings)
      fail("--ctx", std::to_string(o->ctx) + " is longer than the model's context (" +
                        std::to_string(m.model->config().max_position_embeddings) + ")");
    if (!o->quiet)
      std::fprintf(stderr, "perplexity: %zu tokens, %lld windows of %lld\n", tokens.size(),
                   static_cast<long long>(tokens.size() / static_cast<size_t>(o->ctx)), static_cast<long long>(o->ctx));
    const engine::PerplexityResult r = engine::perplexity(
        *m.model, tokens, o->ctx, adds_bos ? std::optional<int32_t>(bos) : std::nullopt,
        [&](int64_t w, int64_t n, double ppl) {
          if (o->quiet) return;
          std::fprintf(stderr, "[%lld]%.4f,%s", static_cast<long long>(w), ppl, w == n ? "\n" : "");
          std::fflush(stderr);
        });
    if (!o->quiet) std::fprintf(stderr, "Final estimate: PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_error);
    std::cout << nlohmann::ordered_json{{"ppl", r.ppl},         {"ppl_error", r.ppl_error}, {"mean_nll", r.mean_nll},
                                        {"ctx", r.ctx},         {"windows", r.windows},     {"tokens_scored", r.scored},
                                        {"tokens", tokens.size()}, {"weights", m.model->weight_type()}}
                     .dump()
              << "\n";
    return 0;
  };
}

}  // namespace ember::app
