// ember generate: continue a text prompt, streaming the continuation to stdout.
#include <cstdio>
#include <iostream>

#include "apps/ember/commands.h"
#include "apps/ember/model_options.h"
#include "engine/session.h"
#include "tokenizer/tokenizer.h"

namespace ember::app {

Run add_generate_command(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    SamplingOptions sampling;
    std::string prompt;
    bool no_bos = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("generate", "Continue a text prompt (greedy unless sampling flags are given)");
  o->model.add_to(*cmd);
  o->sampling.add_to(*cmd);
  cmd->add_option("-p,--prompt", o->prompt, "Text to continue")->required();
  cmd->add_flag("--no-special", o->no_bos, "Do not add the tokenizer's special tokens (BOS) to the prompt");
  return [o] {
    auto model = o->model.load();
    const auto tok = tokenizer::Tokenizer::from_folder(o->model.dir);
    sampling::SamplingParams params = o->sampling.resolve(*model);
    if (!params.max_new_tokens && !params.max_length) params.max_new_tokens = 256;
    const std::vector<int32_t> prompt = tok.encode(o->prompt, !o->no_bos);
    engine::Session session(*model, tok, o->model.ctx);
    std::cout << o->prompt << std::flush;
    engine::GenerationCallbacks cb;
    cb.on_text = [](std::string_view t) { std::cout << t << std::flush; };
    const engine::GenerationResult r = session.generate(prompt, params, cb);
    std::cout << '\n' << std::flush;
    if (!o->model.quiet) {
      const double pre = r.prefill_seconds > 0 ? static_cast<double>(r.prefilled_tokens) / r.prefill_seconds : 0;
      const double dec = r.decode_seconds > 0 ? static_cast<double>(r.tokens.size()) / r.decode_seconds : 0;
      std::fprintf(stderr, "prompt: %lld tokens, prefill %.1f tokens/s; generated %zu tokens, decode %.1f tokens/s; stop: %s\n",
                   static_cast<long long>(r.prompt_tokens), pre, r.tokens.size(), dec,
                   engine::finish_reason_name(r.finish));
    }
    return 0;
  };
}

}  // namespace ember::app
