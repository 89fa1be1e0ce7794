#include "engine/generation.h"

#include <algorithm>
#include <cstdio>
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

sampling::SamplingParams params_of_choice(sampling::SamplingParams params, int64_t i) {
  if (params.seed) params.seed = *params.seed + static_cast<uint64_t>(i);
  return params;
}

size_t reusable_prefix(std::span<const int32_t> cached, std::span<const int32_t> prompt) {
  if (prompt.empty()) return 0;
  size_t n = 0;
  while (n < cached.size() && n < prompt.size() && cached[n] == prompt[n]) ++n;
  return std::min(n, prompt.size() - 1);
}

int64_t resolve_context(const model::ModelConfig& config, int64_t requested) {
  return requested > 0 ? requested : config.max_position_embeddings;
}

void check_prompt_fits(int64_t prompt_tokens, int64_t context) {
  if (prompt_tokens <= 0) throw RequestError("the prompt is empty: nothing to continue", "prompt", "empty_prompt");
  if (prompt_tokens >= context)
    throw RequestError("the prompt has " + std::to_string(prompt_tokens) + " tokens and the context holds " +
                           std::to_string(context) + ": a reply needs at least " + std::to_string(prompt_tokens + 1) +
                           " (raise --ctx or shorten the conversation)",
                       "prompt", "context_length_exceeded");
}

int64_t max_new_tokens(const sampling::SamplingParams& params, int64_t prompt_tokens, int64_t context) {
  const int64_t room = std::max<int64_t>(0, context - prompt_tokens);
  int64_t n = room;
  if (params.max_new_tokens) n = *params.max_new_tokens;
  else if (params.max_length) n = *params.max_length - prompt_tokens;
  return std::clamp<int64_t>(n, 0, room);
}

namespace {

// Up to 12 of the bytes `m` could take next, for an error message: 'a', '{', \xe2.
std::string next_bytes(grammar::Matcher& m) {
  std::string out;
  int shown = 0, more = 0;
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    if (!m.can_accept(std::string_view(&c, 1))) continue;
    if (shown == 12) {
      ++more;
      continue;
    }
    char buf[8];
    if (b >= 0x20 && b < 0x7f) std::snprintf(buf, sizeof buf, "'%c'", c);
    else std::snprintf(buf, sizeof buf, "\\x%02x", b);
    out += (shown++ ? ", " : "") + std::string(buf);
  }
  if (more) out += " and " + std::to_string(more) + " more";
  return out.empty() ? "nothing" : out;
}

// Whether a matcher at its start allows some token of its vocabulary (or is already complete).
bool can_start(grammar::Matcher& m) {
  if (m.complete()) return true;
  const std::vector<uint64_t>& allowed = m.allowed();
  return std::any_of(allowed.begin(), allowed.end(), [](uint64_t w) { return w != 0; });
}

// The stop strings of a request plus the text of each special end token: a model may spell its end
// token out in plain pieces before (or instead of) emitting it (story-656k writes "<|", "end",
// "_story", "|>", then <|end_story|>), and that text is no part of the answer.
std::vector<std::string> stops_with_end_texts(const tokenizer::Tokenizer& tok, const sampling::SamplingParams& p) {
  std::vector<std::string> stops = p.stop_strings;
  for (int32_t id : p.eos_token_ids) {
    if (id < 0 || id >= tok.vocab_size() || !tok.is_special(id)) continue;
    const std::string text = tok.decode(std::span<const int32_t>(&id, 1), /*skip_special_tokens=*/false);
    if (text.size() >= 3 && std::find(stops.begin(), stops.end(), text) == stops.end()) stops.push_back(text);
  }
  return stops;
}

// check_request but for the grammar's start, which needs a matcher: Generation asks its own.
void check_fields(const GenerationRequest& r, int64_t context, int64_t vocab_size) {
  check_prompt_fits(static_cast<int64_t>(r.prompt.size()), context);
  const int64_t n_prompt = static_cast<int64_t>(r.prompt.size());
  if (r.refuse_past_context && r.params.max_new_tokens && n_prompt + *r.params.max_new_tokens > context)
    throw RequestError("the context holds " + std::to_string(context) + " tokens, but the prompt has " +
                           std::to_string(n_prompt) + " tokens plus " + std::to_string(*r.params.max_new_tokens) +
                           " to generate; reduce one or the other",
                       "max_tokens", "context_length_exceeded");
  for (int32_t t : r.prompt)
    if (t < 0 || t >= vocab_size)
      throw RequestError("prompt token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                             std::to_string(vocab_size) + ")",
                         "prompt", "invalid_token_id");
  try {
    r.params.validate(static_cast<size_t>(vocab_size));
    sampling::StopStringMatcher check(r.params.stop_strings);  // throws for a bad stop string
  } catch (const RequestError&) {
    throw;
  } catch (const Error& e) {
    throw RequestError(e.what(), "", "invalid_request");
  }
  if (r.grammar && (!r.grammar->grammar || !r.grammar->vocabulary))
    throw Error("a grammar constraint needs both a grammar and a vocabulary");
}

// Throws unless the grammar's matcher `m`, at its start, lets some token begin the output. A thought
// comes first when the prompt opens one or the reply may: the grammar starts after it, unchecked.
void check_grammar_start(const GenerationRequest& r, grammar::Matcher& m) {
  if (r.split_reasoning || can_start(m)) return;
  throw RequestError(r.grammar->source + " cannot start: no token of this model's vocabulary begins with what it "
                                         "allows first (" + next_bytes(m) + ")",
                     "", "grammar_unsatisfiable");
}

GenerationRequest validated(GenerationRequest r, int64_t context, int64_t vocab_size) {
  check_fields(r, context, vocab_size);
  return r;
}

}  // namespace

void check_request(const GenerationRequest& r, int64_t context, int64_t vocab_size) {
  check_fields(r, context, vocab_size);
  if (const auto& g = r.grammar) {
    grammar::Matcher m(g->grammar, g->vocabulary, g->masks);
    check_grammar_start(r, m);
  }
}

Generation::Generation(const tokenizer::Tokenizer& tokenizer, GenerationRequest request, int64_t context,
                       int64_t vocab_size)
    : request_(validated(std::move(request), context, vocab_size)),
      context_limit_(context),
      max_new_(max_new_tokens(request_.params, prompt_tokens(), context)),
      sampler_(request_.params),
      stops_(stops_with_end_texts(tokenizer, request_.params)),
      decoder_(tokenizer, /*skip_special_tokens=*/false),
      parser_(request_.starts_in_reasoning),
      context_(request_.prompt),
      want_logprobs_(request_.params.logprobs || request_.params.top_logprobs > 0) {
  if (const auto& g = request_.grammar) {
    matcher_.emplace(g->grammar, g->vocabulary, g->masks);
    check_grammar_start(request_, *matcher_);
    grammar_on_ = !(request_.split_reasoning && request_.starts_in_reasoning);
    if (request_.split_reasoning && request_.may_open_thought && grammar_on_ && !request_.harmony)
      think_open_ = tokenizer.token_to_id(chat::kThinkOpen);
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

void Generation::dead_end() {
  throw RequestError(request_.grammar->source + " cannot continue after " +
                         std::to_string(context_.size() - request_.prompt.size()) + " generated tokens (" +
                         std::to_string(output_bytes_) + " bytes of output): no token of this model's vocabulary "
                         "begins with what it allows next (" + next_bytes(*matcher_) + ")",
                     "", "grammar_unsatisfiable");
}

void Generation::route(std::string text, GenerationStep& out) {
  output_bytes_ += static_cast<int64_t>(text.size());
  if (!request_.split_reasoning) {
    out.content += text;
    return;
  }
  const chat::ReasoningDelta d = request_.harmony ? request_.harmony->push(text) : parser_.push(text);
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
    const chat::ReasoningDelta rest = request_.harmony ? request_.harmony->flush() : parser_.flush();
    out.content += rest.content;
    out.reasoning += rest.reasoning;
  }
}

GenerationStep Generation::finish(FinishReason reason) {
  GenerationStep out;
  if (!done_) end(reason, out);
  return out;
}

GenerationStep Generation::step(std::span<const float> logits) { return next(logits, nullptr); }

GenerationStep Generation::step(std::span<const float> logits, int32_t proposed, std::span<const sampling::Candidate> q) {
  const Proposal p{proposed, q};
  return next(logits, &p);
}

GenerationStep Generation::next(std::span<const float> logits, const Proposal* proposal) {
  GenerationStep out;
  if (done_) return out;
  const auto generated_count = [&] { return static_cast<int64_t>(context_.size()) - prompt_tokens(); };
  if (generated_count() >= max_new_) {
    end(FinishReason::kLength, out);
    return out;
  }
  const bool constrained = matcher_ && grammar_on_;
  if (constrained && !mask(logits)) {
    // A whole sentence that nothing may follow and no end token to close it: the output is done.
    if (matcher_->complete()) {
      end(FinishReason::kEos, out);
      return out;
    }
    dead_end();  // never an empty "stop": the output is not what was asked for
  }
  const std::span<const float> row = constrained ? std::span<const float>(masked_) : logits;
  const int32_t tok = proposal ? sampler_.sample_proposed(row, context_, request_.prompt.size(), proposal->token, proposal->q)
                               : sampler_.sample(row, context_, request_.prompt.size());
  if (constrained && think_open_ && tok == *think_open_ && context_.size() == request_.prompt.size())
    grammar_on_ = false;
  else if (constrained && !is_eos(tok) && !matcher_->accept_token(tok))
    throw Error("internal: the sampler chose token " + std::to_string(tok) + ", which the grammar forbids");
  const sampling::TokenLogprobs* lp = want_logprobs_ ? sampler_.last_logprobs() : nullptr;
  out.tokens.push_back({tok, lp ? std::optional<sampling::TokenLogprobs>(*lp) : std::nullopt});
  // A harmony budget follows the parser: its forced tokens come once the token's text went through it.
  // A grammar holds over a harmony reply's markers too, so the grammar decides where its thought ends.
  const bool parsed_budget = request_.think_budget && request_.harmony && !matcher_;
  if (request_.think_budget && !request_.harmony && !is_eos(tok))
    for (int32_t f : request_.think_budget->after_token(tok)) out.tokens.push_back({f, std::nullopt});

  std::string text;
  for (size_t i = 0; i < out.tokens.size(); ++i) {
    const int32_t t = out.tokens[i].id;
    context_.push_back(t);
    out.feed.push_back(t);
    std::optional<FinishReason> why;
    if (is_eos(t)) {
      why = FinishReason::kEos;
      out.tokens[i].end = true;
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
    if (parsed_budget && i + 1 == out.tokens.size() && !is_eos(tok)) {
      route(std::exchange(text, {}), out);
      for (int32_t f : request_.think_budget->after_thought_token(in_reasoning())) out.tokens.push_back({f, std::nullopt});
    }
  }
  route(std::move(text), out);
  if (matcher_ && !grammar_on_ && !in_reasoning()) grammar_on_ = true;  // the thought is closed
  // The cache holds every token but the ones to feed; those must fit too. A sequence at its length
  // limit ends now, so that no forward pass computes logits nobody samples.
  if (static_cast<int64_t>(context_.size()) >= context_limit_) end(FinishReason::kContext, out);
  else if (generated_count() >= max_new_) end(FinishReason::kLength, out);
  return out;
}

std::string Generation::matched_stop() const {
  const int i = stops_.matched();
  const auto& asked = request_.params.stop_strings;
  return i >= 0 && static_cast<size_t>(i) < asked.size() ? asked[static_cast<size_t>(i)] : std::string();
}

}  // namespace ember::engine
