#include "engine/beam_generate.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "base/clock.h"
#include "base/error.h"
#include "engine/generation.h"
#include "sampling/logits_processors.h"

namespace ember::engine {

namespace {

// The penalties and bias of `p`, as transformers applies its logits processors to the beam scores.
class Penalties {
 public:
  explicit Penalties(const sampling::SamplingParams& p) : p_(p) {}
  bool active() const {
    return p_.repetition_penalty != 1.0f || p_.frequency_penalty != 0.0f || p_.presence_penalty != 0.0f ||
           !p_.logit_bias.empty();
  }
  void apply(std::span<float> row, std::span<const int32_t> prompt, std::span<const int32_t> generated) {
    if (seen_.size() != row.size()) {
      seen_.assign(row.size(), 0);
      counts_.assign(row.size(), 0);
    }
    context_.assign(prompt.begin(), prompt.end());
    context_.insert(context_.end(), generated.begin(), generated.end());
    sampling::apply_repetition_penalty(row, context_, p_.repetition_penalty, seen_);
    sampling::apply_frequency_presence(row, generated, p_.frequency_penalty, p_.presence_penalty, counts_);
    sampling::apply_logit_bias(row, p_.logit_bias);
  }

 private:
  const sampling::SamplingParams& p_;
  std::vector<uint8_t> seen_;
  std::vector<int32_t> counts_;
  std::vector<int32_t> context_;
};

}  // namespace

BeamGenerateResult beam_generate(model::Model& model, std::span<const int32_t> prompt,
                                 const sampling::SamplingParams& params, const BeamGenerateOptions& options) {
  params.validate(static_cast<size_t>(model.config().vocab_size));
  if (params.sampling()) fail("beam search", "sampling with beams (do_sample with temperature > 0) is not supported");
  if (!params.stop_strings.empty()) fail("beam search", "stop strings are not supported with beams");
  const int64_t context = resolve_context(model.config(), options.context_tokens);
  const auto n_prompt = static_cast<int64_t>(prompt.size());
  check_prompt_fits(n_prompt, context);
  const int64_t max_new = max_new_tokens(params, n_prompt, context);

  BeamGenerateResult r;
  r.prompt_tokens = n_prompt;
  if (max_new <= 0) return r;
  sampling::BeamSearch::Options bopt = sampling::BeamSearch::Options::from(params);
  bopt.max_new_tokens = static_cast<int32_t>(max_new);
  sampling::BeamSearch search(bopt);

  // Live beams and, while a step runs, their successors; without sharing each holds a full copy.
  const auto beams = static_cast<int64_t>(params.num_beams);
  const int64_t slack = 2 * 16;  // a partly written block per beam, rounded up
  const int64_t capacity = options.share_blocks ? n_prompt + 2 * beams * (max_new + slack)
                                                : n_prompt + 2 * beams * (n_prompt + max_new + slack);
  const std::unique_ptr<model::KvCache> cache = model.make_cache(capacity);
  const auto blocks_in_use = [&] { return cache->n_blocks() - cache->free_blocks(); };

  auto t0 = std::chrono::steady_clock::now();
  std::vector<model::KvSequence> live;
  live.emplace_back(*cache);
  std::vector<float> rows = model.forward(live[0], prompt);
  const size_t vocab = rows.size();
  r.prefill_seconds = seconds_since(t0);
  r.peak_cache_blocks = blocks_in_use();

  t0 = std::chrono::steady_clock::now();
  Penalties penalties(params);
  std::vector<model::ForwardItem> items;
  for (int64_t generated = 0;; ++generated) {
    for (size_t i = 0; i < search.num_live(); ++i) {
      const std::span<float> row(rows.data() + i * vocab, vocab);
      sampling::log_softmax(row, row);
      if (penalties.active()) penalties.apply(row, prompt, search.live_tokens(i));
    }
    const sampling::BeamStep& step = search.step(rows, vocab);
    if (search.done() || generated + 1 >= max_new) break;

    std::vector<model::KvSequence> next;
    next.reserve(step.parent.size());
    for (int32_t parent : step.parent)
      next.push_back(options.share_blocks ? live[static_cast<size_t>(parent)].fork()
                                          : live[static_cast<size_t>(parent)].copy());
    rows.resize(next.size() * vocab);
    items.clear();
    for (size_t i = 0; i < next.size(); ++i)
      items.push_back(model::ForwardItem{&next[i], std::span<const int32_t>(&step.token[i], 1),
                                         rows.data() + i * vocab, false});
    model.forward(items);
    r.peak_cache_blocks = std::max(r.peak_cache_blocks, blocks_in_use());
    live = std::move(next);
    ++r.steps;
  }
  r.decode_seconds = seconds_since(t0);
  r.sequences = search.finalize();
  return r;
}

}  // namespace ember::engine
