#include "server/reply_stream.h"

#include <algorithm>

#include "chat/partial_tool_call.h"

namespace ember::server {

void ReplyStream::add(std::shared_ptr<engine::RequestStream> rs) {
  Choice& ch = choices_.emplace_back();
  ch.rs = std::move(rs);
  if (options_.tool_format) ch.tools.emplace(*options_.tool_format, chat::random_call_ids(*options_.tool_format));
}

void ReplyStream::cancel_all() {
  for (Choice& ch : choices_) ch.rs->cancel();
}

bool ReplyStream::all_ended() const {
  return std::all_of(choices_.begin(), choices_.end(), [](const Choice& ch) { return ch.all.finished; });
}

std::optional<ChoiceDelta> ReplyStream::next() {
  if (!timed_out_ && std::chrono::steady_clock::now() > options_.deadline) {
    timed_out_ = true;
    cancel_all();
  }
  if (peer_ && peer_->gone()) cancel_all();
  std::vector<size_t> open;
  for (size_t k = 0; k < choices_.size(); ++k)
    if (const size_t i = (poll_from_ + k) % choices_.size(); !choices_[i].all.finished) open.push_back(i);
  if (open.empty()) return std::nullopt;
  poll_from_ = (open.front() + 1) % choices_.size();
  engine::StreamUpdate u;
  if (open.size() > 1)
    for (size_t i : open)
      if (choices_[i].rs->next(u, std::chrono::milliseconds(0))) return took(i, u);
  // One choice (or none had news): wait on one; a single stream wakes as soon as it has news.
  const auto wait = std::chrono::milliseconds(open.size() > 1 ? 10 : 100);
  if (choices_[open.front()].rs->next(u, wait)) return took(open.front(), u);
  return std::nullopt;
}

std::vector<chat::ToolCall> ReplyStream::take_cut_calls(engine::FinishReason finish, std::string& content) const {
  if (options_.forced.empty() || (finish != engine::FinishReason::kLength && finish != engine::FinishReason::kContext))
    return {};
  std::vector<chat::ToolCall> cut =
      chat::partial_tool_calls(options_.forced, content, chat::random_call_ids(*options_.tool_format));
  if (!cut.empty()) content.clear();
  return cut;
}

ChoiceDelta ReplyStream::took(size_t i, const engine::StreamUpdate& u) {
  Choice& ch = choices_[i];
  ChoiceDelta d;
  d.index = i;
  d.reasoning = u.reasoning;
  d.tokens = u.tokens;
  if (ch.tools) {
    chat::ToolCallDelta part = ch.tools->push(u.content);
    // A forced reply is all call: text the parser let go (a call it found malformed, a cut one)
    // waits for the end, where a cut call still goes out as one.
    if (!options_.forced.empty()) ch.held += std::exchange(part.content, {});
    d.parts.push_back(std::move(part));
    if (u.finished) {  // what the parser held back
      chat::ToolCallDelta rest = ch.tools->flush();
      rest.content = std::exchange(ch.held, {}) + rest.content;
      size_t index = ch.tools->calls();
      for (auto& call : take_cut_calls(u.finish, rest.content))
        rest.tool_calls.push_back({index++, std::move(call.id), std::move(call.name), std::move(call.arguments)});
      d.parts.push_back(std::move(rest));
    }
  } else {
    d.parts.push_back({u.content, {}});
  }
  ChoiceReply& all = ch.all;
  all.reasoning += u.reasoning;
  for (const auto& part : d.parts) chat::append_delta(all.reply, part);
  all.tokens.insert(all.tokens.end(), u.tokens.begin(), u.tokens.end());
  if (u.finished) {
    d.finished = true;
    d.finish = u.finish;
    d.stop_string = u.stop_string;
    d.error = u.error;
    d.error_code = u.error_code;
    d.called = !all.reply.tool_calls.empty() &&
               (u.finish == engine::FinishReason::kEos || u.finish == engine::FinishReason::kStopString);
    static_cast<ChoiceEnd&>(all) = d;
    all.prompt_tokens = u.prompt_tokens;
    all.cached_tokens = u.cached_tokens;
    all.completion_tokens = u.completion_tokens;
  }
  return d;
}

engine::StreamUpdate ReplyStream::totals() const {
  engine::StreamUpdate t;
  for (size_t i = 0; i < choices_.size(); ++i) {
    const ChoiceReply& a = choices_[i].all;
    if (i % static_cast<size_t>(options_.n) == 0) {
      t.prompt_tokens += a.prompt_tokens;
      t.cached_tokens += a.cached_tokens;
    }
    t.completion_tokens += a.completion_tokens;
  }
  return t;
}

std::optional<ReplyFailure> ReplyStream::failure(const ChoiceEnd& e, bool shutting_down) const {
  if (!e.error.empty() && !e.error_code.empty()) return ReplyFailure{400, e.error, e.error_code};  // the request's fault
  if (!e.error.empty()) return ReplyFailure{500, "generation failed: " + e.error, ""};
  if (!e.finished || e.finish != engine::FinishReason::kCancelled) return std::nullopt;
  if (timed_out_)
    return ReplyFailure{503, "the request ran past the server's request timeout and was stopped", "request_timeout"};
  if (shutting_down) return ReplyFailure{503, "the server is shutting down: the request was stopped", "server_shutting_down"};
  return ReplyFailure{503, "the request was stopped", "request_cancelled"};
}

}  // namespace ember::server
