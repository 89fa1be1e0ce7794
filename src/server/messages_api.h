#pragma once
// Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens): its request read into the
// engine-level ChatRequest, its message object and stream events (message_start ... message_stop)
// shaped from a ReplyStream, and its error shape. No HTTP here.
#include <memory>
#include <string>

#include "server/reply_shaper.h"

namespace ember::server {

// `counting`: a count_tokens body (no max_tokens, no sampling). Throws ApiError(400) naming the
// field (messages[1].content[0].type, max_tokens, ...).
ChatRequest parse_messages_request(const ordered_json& body, const sampling::SamplingParams& defaults,
                                   size_t vocab_size, bool counting = false);

// {"type": "error", "error": {"type", "message"}} with Anthropic's type for `status`.
ordered_json anthropic_error_body(int status, const std::string& message, const std::string& param = {},
                                  const std::string& code = {});

struct MessagesReplyOptions {
  std::string id, model;   // id: "msg_..."
  int64_t prompt_tokens = 0;  // for a message_start before any delta (a stream that failed first)
};

std::unique_ptr<ReplyShaper> messages_shaper(MessagesReplyOptions options);

}  // namespace ember::server
