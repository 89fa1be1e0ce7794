#pragma once
// Splits a gpt-oss reply (OpenAI's harmony format) into reasoning and answer, as ReasoningParser does
// for <think> models. A reply is a run of messages, each `[<|start|>assistant]<|channel|>CHANNEL
// [to=RECIPIENT] [<|constrain|>json]<|message|>BODY` ended by <|end|>, <|return|> or <|call|>:
// `analysis` bodies are reasoning, `final` (and `commentary` without a recipient, a preamble) are
// the answer, and a message with a recipient (`to=functions.NAME`, a tool call) goes to the answer
// verbatim, markers included, for the gpt-oss tool-call parser (ToolCallFormat::kHarmony) to read.
// The markers are matched as text (a tokenizer without harmony's special tokens spells them in
// pieces); a tail that could begin one is held back until the next delta decides it.
#include <string>
#include <string_view>

#include "chat/reasoning.h"

namespace ember::chat {

// What the thinking budget forces when a thought runs out: the analysis message ends and the final
// one opens (as "</think>" closes a thought).
inline constexpr std::string_view kHarmonyCloseThought = "<|end|><|start|>assistant<|channel|>final<|message|>";
// The header of an answer, after "<|start|>assistant".
inline constexpr std::string_view kHarmonyFinal = "<|channel|>final<|message|>";

// True when a chat template renders harmony (gpt-oss's): it writes channels and messages.
bool is_harmony_template(std::string_view template_source);

class HarmonyParser {
 public:
  // A reply that starts a message's header (the prompt ended with "<|start|>assistant").
  HarmonyParser() = default;
  // The parser where `prompt` leaves off: inside the header or the body of its last message.
  static HarmonyParser after_prompt(std::string_view prompt);

  ReasoningDelta push(std::string_view text);
  ReasoningDelta flush();
  // Inside an analysis message's body.
  bool in_reasoning() const { return state_ == State::kBody && route_ == Route::kReasoning; }

 private:
  enum class State { kHeader, kBody, kText };  // kText: output that is no harmony, all answer
  enum class Route { kReasoning, kContent, kCall };
  void header_done(std::string_view header, ReasoningDelta& out);
  void emit(std::string_view text, ReasoningDelta& out) const;

  State state_ = State::kHeader;
  Route route_ = Route::kContent;
  size_t primed_ = 0;  // bytes of held_ that came from the prompt (its open header), not the reply
  std::string held_;
};

// Whole-text form: what a finished harmony reply splits into.
ReasoningDelta split_harmony(std::string_view text);

}  // namespace ember::chat
