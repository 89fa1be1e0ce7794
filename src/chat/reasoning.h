#pragma once
// Splits a model's streamed output into reasoning (inside <think>...</think>) and the answer.
// Tags may arrive split over several deltas, so a tail that could begin a tag is held back.
#include <string>
#include <string_view>

namespace ember::chat {

// The tags of a thought, as the thinking models' templates write them (one owner: the parser, the
// prompt builder's budget and the grammar's wait for the thought all use these).
inline constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";

struct ReasoningDelta {
  std::string reasoning;
  std::string content;
};

class ReasoningParser {
 public:
  // start_in_reasoning: the prompt already opened a thought (it ends inside <think>).
  explicit ReasoningParser(bool start_in_reasoning = false, std::string open_tag = std::string(kThinkOpen),
                           std::string close_tag = std::string(kThinkClose));
  ReasoningDelta push(std::string_view text);
  ReasoningDelta flush();
  bool in_reasoning() const { return in_reasoning_; }

 private:
  void route(std::string_view text, ReasoningDelta& out) const;

  std::string open_, close_;
  std::string held_;
  bool in_reasoning_;
  bool answer_started_ = false;  // leading newlines of a thought or an answer are dropped
};

// Whole-text form: what a finished reply splits into (answer with leading whitespace after the
// thought removed, as chat templates do with history).
ReasoningDelta split_reasoning(std::string_view text, bool start_in_reasoning = false);

// True if `prompt` leaves a <think> open (its last <think> comes after its last </think>).
bool prompt_opens_reasoning(std::string_view prompt, std::string_view open_tag = kThinkOpen,
                            std::string_view close_tag = kThinkClose);

}  // namespace ember::chat
