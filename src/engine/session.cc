#include "engine/session.h"

#include <algorithm>
#include <chrono>

#include "base/clock.h"
#include "base/error.h"
#include "sampling/stop_strings.h"

namespace ember::engine {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kEos:
    case FinishReason::kStopString: return "stop";
    case FinishReason::kLength:
    case FinishReason::kContext: return "length";
    case FinishReason::kCancelled: return "cancelled";
  }
  return "stop";
}

Session::Session(model::Model& model, const tokenizer::Tokenizer& tokenizer, int64_t context_tokens)
    : model_(model),
      tokenizer_(tokenizer),
      context_(context_tokens > 0 ? context_tokens : model.config().max_position_embeddings),
      cache_(model.make_cache(context_)),
      seq_(*cache_) {}

void Session::reset() {
  seq_.truncate(0);
  cached_.clear();
  logits_.clear();
}

int64_t Session::prefill(std::span<const int32_t> prompt) {
  if (prompt.empty()) throw Error("the prompt is empty: nothing to continue");
  if (static_cast<int64_t>(prompt.size()) >= context_)
    throw Error("the prompt has " + std::to_string(prompt.size()) + " tokens but the context holds " +
                std::to_string(context_) + " (raise --ctx or shorten the conversation)");
  size_t keep = 0;
  while (keep < cached_.size() && keep < prompt.size() && cached_[keep] == prompt[keep]) ++keep;
  // At least the last prompt token is recomputed: its logits start the generation.
  if (keep == prompt.size() && keep == cached_.size() && !logits_.empty()) return 0;
  keep = std::min(keep, prompt.size() - 1);
  seq_.truncate(static_cast<int64_t>(keep));
  cached_.resize(keep);
  const auto rest = prompt.subspan(keep);
  logits_ = model_.forward(seq_, rest);
  cached_.insert(cached_.end(), rest.begin(), rest.end());
  return static_cast<int64_t>(rest.size());
}

GenerationResult Session::generate(std::span<const int32_t> prompt, const sampling::SamplingParams& params,
                                   const GenerationCallbacks& cb) {
  GenerationResult r;
  r.prompt_tokens = static_cast<int64_t>(prompt.size());
  auto t0 = std::chrono::steady_clock::now();
  r.prefilled_tokens = prefill(prompt);
  r.prefill_seconds = seconds_since(t0);

  sampling::Sampler sampler(params);
  sampling::StopStringMatcher stops(params.stop_strings);
  tokenizer::StreamDecoder decoder(tokenizer_, /*skip_special_tokens=*/false);
  std::vector<int32_t> context(prompt.begin(), prompt.end());
  const int64_t max_new = params.max_new_tokens.value_or(
      params.max_length ? std::max<int64_t>(0, *params.max_length - r.prompt_tokens) : context_);
  auto is_eos = [&](int32_t t) {
    return std::find(params.eos_token_ids.begin(), params.eos_token_ids.end(), t) != params.eos_token_ids.end();
  };
  auto emit = [&](std::string_view text) {
    if (text.empty()) return;
    r.text += text;
    if (cb.on_text) cb.on_text(text);
  };

  t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> pending;  // tokens to append: one sampled, then any forced ones
  bool done = false;
  while (!done) {
    if (cb.cancelled && cb.cancelled()) {
      r.finish = FinishReason::kCancelled;
      break;
    }
    if (static_cast<int64_t>(r.tokens.size()) >= max_new) {
      r.finish = FinishReason::kLength;
      break;
    }
    pending.clear();
    const int32_t tok = sampler.sample(logits_, context, prompt.size());
    pending.push_back(tok);
    if (cb.on_token) cb.on_token(tok, sampler.last_logprobs());
    if (cb.force_after && !is_eos(tok))
      for (int32_t f : cb.force_after(tok)) {
        pending.push_back(f);
        if (cb.on_token) cb.on_token(f, nullptr);
      }
    for (int32_t t : pending) {
      r.tokens.push_back(t);
      context.push_back(t);
      if (is_eos(t)) {
        r.finish = FinishReason::kEos;
        done = true;
        break;
      }
      const auto out = stops.feed(decoder.push(t));
      emit(out.text);
      if (out.stopped) {
        r.finish = FinishReason::kStopString;
        done = true;
        break;
      }
    }
    if (done) break;
    if (static_cast<int64_t>(cached_.size() + pending.size()) >= context_) {
      r.finish = FinishReason::kContext;
      break;
    }
    logits_ = model_.forward(seq_, pending);
    cached_.insert(cached_.end(), pending.begin(), pending.end());
    ++r.decode_steps;
  }
  if (r.finish != FinishReason::kStopString) emit(stops.feed(decoder.flush()).text + stops.flush());
  // The cache must end exactly at the last token it holds logits for; a final token that was not run
  // (end of sequence, stop, length) is recomputed by the next prefill if the next prompt contains it.
  r.decode_seconds = seconds_since(t0);
  return r;
}

}  // namespace ember::engine
