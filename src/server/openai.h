#pragma once
// OpenAI's API shapes: request bodies checked field by field into Ember's structs, and the JSON of
// responses, stream chunks and errors. No HTTP here, so all of it is testable without a socket.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/chat_plan.h"
#include "engine/chat_session.h"
#include "engine/scheduler.h"
#include "sampling/generation_config.h"
#include "tokenizer/tokenizer.h"

namespace ember::server {

using nlohmann::ordered_json;

// An error the client caused or must know about, with its HTTP status and OpenAI error type.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string param = {}, std::string code = {});
  int status;
  std::string param, code;
};

// {"error": {"message", "type", "param", "code"}} with the type OpenAI uses for `status`.
ordered_json error_body(int status, const std::string& message, const std::string& param = {},
                        const std::string& code = {});

// The fields common to chat and text completions.
struct CompletionRequest {
  sampling::SamplingParams params;
  int n = 1;  // choices per prompt (each forks the prompt's cache and samples on its own)
  bool stream = false;
  bool include_usage = false;
  // Ember's own: false, no speculative decoding for this request on a server that speculates (serve
  // --spec); true asks for it, refused where the server does not speculate. Unset: the server's mode.
  std::optional<bool> speculative;
  int32_t top_logprobs = 0;  // with params.logprobs
  std::string model;
  std::optional<int64_t> max_tokens;    // as the client gave it, in the field named here:
  std::string max_tokens_field;         // max_tokens or max_completion_tokens
  std::string prompt_field = "messages";  // what the API calls the prompt (messages, prompt, input)
  engine::OutputFormat response_format;   // response_format or grammar: the structure of the text
};

// OpenAI's tool_choice ("none", "auto", "required", {"type": "function", "function": {"name"}}) and
// response_format (text, any JSON object, JSON of a schema): the engine's terms (engine/chat_plan.h).
using ToolChoice = engine::ToolChoice;
using ResponseFormat = engine::OutputFormat;

struct ChatRequest : CompletionRequest {
  ordered_json messages;  // as the template reads them (tool call arguments parsed into objects)
  engine::ChatOptions options;
  ToolChoice tool_choice;  // "auto" when tools are given and tool_choice is not
  bool parallel_tool_calls = true;
};

// Choices per prompt the API accepts (OpenAI allows 128; each choice is a sequence in the batch).
constexpr int kMaxChoices = 8;

struct TextPrompt {
  std::string text;
  std::vector<int32_t> ids;  // a prompt given as token ids (then `text` is empty)
};

struct TextRequest : CompletionRequest {
  std::vector<TextPrompt> prompts;  // one or more; the choices of prompt i are i*n .. i*n + n-1
  bool echo = false;                // each choice's text starts with its prompt
};

// `defaults`: the model's generation_config (eos ids merged); `vocab_size`: the model's, which bounds
// logit_bias token ids. Throws ApiError(400) naming the field.
ChatRequest parse_chat_request(const ordered_json& body, const sampling::SamplingParams& defaults, size_t vocab_size);
TextRequest parse_text_request(const ordered_json& body, const sampling::SamplingParams& defaults, size_t vocab_size);

// A string, a list of token ids, or a list of those: the `prompt` of /v1/completions and the
// `input` of /v1/embeddings. Throws ApiError(400) naming `name`.
std::vector<TextPrompt> parse_prompts(const ordered_json& value, const char* name, size_t vocab_size);

// Parses a request body; throws ApiError(400) for malformed JSON or a non-object.
ordered_json parse_body(const std::string& text);

// OpenAI's finish_reason for an engine finish.
const char* finish_reason(engine::FinishReason r);

// {"token", "logprob", "bytes", "top_logprobs"} entries of the generated tokens. `pieces` has been
// fed the choice's earlier tokens: each token's text is what it adds to the choice's text (a
// SentencePiece token keeps its leading space), and a token holding part of a character (a
// character split over tokens) is "bytes:\xNN..." with its own bytes, as OpenAI writes it: the
// entries' bytes concatenate to the content. End tokens, which the content leaves out, get no entry.
ordered_json logprobs_json(const tokenizer::Tokenizer& tok, tokenizer::StreamDecoder& pieces,
                           const std::vector<engine::GeneratedToken>& tokens, bool with_top);

ordered_json usage_json(const engine::StreamUpdate& final_update);

}  // namespace ember::server
