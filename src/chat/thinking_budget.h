#pragma once
// Caps the length of a thought: after `budget` tokens inside <think>, the closing tag is forced
// and the model goes on to answer.
#include <cstdint>
#include <vector>

namespace ember::chat {

class ThinkingBudget {
 public:
  // open_id / close_id: the ids of "<think>" and "</think>" (close_ids may be several tokens when the
  // tag is not a single token). budget < 0: unlimited.
  ThinkingBudget(int32_t open_id, std::vector<int32_t> close_ids, int64_t budget, bool start_in_thought);
  // A thought told by the reply's parser rather than by a token (a harmony analysis message, whose
  // markers may be several tokens): call after_thought_token instead of after_token.
  static ThinkingBudget of_parsed_thought(std::vector<int32_t> close_ids, int64_t budget);

  // Call with each token, after its text went through the parser: `thinking` is whether the reply
  // is inside a thought now. Returns the tokens to force after it (close_ids once the thought has
  // had `budget` tokens past the one that opened it).
  std::vector<int32_t> after_thought_token(bool thinking);

  // Call with each sampled token; returns the tokens to force after it.
  std::vector<int32_t> after_token(int32_t token);
  bool thinking() const { return thinking_; }
  bool forced() const { return forced_; }

 private:
  int32_t open_id_;
  std::vector<int32_t> close_ids_;
  int64_t budget_;
  bool thinking_;
  bool forced_ = false;
  int64_t used_ = 0;
};

}  // namespace ember::chat
