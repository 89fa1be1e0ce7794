#pragma once
// What each API (OpenAI Chat Completions and Completions, OpenAI Responses, Anthropic Messages)
// makes of a ReplyStream: its stream events and its whole response, and its error shape. The
// server runs every reply the same way and asks the request's shaper for the bytes.
#include <string>

#include "server/openai.h"
#include "server/reply_stream.h"

namespace ember::server {

class ReplyShaper {
 public:
  virtual ~ReplyShaper() = default;
  // Events sent before any delta (a stream's opening).
  virtual std::string open(const ReplyStream&) { return {}; }
  // The events of one delta.
  virtual std::string delta(const ReplyStream& reply, const ChoiceDelta& d) = 0;
  // The last events, once every choice has ended.
  virtual std::string close(const ReplyStream& reply) = 0;
  // The event a stream ends with when the reply failed.
  virtual std::string stream_error(const ReplyFailure& f) = 0;
  // The response of a reply that was not streamed (every choice ended, none failed).
  virtual ordered_json whole(const ReplyStream& reply) = 0;
};

// One server-sent event: "data: JSON", after "event: NAME" when `event` is set.
std::string sse(const ordered_json& data, const std::string& event = {});

}  // namespace ember::server
