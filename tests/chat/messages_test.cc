// Issue 41 items 7 and 9: one check of a conversation's messages for the server and the CLI, naming
// the message and field at fault before a template fails on its own terms.
#include <gtest/gtest.h>

#include "chat/messages.h"

namespace ember::chat {
namespace {

using nlohmann::ordered_json;

std::string field_of(const std::string& messages) {
  try {
    check_messages(ordered_json::parse(messages));
  } catch (const MessageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(e.field + ": ", 0), 0u) << e.what();
    return e.field;
  }
  return "accepted";
}

TEST(Messages, TheFieldAtFaultIsNamed) {
  EXPECT_EQ(field_of(R"([{"role": "user", "content": 5}])"), "messages[0].content");
  EXPECT_EQ(field_of(R"([{"role": "user", "content": "Hi"}, {"role": "wizard", "content": "x"}])"), "messages[1].role");
  EXPECT_EQ(field_of(R"([{"role": "user", "content": "Hi", "mood": "happy"}])"), "messages[0].mood");
  EXPECT_EQ(field_of(R"([{"content": "Hi"}])"), "messages[0].role");
  EXPECT_EQ(field_of(R"([{"role": "user"}])"), "messages[0].content");
  EXPECT_EQ(field_of(R"([])"), "messages");
  EXPECT_EQ(field_of(R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}])"),
            "messages[0].tool_calls[0].function.arguments");
}

TEST(Messages, WhatClientsSendIsAccepted) {
  EXPECT_EQ(field_of(R"([{"role": "developer", "content": "Be brief."}, {"role": "user", "name": "ann",
      "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]},
      {"role": "assistant", "content": null, "reasoning_content": "hm", "refusal": null,
       "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "42"}])"),
            "accepted");
  const ordered_json out = check_messages(ordered_json::parse(
      R"([{"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]}])"));
  EXPECT_EQ(out[0]["content"], "Hi there");
}

}  // namespace
}  // namespace ember::chat
