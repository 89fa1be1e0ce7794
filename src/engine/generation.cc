#include "engine/generation.h"

#include <algorithm>
#include <limits>

#include "base/error.h"

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

sampling::SamplingParams default_params(const std::string& model_dir, const model::ModelConfig& config) {
  sampling::SamplingParams p = sampling::from_generation_config(model_dir);
  sampling::merge_eos(p, config.eos_token_ids);
  return p;
}

int64_t resolve_context(const model::ModelConfig& config, int64_t requested) {
  return requested > 0 ? requested : config.max_position_embeddings;
}

void check_prompt_fits(int64_t prompt_tokens, int64_t context) {
  if (prompt_tokens <= 0) throw Error("the prompt is empty: nothing to continue");
  if (prompt_tokens >= context)
    throw Error("the prompt has " + std::to_string(prompt_tokens) + " tokens but the context holds " +
                std::to_string(context) + " (raise --ctx or shorten the conversation)");
}

int64_t max_new_tokens(const sampling::SamplingParams& params, int64_t prompt_tokens, int64_t context) {
  const int64_t room = std::max<int64_t>(0, context - prompt_tokens);
  int64_t n = room;
  if (params.max_new_tokens) n = *params.max_new_tokens;
  else if (params.max_length) n = *params.max_length - prompt_tokens;
  return std::clamp<int64_t>(n, 0, room);
}

namespace {
GenerationRequest validated(GenerationRequest r, int64_t vocab_size) {
  r.params.validate(static_cast<size_t>(vocab_size));
  return r;
}
}  // namespace

Generation::Generation(const tokenizer::Tokenizer& tokenizer, GenerationRequest request, int64_t context,
                       int64_t vocab_size)
    : request_(validated(std::move(request), vocab_size)),
      context_limit_(context),
      max_new_(max_new_tokens(request_.params, prompt_tokens(), context)),
      sampler_(request_.params),
      stops_(request_.params.stop_strings),
      decoder_(tokenizer, /*skip_special_tokens=*/false),
      parser_(request_.starts_in_reasoning),
      context_(request_.prompt),
      want_logprobs_(request_.params.logprobs || request_.params.top_logprobs > 0) {
  check_prompt_fits(prompt_tokens(), context);
  if (const auto& g = request_.grammar) {
    if (!g->grammar || !g->vocabulary) throw Error("a grammar constraint needs both a grammar and a vocabulary");
    matcher_.emplace(g->grammar, g->vocabulary, g->masks);
    grammar_on_ = !(request_.split_reasoning && request_.starts_in_reasoning);
    if (request_.split_reasoning && grammar_on_) think_open_ = tokenizer.token_to_id("<think>");
  }
}

bool Generation::mask(std::span<const float> logits) {
  const std::vector<uint64_t>& allowed = matcher_->allowed();
  const bool complete = matcher_->complete();
  const size_t known = matcher_->vocabulary().size();
  masked_.assign(logits.begin(), logits.end());
  bool any = false;
  for (size_t i = 0; i < masked_.size(); ++i) {
    bool ok = is_eos(static_cast<int32_t>(i)) ? complete : i < known && ((allowed[i >> 6] >> (i & 63)) & 1);
    if (!ok && think_open_ && static_cast<int32_t>(i) == *think_open_ && context_.size() == request_.prompt.size())
      ok = true;  // a thought may open the reply; the grammar then waits for its end
    if (!ok) masked_[i] = -std::numeric_limits<float>::infinity();
    any = any || ok;
  }
  return any;
}

bool Generation::is_eos(int32_t t) const {
  const auto& e = request_.params.eos_token_ids;
  return std::find(e.begin(), e.end(), t) != e.end();
}

void Generation::route(std::string text, GenerationStep& out) {
  if (!request_.split_reasoning) {
    out.content += text;
    return;
  }
  const chat::ReasoningDelta d = parser_.push(text);
  out.content += d.content;
  out.reasoning += d.reasoning;
}

void Generation::end(FinishReason reason, GenerationStep& out) {
  done_ = true;
  out.finished = reason;
  out.feed.clear();
  // After a stop string nothing more is shown; otherwise the text held back is final now.
  if (reason != FinishReason::kStopString) route(stops_.feed(decoder_.flush()).text + stops_.flush(), out);
  if (request_.split_reasoning) {
    const chat::ReasoningDelta rest = parser_.flush();
    out.content += rest.content;
    out.reasoning += rest.reasoning;
  }
}

GenerationStep Generation::finish(FinishReason reason) {
  GenerationStep out;
  if (!done_) end(reason, out);
  return out;
}

GenerationStep Generation::step(std::span<const float> logits) {
  GenerationStep out;
  if (done_) return out;
  const auto generated_count = [&] { return static_cast<int64_t>(context_.size()) - prompt_tokens(); };
  if (generated_count() >= max_new_) {
    end(FinishReason::kLength, out);
    return out;
  }
  const bool constrained = matcher_ && grammar_on_;
  if (constrained && !mask(logits)) {  // the grammar allows nothing more (and no end token is known)
    end(FinishReason::kEos, out);
    return out;
  }
  const int32_t tok = sampler_.sample(constrained ? std::span<const float>(masked_) : logits, context_,
                                      request_.prompt.size());
  if (constrained && think_open_ && tok == *think_open_ && context_.size() == request_.prompt.size())
    grammar_on_ = false;
  else if (constrained && !is_eos(tok) && !matcher_->accept_token(tok))
    throw Error("internal: the sampler chose token " + std::to_string(tok) + ", which the grammar forbids");
  const sampling::TokenLogprobs* lp = want_logprobs_ ? sampler_.last_logprobs() : nullptr;
  out.tokens.push_back({tok, lp ? std::optional<sampling::TokenLogprobs>(*lp) : std::nullopt});
  if (request_.think_budget && !is_eos(tok))
    for (int32_t f : request_.think_budget->after_token(tok)) out.tokens.push_back({f, std::nullopt});

  std::string text;
  for (size_t i = 0; i < out.tokens.size(); ++i) {
    const int32_t t = out.tokens[i].id;
    context_.push_back(t);
    out.feed.push_back(t);
    std::optional<FinishReason> why;
    if (is_eos(t)) {
      why = FinishReason::kEos;
    } else {
      const auto s = stops_.feed(decoder_.push(t));
      text += s.text;
      if (s.stopped) why = FinishReason::kStopString;
    }
    if (why) {  // tokens forced after this one are not part of the sequence
      out.tokens.resize(i + 1);
      route(std::move(text), out);
      end(*why, out);
      return out;
    }
  }
  route(std::move(text), out);
  if (matcher_ && !grammar_on_ && !parser_.in_reasoning()) grammar_on_ = true;  // the thought is closed
  // The cache holds every token but the ones to feed; those must fit too. A sequence at its length
  // limit ends now, so that no forward pass computes logits nobody samples.
  if (static_cast<int64_t>(context_.size()) >= context_limit_) end(FinishReason::kContext, out);
  else if (generated_count() >= max_new_) end(FinishReason::kLength, out);
  return out;
}

}  // namespace ember::engine
