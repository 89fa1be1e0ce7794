#include "engine/session.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "base/clock.h"
#include "base/error.h"

namespace ember::engine {

Session::Session(model::Model& model, const tokenizer::Tokenizer& tokenizer, int64_t context_tokens)
    : model_(model),
      tokenizer_(tokenizer),
      context_(resolve_context(model.config(), context_tokens)),
      cache_(model.make_cache(context_)),
      seq_(*cache_) {}

std::string Session::set_speculation(const SpecOptions& options) {
  std::string why = spec_unsupported(model_.config(), options);
  spec_ = why.empty() ? options : SpecOptions{};
  // One drafter for every generation of the session: a draft model's cache follows the conversation.
  drafter_ = spec_.mode == SpecMode::kOff ? nullptr : make_drafter(spec_, context_, model_.config().vocab_size);
  spec_learned_ = {};
  return why;
}

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
  std::optional<Speculator> spec;
  if (spec_.mode != SpecMode::kOff && gen.request().speculate)
    spec.emplace(spec_, context_, model_.config().vocab_size, drafter_.get(), spec_learned_);
  const size_t vocab = static_cast<size_t>(model_.config().vocab_size);
  std::vector<float> pass;       // a verification pass's logits, every row (reused: no copies per pass)
  std::span<const float> rows;   // of pass: after its last unguessed token, then after each guess
  std::span<const float> kept;   // of pass: the row after the last cached token (logits_ when empty)
  while (!gen.done()) {
    if (cb.cancelled && cb.cancelled()) {
      deliver(gen.finish(FinishReason::kCancelled));
      break;
    }
    GenerationStep s;
    if (spec) {
      Verdict v = spec->verify(gen, rows.empty() ? std::span<const float>(logits_) : rows, vocab);
      if (!rows.empty()) {
        // The guesses not taken leave the cache; its last position's logits stay for the next prefill.
        seq_.truncate(seq_.length() - v.rejected);
        cached_.resize(static_cast<size_t>(seq_.length()));
        kept = rows.subspan((rows.size() / vocab - 1 - static_cast<size_t>(v.rejected)) * vocab, vocab);
        rows = {};
      }
      s = std::move(v.step);
    } else {
      s = gen.step(logits_);
    }
    deliver(s);
    if (s.finished) break;
    std::vector<int32_t> feed = std::move(s.feed);
    const int64_t n_feed = static_cast<int64_t>(feed.size());
    if (spec) {
      const auto& guesses = spec->draft(gen, draft_room(model_, seq_, n_feed, spec_.max_draft));
      feed.insert(feed.end(), guesses.begin(), guesses.end());
    }
    const auto pass_start = std::chrono::steady_clock::now();
    if (static_cast<int64_t>(feed.size()) > n_feed) {
      // Every row from the last unguessed token on: the guesses are checked against them.
      pass.resize(feed.size() * vocab);
      model::ForwardItem item{.seq = &seq_, .tokens = feed, .logits = pass.data(), .all_logits = true,
                              .single_tail = static_cast<int64_t>(feed.size()) - n_feed};
      model_.forward(std::span<model::ForwardItem>(&item, 1));
      rows = std::span<const float>(pass).subspan(static_cast<size_t>(n_feed - 1) * vocab);
    } else {
      logits_ = model_.forward(seq_, feed);
      rows = {};
    }
    kept = {};
    if (spec) spec->timed(static_cast<int64_t>(feed.size()), seconds_since(pass_start));
    cached_.insert(cached_.end(), feed.begin(), feed.end());
    ++r.decode_steps;
  }
  if (!rows.empty()) {  // a pass whose guesses were never checked (cancelled): they leave the cache
    seq_.truncate(seq_.length() - static_cast<int64_t>(rows.size() / vocab - 1));
    cached_.resize(static_cast<size_t>(seq_.length()));
    kept = rows.first(vocab);
  }
  if (!kept.empty()) logits_.assign(kept.begin(), kept.end());
  if (spec) {
    spec_learned_ = spec->learned();  // the next turn starts from what this one learnt
    r.drafted = spec->counts().drafted;
    r.accepted = spec->counts().accepted;
  }
  // The cache ends exactly at the last token it holds logits for; a final token that was not run
  // (end of sequence, stop, length) is recomputed by the next prefill if the next prompt contains it.
  r.decode_seconds = seconds_since(t0);
  r.tokens.assign(gen.generated().begin(), gen.generated().end());
  r.thought_forced_closed = gen.thought_forced_closed();
  return r;
}

}  // namespace ember::engine
