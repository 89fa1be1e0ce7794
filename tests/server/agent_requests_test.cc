// The Responses and Anthropic Messages request parsers (no socket): what each field becomes in the
// engine-level ChatRequest, and the 400s that name the field at fault in the API's own spelling.
#include <gtest/gtest.h>

#include "server/messages_api.h"
#include "server/responses_api.h"

namespace ember::server {
namespace {

using nlohmann::ordered_json;

constexpr size_t kVocab = 1000;

ResponsesRequest responses(const ordered_json& body) { return parse_responses_request(body, {}, kVocab); }
ChatRequest messages(const ordered_json& body, bool counting = false) {
  return parse_messages_request(body, {}, kVocab, counting);
}

// The param an ApiError names, or "" when `f` does not throw one.
template <typename F>
std::string refused_param(F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    return e.param.empty() ? "(none)" : e.param;
  }
  return "";
}

TEST(ResponsesRequest, InputItemsBecomeChatMessages) {
  const ResponsesRequest r = responses(ordered_json::parse(R"({
    "model": "m", "instructions": "Be brief.", "max_output_tokens": 12, "temperature": 0,
    "input": [
      {"role": "developer", "content": "Use tools."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather "}, {"type": "input_text", "text": "in Paris?"}]},
      {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": null},
      {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "21 C"}]})"));
  const ordered_json& m = r.chat.messages;
  ASSERT_EQ(m.size(), 5u) << m.dump();
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[0]["content"], "Be brief.");
  EXPECT_EQ(m[1]["role"], "system") << "developer is the system role for templates";
  EXPECT_EQ(m[2]["content"], "Weather in Paris?");
  EXPECT_EQ(m[3]["role"], "assistant");
  EXPECT_EQ(m[3]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m[3]["tool_calls"][0]["function"]["arguments"]["city"], "Paris") << "arguments parsed for the template";
  EXPECT_EQ(m[4]["role"], "tool");
  EXPECT_EQ(m[4]["tool_call_id"], "call_1");
  EXPECT_EQ(m[4]["content"], "21 C");
  EXPECT_EQ(*r.chat.max_tokens, 12);
  EXPECT_EQ(r.chat.max_tokens_field, "max_output_tokens");
  EXPECT_EQ(r.chat.prompt_field, "input");
  EXPECT_EQ(r.echoed["instructions"], "Be brief.");
  EXPECT_EQ(r.echoed["store"], false) << "nothing is stored, whatever the client asked";
}

// The response object states the sampling the reply runs with: the client's values, else the
// model's generation_config (greedy: temperature 0), not OpenAI's defaults.
TEST(ResponsesRequest, EchoesTheSamplingItRunsWith) {
  EXPECT_EQ(responses(ordered_json::parse(R"({"input": "hi"})")).echoed["temperature"], 0.0);
  EXPECT_EQ(responses(ordered_json::parse(R"({"input": "hi"})")).echoed["top_p"], 1.0);
  const ResponsesRequest given = responses(ordered_json::parse(R"({"input": "hi", "temperature": 0.7, "top_p": 0.9})"));
  EXPECT_EQ(given.echoed["temperature"], 0.7);
  EXPECT_EQ(given.echoed["top_p"], 0.9);
  sampling::SamplingParams model;  // a generation_config that samples
  model.do_sample = true;
  model.temperature = 0.5f;
  model.top_p = 0.75f;
  const ResponsesRequest dflt = parse_responses_request(ordered_json::parse(R"({"input": "hi"})"), model, kVocab);
  EXPECT_EQ(dflt.echoed["temperature"], 0.5);
  EXPECT_EQ(dflt.echoed["top_p"], 0.75);
}

// chat_template_kwargs.enable_thinking false is thinking off for the engine too, not only for the
// template: a forced call's or a format's grammar then holds from the first token (with it unset the
// model could open <think> and the grammar waited for a </think> that never came).
TEST(ChatRequest, TemplateKwargEnableThinkingReachesTheEngine) {
  auto parse = [](const char* kwargs) {
    return parse_chat_request(ordered_json::parse(std::string(R"({"messages": [{"role": "user", "content": "x"}], )") +
                                                  R"("chat_template_kwargs": )" + kwargs + "}"),
                              {}, kVocab);
  };
  const ChatRequest off = parse(R"({"enable_thinking": false})");
  ASSERT_TRUE(off.options.enable_thinking.has_value());
  EXPECT_FALSE(*off.options.enable_thinking);
  EXPECT_EQ(off.options.extra_variables["enable_thinking"], false);
  EXPECT_TRUE(*parse(R"({"enable_thinking": true})").options.enable_thinking);
  EXPECT_FALSE(parse(R"({"enable_thinking": "no"})").options.enable_thinking.has_value()) << "the template reads it";
}

TEST(ResponsesRequest, ToolsFormatAndReasoningMapToTheEngineRequest) {
  const ResponsesRequest r = responses(ordered_json::parse(R"({
    "input": "hi", "reasoning": {"effort": "none", "summary": "auto"},
    "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": true}],
    "tool_choice": {"type": "function", "name": "f"}, "parallel_tool_calls": false,
    "include": ["reasoning.encrypted_content"], "store": true, "metadata": {"k": "v"}})"));
  EXPECT_EQ(r.chat.tool_choice.mode, ToolChoice::Mode::kFunction);
  EXPECT_EQ(r.chat.tool_choice.function, "f");
  EXPECT_FALSE(r.chat.parallel_tool_calls);
  EXPECT_EQ(r.chat.options.tools[0]["function"]["name"], "f");
  ASSERT_TRUE(r.chat.options.enable_thinking.has_value());
  EXPECT_FALSE(*r.chat.options.enable_thinking);

  const ResponsesRequest s = responses(ordered_json::parse(R"({"input": "hi",
    "text": {"format": {"type": "json_schema", "name": "p", "schema": {"type": "object"}}}})"));
  EXPECT_EQ(s.chat.response_format.kind, ResponseFormat::Kind::kJsonSchema);
  EXPECT_EQ(s.chat.response_format.name, "p");
  const ResponsesRequest l = responses(ordered_json::parse(R"({"input": "hi",
    "include": ["message.output_text.logprobs"], "top_logprobs": 3})"));
  EXPECT_TRUE(l.output_logprobs);
  EXPECT_TRUE(l.chat.params.logprobs);
  EXPECT_EQ(l.chat.top_logprobs, 3);
}

TEST(ResponsesRequest, RefusalsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"input": "x", "frobnicate": 1})", "frobnicate"},
      {R"({})", "input"},
      {R"({"input": 3})", "input"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})", "input[0].content[0].type"},
      {R"({"input": [{"type": "item_reference", "id": "msg_1"}]})", "input[0]"},
      {R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})", "input[0].call_id"},
      {R"({"input": "x", "tools": [{"type": "web_search"}]})", "tools[0].type"},
      {R"({"input": "x", "previous_response_id": "resp_1"})", "previous_response_id"},
      {R"({"input": "x", "background": true})", "background"},
      {R"({"input": "x", "truncation": "auto"})", "truncation"},
      {R"({"input": "x", "include": ["file_search_call.results"]})", "include"},
      {R"({"input": "x", "max_output_tokens": -1})", "max_output_tokens"},
      {R"({"input": "x", "temperature": 5})", "temperature"},
      {R"({"input": "x", "text": {"format": {"type": "yaml"}}})", "text.format"},
      {R"({"input": "x", "text": {"verbosity": "low"}})", "text.verbosity"},
      {R"({"input": "x", "reasoning": {"effort": "extreme"}})", "reasoning.effort"},
      {R"({"input": "x", "top_logprobs": 2})", "top_logprobs"},
      {R"({"input": "x", "tool_choice": "required"})", "tool_choice"},
  };
  for (const auto& [text, param] : cases) {
    const std::string body = text;  // a structured binding, which clang 14's lambdas cannot capture
    EXPECT_EQ(refused_param([&] { responses(ordered_json::parse(body)); }), param) << body;
  }
}

TEST(MessagesRequest, BlocksBecomeChatMessages) {
  const ChatRequest r = messages(ordered_json::parse(R"({
    "model": "m", "max_tokens": 64, "system": [{"type": "text", "text": "Be brief."}],
    "stop_sequences": ["END"], "temperature": 0.5, "top_k": 5,
    "messages": [
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": ""},
                                        {"type": "text", "text": "Let me look."},
                                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "21 C"}]},
                                   {"type": "text", "text": "Thanks"}]}],
    "tools": [{"name": "get_weather", "description": "d", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": true}})"));
  const ordered_json& m = r.messages;
  ASSERT_EQ(m.size(), 5u) << m.dump();
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[2]["reasoning_content"], "hmm");
  EXPECT_EQ(m[2]["content"], "Let me look.");
  EXPECT_EQ(m[2]["tool_calls"][0]["id"], "toolu_1");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
  EXPECT_EQ(m[3]["role"], "tool");
  EXPECT_EQ(m[3]["content"], "21 C");
  EXPECT_EQ(m[4]["content"], "Thanks");
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::kRequired);
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.options.tools[0]["function"]["parameters"]["type"], "object");
  EXPECT_EQ(r.params.stop_strings, std::vector<std::string>{"END"});
  EXPECT_EQ(r.params.top_k, 5);
  EXPECT_EQ(*r.max_tokens, 64);
}

TEST(MessagesRequest, SystemMessagesJoinTheSystemPrompt) {
  const ChatRequest r = messages(ordered_json::parse(R"({"model": "m", "max_tokens": 8, "system": "A.",
    "messages": [{"role": "user", "content": "x"}, {"role": "system", "content": [{"type": "text", "text": "B."}]},
                 {"role": "assistant", "content": "y"}]})"));
  ASSERT_EQ(r.messages.size(), 3u) << r.messages.dump();
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[0]["content"], "A.\nB.");
  EXPECT_EQ(r.messages[1]["role"], "user");
}

TEST(MessagesRequest, ClaudeCodesSettingsAreRead) {
  const ChatRequest r = messages(ordered_json::parse(R"({"model": "m", "max_tokens": 8,
    "messages": [{"role": "user", "content": "x"}], "thinking": {"type": "adaptive"},
    "output_config": {"effort": "high", "format": {"type": "json_schema", "schema": {"type": "object"}}},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}})"));
  EXPECT_TRUE(*r.options.enable_thinking);
  EXPECT_LT(r.options.think_budget, 0) << "adaptive: no budget";
  EXPECT_EQ(r.options.extra_variables["reasoning_effort"], "high");
  EXPECT_EQ(r.response_format.kind, ResponseFormat::Kind::kJsonSchema);
  const std::string user = R"("model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}])";
  EXPECT_EQ(refused_param([&] {
              messages(ordered_json::parse("{" + user + R"(, "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}})"));
            }),
            "context_management.edits[0]");
  EXPECT_EQ(refused_param([&] { messages(ordered_json::parse("{" + user + R"(, "output_config": {"effort": "huge"}})")); }),
            "output_config.effort");
}

TEST(MessagesRequest, ThinkingMapsToTheBudget) {
  const ChatRequest on = messages(ordered_json::parse(
      R"({"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "x"}], "thinking": {"type": "enabled", "budget_tokens": 16}})"));
  EXPECT_EQ(on.options.think_budget, 16);
  EXPECT_TRUE(*on.options.enable_thinking);
  const ChatRequest off = messages(ordered_json::parse(
      R"({"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "x"}], "thinking": {"type": "disabled"}})"));
  EXPECT_FALSE(*off.options.enable_thinking);
  // Without the field Anthropic does not think: a template that thinks by default is told not to.
  const ChatRequest absent = messages(ordered_json::parse(
      R"({"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "x"}]})"));
  ASSERT_TRUE(absent.options.enable_thinking.has_value());
  EXPECT_FALSE(*absent.options.enable_thinking);
  const ChatRequest count = messages(ordered_json::parse(R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})"),
                                     /*counting=*/true);
  EXPECT_FALSE(count.max_tokens.has_value()) << "count_tokens takes no max_tokens";
}

TEST(MessagesRequest, RefusalsNameTheField) {
  const std::string user = R"("messages": [{"role": "user", "content": "x"}])";
  const std::pair<std::string, const char*> cases[] = {
      {R"({"model": "m", )" + user + "}", "max_tokens"},
      {R"({"max_tokens": 8, )" + user + "}", "model"},
      {R"({"model": "m", "max_tokens": 8})", "messages"},
      {R"({"model": "m", "max_tokens": 8, "frobnicate": 1, )" + user + "}", "frobnicate"},
      {R"({"model": "m", "max_tokens": 8, "temperature": 1.5, )" + user + "}", "temperature"},
      {R"({"model": "m", "max_tokens": 0, )" + user + "}", "max_tokens"},
      {R"({"model": "m", "max_tokens": 8, "messages": [{"role": "tool", "content": "x"}]})", "messages[0].role"},
      {R"({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]})",
       "messages[0].content[0].type"},
      {R"({"model": "m", "max_tokens": 8, "tools": [{"type": "web_search_20250305", "name": "web_search"}], )" + user + "}",
       "tools[0].type"},
      {R"({"model": "m", "max_tokens": 8, "tools": [{"name": "f"}], )" + user + "}", "tools[0].input_schema"},
      {R"({"model": "m", "max_tokens": 8, "tool_choice": {"type": "any"}, )" + user + "}", "tool_choice"},
      {R"({"model": "m", "max_tokens": 8, "thinking": {"type": "enabled", "budget_tokens": 8}, )" + user + "}",
       "thinking.budget_tokens"},
      {R"({"model": "m", "max_tokens": 8, "stop_sequences": [""], )" + user + "}", "stop_sequences"},
      {R"({"model": "m", "max_tokens": 8, "stop_sequences": ["a"], )" + user + "}", ""},
  };
  for (const auto& [text, param] : cases) {
    const std::string body = text;  // a structured binding, which clang 14's lambdas cannot capture
    EXPECT_EQ(refused_param([&] { messages(ordered_json::parse(body)); }), param) << body;
  }
}

TEST(MessagesRequest, ErrorsHaveAnthropicsShape) {
  const ordered_json e = anthropic_error_body(400, "max_tokens: Field required");
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["message"], "max_tokens: Field required");
  EXPECT_EQ(anthropic_error_body(401, "")["error"]["type"], "authentication_error");
  EXPECT_EQ(anthropic_error_body(404, "")["error"]["type"], "not_found_error");
  EXPECT_EQ(anthropic_error_body(429, "")["error"]["type"], "rate_limit_error");
  EXPECT_EQ(anthropic_error_body(500, "")["error"]["type"], "api_error");
  EXPECT_EQ(anthropic_error_body(503, "")["error"]["type"], "overloaded_error");
}

}  // namespace
}  // namespace ember::server
