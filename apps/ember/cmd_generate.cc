// ember generate: continue a text prompt, streaming the continuation to stdout.
#include <cstdio>
#include <iostream>
#include <optional>

#include "apps/ember/commands.h"
#include "apps/ember/flag_range.h"
#include "apps/ember/generation_stats.h"
#include "apps/ember/grammar_options.h"
#include "apps/ember/model_options.h"
#include "apps/ember/spec_options.h"
#include "base/error.h"
#include "engine/beam_generate.h"
#include "engine/session.h"
#include "tokenizer/tokenizer.h"

namespace ember::app {

namespace {

struct GenerateOpts {
  ModelOptions model;
  SamplingOptions sampling;
  GrammarOptions grammar;
  SpecFlags spec;
  std::string prompt;
  bool no_bos = false;
  std::optional<int32_t> beams, num_return;
  std::optional<float> length_penalty;
};

// Beam search cannot stream (the best beam is known only at the end): prints each returned sequence.
int run_beams(model::Model& model, const tokenizer::Tokenizer& tok, const std::vector<int32_t>& prompt,
              const sampling::SamplingParams& params, const GenerateOpts& o, int64_t context) {
  const engine::BeamGenerateResult r =
      engine::beam_generate(model, prompt, params, {.share_blocks = true, .context_tokens = context});
  for (size_t i = 0; i < r.sequences.size(); ++i) {
    const sampling::BeamHypothesis& h = r.sequences[i];
    std::vector<int32_t> ids = h.tokens;
    if (h.eos && !ids.empty()) ids.pop_back();
    if (r.sequences.size() > 1)
      std::cout << "--- beam " << i + 1 << " (score " << h.score << ", log-probability " << h.sum_logprobs << ")\n";
    std::cout << o.prompt << tok.decode(ids, false) << '\n';
  }
  std::cout << std::flush;
  if (!o.model.quiet) {
    const size_t n = r.sequences.empty() ? 0 : r.sequences[0].tokens.size();
    std::fprintf(stderr, "prompt: %lld tokens, prefill %.3f s; %d beams, %lld steps in %.3f s (%.1f beam-tokens/s); best: %zu tokens, score %.4f\n",
                 static_cast<long long>(r.prompt_tokens), r.prefill_seconds, params.num_beams,
                 static_cast<long long>(r.steps), r.decode_seconds,
                 r.decode_seconds > 0 ? static_cast<double>(r.steps * params.num_beams) / r.decode_seconds : 0.0, n,
                 r.sequences.empty() ? 0.0 : r.sequences[0].score);
  }
  return 0;
}

}  // namespace

Run add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOpts>();
  CLI::App* cmd = app.add_subcommand("generate", "Continue a text prompt (greedy unless sampling flags are given)");
  o->model.add_to(*cmd);
  o->sampling.add_to(*cmd);
  cmd->add_option("-p,--prompt", o->prompt, "Text to continue")->required();
  o->grammar.add_to(*cmd);
  o->spec.add_to(*cmd);
  cmd->add_flag("--no-special", o->no_bos, "Do not add the tokenizer's special tokens (BOS) to the prompt");
  cmd->add_option("--beams", o->beams, "Beam search with B beams (1: greedy or sampling)")->check(in_range(1, 64));
  cmd->add_option("--length-penalty", o->length_penalty,
                  "Beam search: score = log-probability / length^P (default: generation_config, else 1)");
  cmd->add_option("--num-return-sequences", o->num_return,
                  "Beam search: print the best N beams (N <= B); sampling: N samples, seeds S, S+1, ... (--seed S)")
      ->check(in_range(1, 64));
  return [o] {
    std::shared_ptr<const grammar::Grammar> grammar = o->grammar.compile();  // before the model: fail fast
    auto [model, tok, params] = load_model(o->model, &o->sampling);
    if (!params.max_new_tokens && !params.max_length && !o->sampling.to_the_end) params.max_new_tokens = 256;
    const std::vector<int32_t> prompt = tok.encode(o->prompt, !o->no_bos);
    if (o->beams) {
      // --beams asks for beam search, not beam sampling: the model's own do_sample yields to it.
      if (o->sampling.any_warper()) throw Error("--beams cannot be combined with sampling flags (beam sampling is not supported)");
      if (grammar) throw Error("--beams cannot be combined with --json-schema or --grammar");
      if (o->spec.effective_mode() != "off") throw Error("--beams cannot be combined with --spec (beam search does not speculate)");
      params.num_beams = *o->beams;
      params.do_sample = false;
    }
    if (o->length_penalty) params.length_penalty = *o->length_penalty;
    const int64_t context = planned_context(*model, o->model);
    engine::check_prompt_fits(static_cast<int64_t>(prompt.size()), context);  // before the prompt is echoed
    if (params.num_beams > 1) {
      if (o->num_return) params.num_return_sequences = *o->num_return;
      return run_beams(*model, tok, prompt, params, *o, context);
    }
    const int32_t samples = o->num_return.value_or(1);
    if (samples > 1 && !params.do_sample) throw Error("--num-return-sequences without --beams needs sampling (e.g. --temperature 1)");
    const std::optional<engine::GrammarConstraint> constraint = constraint_for(std::move(grammar), tok, o->grammar.source());
    engine::Session session(*model, tok, context);
    session.set_speculation(o->spec.resolve(*model, tok, o->model));
    for (int32_t i = 0; i < samples; ++i) {
      engine::GenerationRequest request;
      request.prompt = prompt;
      request.params = engine::params_of_choice(params, i);
      request.grammar = constraint;
      if (samples > 1) std::cout << "--- sample " << i + 1 << '\n';
      std::cout << o->prompt << std::flush;
      engine::GenerationCallbacks cb;
      cb.on_text = [](std::string_view t) { std::cout << t << std::flush; };
      const engine::GenerationResult r = session.generate(std::move(request), cb);
      std::cout << '\n' << std::flush;
      if (!o->model.quiet)
        std::fprintf(stderr,
                     "prompt: %lld tokens, prefill %.1f tokens/s; generated %zu tokens (%lld by decode steps), decode %.1f "
                     "tokens/s; stop: %s%s\n",
                     static_cast<long long>(r.prompt_tokens), prefill_tokens_per_second(r), r.tokens.size(),
                     static_cast<long long>(decode_tokens(r)), decode_tokens_per_second(r),
                     engine::finish_reason_name(r.finish), speculation_note(r).c_str());
    }
    return 0;
  };
}

}  // namespace ember::app
