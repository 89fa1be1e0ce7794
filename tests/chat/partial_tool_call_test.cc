// Issue 41 item 11: a forced call cut off by max_tokens comes back as the calls it began (OpenAI's
// tool_calls with finish_reason "length"), not as content such as "{\"name".
#include <gtest/gtest.h>

#include "chat/partial_tool_call.h"

namespace ember::chat {
namespace {

using nlohmann::ordered_json;

const ordered_json kCutTools = ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
    "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}}])");

std::vector<ToolCall> cut(ToolCallFormat f, const std::string& text) {
  return partial_tool_calls(forced_tool_calls(f, kCutTools), text);
}

void expect_calls(ToolCallFormat f, const std::string& text, const std::vector<std::pair<std::string, std::string>>& want) {
  const auto calls = cut(f, text);
  ASSERT_EQ(calls.size(), want.size()) << text;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(calls[i].name, want[i].first) << text;
    EXPECT_EQ(calls[i].arguments, want[i].second) << text;
  }
}

TEST(PartialToolCall, TheCallBegunComesBackWithItsArgumentsSoFar) {
  expect_calls(ToolCallFormat::kHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par",
               {{"get_weather", "{\"city\": \"Par"}});
  expect_calls(ToolCallFormat::kLlama3, "{\"name\": \"get_time\", \"parameters\": ", {{"get_time", ""}});
  // A list: the calls before the cut are whole (compact), brackets inside strings do not split.
  expect_calls(ToolCallFormat::kMistral,
               "[TOOL_CALLS] [{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}, "
               "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"[,]{",
               {{"get_time", "{\"tz\":\"UTC\"}"}, {"get_weather", "{\"city\": \"[,]{"}});
  // The name in the prefix (gpt-oss): the body is the arguments.
  expect_calls(ToolCallFormat::kHarmony, "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{\"tz",
               {{"get_time", "{\"tz"}});
  // Cut inside the suffix: the arguments are whole, the suffix's start is not theirs.
  expect_calls(ToolCallFormat::kHarmony,
               "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{\"tz\": \"UTC\"}<|ca",
               {{"get_time", "{\"tz\":\"UTC\"}"}});
}

TEST(PartialToolCall, NothingBeforeAWholeName) {
  EXPECT_TRUE(cut(ToolCallFormat::kLlama3, "{\"name").empty());
  EXPECT_TRUE(cut(ToolCallFormat::kHermes, "<tool_").empty());
  EXPECT_TRUE(cut(ToolCallFormat::kHermes, "<tool_call>\n{\"name\": \"get_wea").empty());
}

}  // namespace
}  // namespace ember::chat
