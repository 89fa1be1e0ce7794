#include "engine/session.h"

#include <algorithm>
#include <chrono>

#include "base/clock.h"
#include "base/error.h"

namespace ember::engine {

Session::Session(model::Model& model, const tokenizer::Tokenizer& tokenizer, int64_t context_tokens)
    : model_(model),
      tokenizer_(tokenizer),
      context_(resolve_context(model.config(), context_tokens)),
      cache_(model.make_cache(context_)),
      seq_(*cache_) {}

void Session::reset() {
  seq_.truncate(0);
  cached_.clear();
  logits_.clear();
}

int64_t Session::prefill(std::span<const int32_t> prompt) {
  check_prompt_fits(static_cast<int64_t>(prompt.size()), context_);
  // The same prompt again: its logits are still here.
  if (std::equal(prompt.begin(), prompt.end(), cached_.begin(), cached_.end()) && !logits_.empty()) return 0;
  // A hybrid model's sequence may go back further, to its deepest state snapshot (KvSequence::truncate).
  seq_.truncate(static_cast<int64_t>(reusable_prefix(cached_, prompt)));
  const auto keep = static_cast<size_t>(seq_.length());
  cached_.resize(keep);
  const auto rest = prompt.subspan(keep);
  logits_ = model_.forward(seq_, rest);
  cached_.insert(cached_.end(), rest.begin(), rest.end());
  return static_cast<int64_t>(rest.size());
}

GenerationResult Session::generate(std::span<const int32_t> prompt, const sampling::SamplingParams& params,
                                   const GenerationCallbacks& callbacks) {
  GenerationRequest request;
  request.prompt.assign(prompt.begin(), prompt.end());
  request.params = params;
  return generate(std::move(request), callbacks);
}

GenerationResult Session::generate(GenerationRequest request, const GenerationCallbacks& cb) {
  GenerationResult r;
  r.prompt_tokens = static_cast<int64_t>(request.prompt.size());
  Generation gen(tokenizer_, std::move(request), context_, model_.config().vocab_size);
  auto t0 = std::chrono::steady_clock::now();
  r.prefilled_tokens = prefill(gen.request().prompt);
  r.prefill_seconds = seconds_since(t0);

  auto deliver = [&](const GenerationStep& s) {
    for (const GeneratedToken& t : s.tokens)
      if (cb.on_token) cb.on_token(t);
    r.text += s.content;
    r.reasoning += s.reasoning;
    if (!s.content.empty() && cb.on_text) cb.on_text(s.content);
    if (!s.reasoning.empty() && cb.on_reasoning) cb.on_reasoning(s.reasoning);
    if (s.finished) r.finish = *s.finished;
  };
  t0 = std::chrono::steady_clock::now();
  while (!gen.done()) {
    if (cb.cancelled && cb.cancelled()) {
      deliver(gen.finish(FinishReason::kCancelled));
      break;
    }
    const GenerationStep s = gen.step(logits_);
    deliver(s);
    if (s.finished) break;
    logits_ = model_.forward(seq_, s.feed);
    cached_.insert(cached_.end(), s.feed.begin(), s.feed.end());
    ++r.decode_steps;
  }
  // The cache ends exactly at the last token it holds logits for; a final token that was not run
  // (end of sequence, stop, length) is recomputed by the next prefill if the next prompt contains it.
  r.decode_seconds = seconds_since(t0);
  r.tokens.assign(gen.generated().begin(), gen.generated().end());
  r.thought_forced_closed = gen.thought_forced_closed();
  return r;
}

}  // namespace ember::engine
