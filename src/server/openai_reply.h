#pragma once
// OpenAI's Chat Completions and Completions replies: chat.completion / text_completion objects and
// their chunks, logprobs included.
#include <memory>
#include <string>
#include <vector>

#include "server/reply_shaper.h"

namespace ember::server {

struct OpenAiReplyOptions {
  bool chat = true;  // chat.completion; else text_completion
  bool include_usage = false, logprobs = false, with_top = false;
  std::string id, model;
  int64_t created = 0;
  std::vector<std::string> echoes;  // /v1/completions with echo: prompt i's text, before its choices' text
};

std::unique_ptr<ReplyShaper> openai_shaper(const tokenizer::Tokenizer& tokenizer, OpenAiReplyOptions options);

}  // namespace ember::server
