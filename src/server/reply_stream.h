#pragma once
// One chat or text reply in flight, the same for every API: the scheduler's streams (one per
// choice), the request's deadline and its client's presence, and per choice the tool calls parsed
// out of the content. Each API's shaper (reply_shaper.h) turns the deltas into that API's stream
// events and the finished choices into its response.
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/forced_tool_call.h"
#include "chat/tool_call_parser.h"
#include "engine/scheduler.h"
#include "server/peer_watch.h"

namespace ember::server {

// How a choice ended (when `finished`).
struct ChoiceEnd {
  bool finished = false;
  engine::FinishReason finish = engine::FinishReason::kLength;
  std::string stop_string;  // the request's stop string that ended it (finish kStopString)
  bool called = false;      // the model ended its turn after making tool calls
  std::string error, error_code;  // the request failed (error_code: through its own fault)
};

// What one update of a choice adds.
struct ChoiceDelta : ChoiceEnd {
  size_t index = 0;
  std::string reasoning;
  // The content and the calls, in order: each part's content comes before its calls.
  std::vector<chat::ToolCallDelta> parts;
  std::vector<engine::GeneratedToken> tokens;
};

// All of a choice so far.
struct ChoiceReply : ChoiceEnd {
  std::string reasoning;
  chat::ParsedReply reply;  // content and tool calls
  std::vector<engine::GeneratedToken> tokens;
  int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
};

// A reply that ended without a finish reason the API knows (it failed, ran past the request
// timeout or was cut by shutdown): the status, message and code it is answered with.
struct ReplyFailure {
  int status;
  std::string message, code;
};

struct ReplyOptions {
  int n = 1;  // choices per prompt: prompt i's are i*n .. i*n + n-1
  std::optional<chat::ToolCallFormat> tool_format;  // set: calls are parsed out of the content
  std::vector<chat::ForcedToolCall> forced;          // the shapes of a forced call (tool_choice required or a function)
  std::chrono::steady_clock::time_point deadline;    // then the reply is cancelled
};

class ReplyStream {
 public:
  explicit ReplyStream(ReplyOptions options) : options_(std::move(options)) {}
  // The choices' streams, in order.
  void add(std::shared_ptr<engine::RequestStream> rs);
  // Cancels the reply once the request's client goes away.
  void watch(const httplib::Request& req) { peer_.emplace(req); }

  // The next delta of any choice, cancelling the reply once its deadline passed or its client left;
  // nullopt when none came within a short wait.
  std::optional<ChoiceDelta> next();
  void cancel_all();
  bool all_ended() const;

  size_t size() const { return choices_.size(); }
  const ChoiceReply& reply(size_t i) const { return choices_[i].all; }
  const ReplyOptions& options() const { return options_; }
  // What usage counts: every prompt once, every choice's tokens.
  engine::StreamUpdate totals() const;
  // Why a choice (or a delta of it) is an error, or nullopt.
  std::optional<ReplyFailure> failure(const ChoiceEnd& end, bool shutting_down) const;

 private:
  struct Choice {
    std::shared_ptr<engine::RequestStream> rs;
    ChoiceReply all;
    std::optional<chat::ToolCallParser> tools;
    std::string held;  // a forced call's text, decided at the end (a call, or content)
  };
  ChoiceDelta took(size_t i, const engine::StreamUpdate& u);
  // A forced call that max_tokens or the context cut off: the calls it began, in place of the
  // content holding them (as OpenAI's, with finish reason "length").
  std::vector<chat::ToolCall> take_cut_calls(engine::FinishReason finish, std::string& content) const;

  ReplyOptions options_;
  std::vector<Choice> choices_;
  std::optional<PeerWatch> peer_;
  size_t poll_from_ = 0;  // round robin over the choices
  bool timed_out_ = false;
};

}  // namespace ember::server
