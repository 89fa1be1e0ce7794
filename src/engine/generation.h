#pragma once
// The rules of one sequence's generation, written once. Session (one sequence), the Scheduler (many
// at once) and beam search (its context checks) drive this; none repeats it. Each step takes the
// logits after the last token fed to the model and says what to feed next, which text became final
// and whether (and why) the sequence ended: sampling, forced tokens (a thinking budget's
// "</think>"), end tokens, stop strings, the length and context limits, the streamed text and its
// split into reasoning and answer. Grammar masks and tool-call parsing plug in here.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "chat/harmony.h"
#include "chat/reasoning.h"
#include "chat/thinking_budget.h"
#include "engine/grammar_constraint.h"
#include "sampling/grammar_matcher.h"
#include "model/config.h"
#include "sampling/generation_config.h"
#include "sampling/sampler.h"
#include "sampling/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace ember::engine {

// kCancelled: the driver stopped the sequence (client gone, timeout, shutdown, Ctrl-C, an error).
enum class FinishReason { kEos, kStopString, kLength, kContext, kCancelled };
// "stop" (end token, stop string), "length" (max tokens, context) or "cancelled".
const char* finish_reason_name(FinishReason r);

// A request the engine refuses, with what an API's error names: `param` the request field at fault
// ("prompt", "max_tokens", "response_format"), `code` the error code ("context_length_exceeded").
class RequestError : public Error {
 public:
  RequestError(const std::string& message, std::string param, std::string code)
      : Error(message), param(std::move(param)), code(std::move(code)) {}
  std::string param, code;
};

// The context limits, one owner for every driver.
// Tokens one sequence may hold: `requested`, or the model's max_position_embeddings when <= 0.
int64_t resolve_context(const model::ModelConfig& config, int64_t requested);
// Throws ember::Error when the prompt is empty or leaves no room for a generated token.
void check_prompt_fits(int64_t prompt_tokens, int64_t context);
// The most tokens to generate: max_new_tokens, else max_length minus the prompt, else the rest of the
// context; never more than the rest of the context.
int64_t max_new_tokens(const sampling::SamplingParams& params, int64_t prompt_tokens, int64_t context);

// The sampling options of choice `i` (0-based) of a request asking for several: seeds S, S+1, ...
// so that each choice is reproducible alone (without a seed, each draws its own).
sampling::SamplingParams params_of_choice(sampling::SamplingParams params, int64_t i);

// How many of `cached` tokens a new prompt can reuse: the shared prefix, less the prompt's last
// token, which is always computed again (its logits start the generation).
size_t reusable_prefix(std::span<const int32_t> cached, std::span<const int32_t> prompt);

// A model's decoding defaults: its folder's generation_config.json, config.json's end tokens merged in.
sampling::SamplingParams default_params(const std::string& model_dir, const model::ModelConfig& config);

struct GenerationRequest {
  std::vector<int32_t> prompt;
  sampling::SamplingParams params;
  bool split_reasoning = false;      // route the text through a <think> parser
  bool starts_in_reasoning = false;  // the prompt leaves a <think> open
  // With split_reasoning, a harmony (gpt-oss) reply: this parser, primed with the prompt's open
  // message, splits it by channel instead, and a think_budget made by of_parsed_thought follows it
  // (not under a grammar, which covers the channels' markers: it decides where the thought ends).
  std::optional<chat::HarmonyParser> harmony;
  // Under a grammar, whether the reply's first token may open a thought before the grammar starts;
  // false when the request turned thinking off, so the grammar holds from the first token.
  bool may_open_thought = true;
  std::optional<chat::ThinkingBudget> think_budget;
  // The output must follow this grammar (after the thought, when the prompt opens one or, with
  // split_reasoning, the reply's first token does): tokens that would leave it are masked out
  // before sampling, end tokens only once it is complete.
  std::optional<GrammarConstraint> grammar;
  // params.max_new_tokens is what a client asked for (an API's max_tokens): when the context cannot
  // hold it beside the prompt the request is refused, as vLLM does, instead of capped at the context
  // (ember generate -n).
  bool refuse_past_context = false;
  // false: no speculative decoding for this request, where its driver speculates (engine/speculation.h).
  bool speculate = true;
};

// Every check a request passes before it is queued or run, one owner for Session, the Scheduler and
// the server: the prompt fits `context` with room for a token, its ids are in the vocabulary, the
// sampling options and stop strings are valid, and a grammar lets the output start. Throws
// RequestError naming what is wrong.
void check_request(const GenerationRequest& request, int64_t context, int64_t vocab_size);

struct GeneratedToken {
  int32_t id;
  std::optional<sampling::TokenLogprobs> logprobs;  // set when the request asked for them (sampled tokens)
  bool end = false;  // an end token: it ended the sequence and is not part of the text
};

// What one step (or the end) produced.
struct GenerationStep {
  std::vector<int32_t> feed;           // tokens to run through the model next; empty once finished
  std::vector<GeneratedToken> tokens;  // tokens appended to the sequence (sampled, then forced)
  std::string content, reasoning;      // text now final; reasoning only when split_reasoning
  std::optional<FinishReason> finished;
};

class Generation {
 public:
  // Throws ember::Error for bad sampling options (a logit_bias id outside the model's `vocab_size`
  // logits included) or stop strings, or a prompt that does not fit `context`.
  Generation(const tokenizer::Tokenizer& tokenizer, GenerationRequest request, int64_t context, int64_t vocab_size);

  // The logits after the last token fed (the prompt's last token at first). Not after done().
  GenerationStep step(std::span<const float> logits);
  // The same where a draft model proposed the next token from its distribution q (speculative
  // sampling, sampling::Sampler::sample_proposed): the token is drawn as step() draws it.
  GenerationStep step(std::span<const float> logits, int32_t proposed, std::span<const sampling::Candidate> q);
  // Ends the sequence early (cancelled, failed): flushes the text held back. Nothing after done().
  GenerationStep finish(FinishReason reason);

  bool done() const { return done_; }
  const GenerationRequest& request() const { return request_; }
  int64_t prompt_tokens() const { return static_cast<int64_t>(request_.prompt.size()); }
  int64_t max_new() const { return max_new_; }
  // Generated ids, an end token included if one ended the sequence.
  std::span<const int32_t> generated() const {
    return std::span<const int32_t>(context_).subspan(request_.prompt.size());
  }
  // The sequence so far: prompt, generated tokens and the tokens of the last step's feed.
  std::span<const int32_t> context() const { return context_; }
  // Tokens that may still be appended before the length or the context limit ends the sequence.
  int64_t room() const {
    return std::min<int64_t>(max_new_ - static_cast<int64_t>(generated().size()),
                             context_limit_ - static_cast<int64_t>(context_.size()));
  }
  bool thought_forced_closed() const { return request_.think_budget && request_.think_budget->forced(); }
  // The request's stop string that ended the sequence; "" when none did (or an end token's spelled-out
  // text did, which is no stop string of the request).
  std::string matched_stop() const;

 private:
  bool is_eos(int32_t t) const;
  // The error for a grammar that allows no token now: where the output stopped and what it expected.
  [[noreturn]] void dead_end();
  // The logits with every token the grammar forbids at -inf; false when it allows none.
  bool mask(std::span<const float> logits);
  void route(std::string text, GenerationStep& out);  // to content, or through the reasoning parser
  bool in_reasoning() const { return request_.harmony ? request_.harmony->in_reasoning() : parser_.in_reasoning(); }
  void end(FinishReason reason, GenerationStep& out);
  struct Proposal {
    int32_t token;
    std::span<const sampling::Candidate> q;
  };
  GenerationStep next(std::span<const float> logits, const Proposal* proposal);

  GenerationRequest request_;
  int64_t context_limit_, max_new_;
  sampling::Sampler sampler_;
  sampling::StopStringMatcher stops_;
  tokenizer::StreamDecoder decoder_;
  chat::ReasoningParser parser_;  // a <think> reply's; request_.harmony splits a harmony one
  std::vector<int32_t> context_;  // prompt + generated
  int64_t output_bytes_ = 0;      // of the text streamed so far
  std::optional<grammar::Matcher> matcher_;
  bool grammar_on_ = false;     // false inside a thought: the grammar starts after it
  std::optional<int32_t> think_open_;  // a split-reasoning reply may open a thought as its first token
  std::vector<float> masked_;  // the masked logits of the step
  bool want_logprobs_, done_ = false;
};

}  // namespace ember::engine
