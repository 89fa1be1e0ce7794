#include "chat/reasoning.h"

#include <algorithm>

namespace ember::chat {

ReasoningParser::ReasoningParser(bool start_in_reasoning, std::string open_tag, std::string close_tag)
    : open_(std::move(open_tag)), close_(std::move(close_tag)), in_reasoning_(start_in_reasoning) {}

void ReasoningParser::route(std::string_view text, ReasoningDelta& out) const {
  (in_reasoning_ ? out.reasoning : out.content) += text;
}

ReasoningDelta ReasoningParser::push(std::string_view text) {
  ReasoningDelta out;
  held_ += text;
  for (;;) {
    const std::string& tag = in_reasoning_ ? close_ : open_;
    const size_t at = held_.find(tag);
    if (at != std::string::npos) {
      std::string before = held_.substr(0, at);
      if (!answer_started_) before.erase(0, std::min(before.size(), before.find_first_not_of("\n")));
      route(before, out);
      held_.erase(0, at + tag.size());
      in_reasoning_ = !in_reasoning_;
      answer_started_ = false;
      continue;
    }
    // Keep back the longest tail that is a prefix of the tag.
    size_t keep = 0;
    for (size_t n = std::min(tag.size() - 1, held_.size()); n > 0; --n)
      if (held_.compare(held_.size() - n, n, tag, 0, n) == 0) {
        keep = n;
        break;
      }
    std::string ready = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    if (!answer_started_) {
      ready.erase(0, std::min(ready.size(), ready.find_first_not_of("\n")));
      if (!ready.empty()) answer_started_ = true;
    }
    route(ready, out);
    return out;
  }
}

ReasoningDelta ReasoningParser::flush() {
  ReasoningDelta out;
  if (!answer_started_) held_.erase(0, std::min(held_.size(), held_.find_first_not_of("\n")));
  route(held_, out);
  held_.clear();
  return out;
}

ReasoningDelta split_reasoning(std::string_view text, bool start_in_reasoning) {
  ReasoningParser p(start_in_reasoning);
  ReasoningDelta all = p.push(text);
  ReasoningDelta rest = p.flush();
  all.reasoning += rest.reasoning;
  all.content += rest.content;
  return all;
}

bool prompt_opens_reasoning(std::string_view prompt, std::string_view open_tag, std::string_view close_tag) {
  const size_t open = prompt.rfind(open_tag);
  if (open == std::string_view::npos) return false;
  const size_t close = prompt.rfind(close_tag);
  return close == std::string_view::npos || close < open;
}

}  // namespace ember::chat
