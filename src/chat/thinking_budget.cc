#include "chat/thinking_budget.h"

#include <utility>

namespace ember::chat {

ThinkingBudget::ThinkingBudget(int32_t open_id, std::vector<int32_t> close_ids, int64_t budget, bool start_in_thought)
    : open_id_(open_id), close_ids_(std::move(close_ids)), budget_(budget), thinking_(start_in_thought) {}

ThinkingBudget ThinkingBudget::of_parsed_thought(std::vector<int32_t> close_ids, int64_t budget) {
  return ThinkingBudget(-1, std::move(close_ids), budget, false);
}

std::vector<int32_t> ThinkingBudget::after_thought_token(bool thinking) {
  if (!thinking) {
    thinking_ = false;
    return {};
  }
  if (!thinking_) {  // the token that opened the thought
    thinking_ = true;
    used_ = 0;
  } else {
    ++used_;
  }
  if (budget_ < 0 || used_ < budget_) return {};
  thinking_ = false;
  forced_ = true;
  return close_ids_;
}

std::vector<int32_t> ThinkingBudget::after_token(int32_t token) {
  if (!thinking_) {
    if (token != open_id_) return {};
    if (budget_ == 0) {  // no thought at all: closed as soon as it opens
      forced_ = true;
      return close_ids_;
    }
    thinking_ = true;
    used_ = 0;
    return {};
  }
  if (close_ids_.size() == 1 && token == close_ids_[0]) {
    thinking_ = false;
    return {};
  }
  if (budget_ >= 0 && ++used_ >= budget_) {
    thinking_ = false;
    forced_ = true;
    return close_ids_;
  }
  return {};
}

}  // namespace ember::chat
