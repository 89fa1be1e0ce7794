#include "chat/harmony.h"

#include <algorithm>
#include <array>
#include <utility>

namespace ember::chat {
namespace {

constexpr std::string_view kStart = "<|start|>", kChannel = "<|channel|>", kMessage = "<|message|>",
                           kCall = "<|call|>";
// What ends a message's body: its end markers, or a new message's start written without one.
constexpr std::array<std::string_view, 4> kBodyEnds{"<|end|>", "<|return|>", kCall, kStart};
// A header longer than this is no header: the output is taken as plain text.
constexpr size_t kMaxHeader = 256;

// The longest tail of `s` that is a proper prefix of one of `markers`.
template <typename Markers>
size_t held_tail(std::string_view s, const Markers& markers) {
  size_t keep = 0;
  for (std::string_view m : markers)
    for (size_t n = std::min(m.size() - 1, s.size()); n > keep; --n)
      if (s.substr(s.size() - n) == m.substr(0, n)) {
        keep = n;
        break;
      }
  return keep;
}

}  // namespace

bool is_harmony_template(std::string_view src) {
  return src.find(kChannel) != std::string_view::npos && src.find(kMessage) != std::string_view::npos &&
         src.find(kStart) != std::string_view::npos;
}

HarmonyParser HarmonyParser::after_prompt(std::string_view prompt) {
  HarmonyParser p;
  const size_t at = prompt.rfind(kStart);
  if (at == std::string_view::npos) return p;
  p.push(prompt.substr(at + kStart.size()));
  p.primed_ = p.state_ == State::kHeader ? p.held_.size() : 0;
  return p;
}

void HarmonyParser::emit(std::string_view text, ReasoningDelta& out) const {
  (route_ == Route::kReasoning ? out.reasoning : out.content) += text;
}

void HarmonyParser::header_done(std::string_view h, ReasoningDelta& out) {
  if (h.starts_with(kStart)) h.remove_prefix(kStart.size());
  primed_ = 0;
  const size_t channel = h.find(kChannel);
  std::string_view name;
  if (channel != std::string_view::npos) {
    name = h.substr(channel + kChannel.size());
    name = name.substr(0, std::min(name.find(' '), name.find("<|")));
  }
  if (h.find("to=") != std::string_view::npos) {
    // A call: the parser reads it from its markers. A header whose role part names no recipient is
    // written from its channel on, as a forced call's grammar writes it.
    route_ = Route::kCall;
    const std::string_view role = h.substr(0, std::min(channel, h.size()));
    if (channel != std::string_view::npos && role.find("to=") == std::string_view::npos) out.content += h.substr(channel);
    else out.content += std::string(kStart) + std::string(h);
    out.content += kMessage;
    return;
  }
  route_ = name == "analysis" ? Route::kReasoning : Route::kContent;
}

ReasoningDelta HarmonyParser::push(std::string_view text) {
  ReasoningDelta out;
  held_ += text;
  for (;;) {
    if (state_ == State::kText) {
      out.content += held_;
      held_.clear();
      return out;
    }
    if (state_ == State::kHeader) {
      const size_t at = held_.find(kMessage);
      if (at == std::string::npos) {
        if (held_.size() - primed_ > kMaxHeader) {  // no harmony: the text is the answer
          held_.erase(0, std::exchange(primed_, 0));
          state_ = State::kText;
          continue;
        }
        return out;
      }
      const std::string header = held_.substr(0, at);
      held_.erase(0, at + kMessage.size());
      header_done(header, out);
      state_ = State::kBody;
      continue;
    }
    // A body: up to the first marker that ends it.
    size_t at = std::string::npos;
    std::string_view end;
    for (std::string_view m : kBodyEnds)
      if (const size_t i = held_.find(m); i < at) {
        at = i;
        end = m;
      }
    if (at == std::string::npos) {
      const size_t keep = held_tail(held_, kBodyEnds);
      emit(std::string_view(held_).substr(0, held_.size() - keep), out);
      held_.erase(0, held_.size() - keep);
      return out;
    }
    emit(std::string_view(held_).substr(0, at), out);
    if (route_ == Route::kCall) out.content += kCall;  // whichever marker ended it, the call is whole
    held_.erase(0, at + end.size());
    state_ = State::kHeader;
    route_ = Route::kContent;
  }
}

ReasoningDelta HarmonyParser::flush() {
  ReasoningDelta out;
  if (state_ == State::kHeader) {
    // An unfinished header is dropped; text that never became one is the answer.
    const std::string_view rest = std::string_view(held_).substr(primed_);
    if (rest.find("<|") == std::string_view::npos) out.content += rest;
  } else {
    emit(held_, out);
  }
  held_.clear();
  primed_ = 0;
  return out;
}

ReasoningDelta split_harmony(std::string_view text) {
  HarmonyParser p;
  ReasoningDelta all = p.push(text);
  ReasoningDelta rest = p.flush();
  all.reasoning += rest.reasoning;
  all.content += rest.content;
  return all;
}

}  // namespace ember::chat
