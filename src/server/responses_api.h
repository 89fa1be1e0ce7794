#pragma once
// OpenAI's Responses API (/v1/responses): its request read into the engine-level ChatRequest, and
// its response object and stream events (response.created ... response.completed) shaped from a
// ReplyStream. Stateless: responses are not stored (store is answered false), so
// previous_response_id and item references are refused by name. No HTTP here.
#include <memory>
#include <string>

#include "server/reply_shaper.h"

namespace ember::server {

struct ResponsesRequest {
  ChatRequest chat;
  ordered_json echoed;  // the request's settings the response object repeats
  bool output_logprobs = false;  // include: message.output_text.logprobs
};

// Throws ApiError(400) naming the field (input[2].content, tools[0].type, ...).
ResponsesRequest parse_responses_request(const ordered_json& body, const sampling::SamplingParams& defaults,
                                         size_t vocab_size);

struct ResponsesReplyOptions {
  std::string id, model;  // id: "resp_..."
  int64_t created_at = 0;
  ordered_json echoed;
  bool output_logprobs = false, with_top = false;
};

std::unique_ptr<ReplyShaper> responses_shaper(const tokenizer::Tokenizer& tokenizer, ResponsesReplyOptions options);

}  // namespace ember::server
