// The harmony (gpt-oss) reply splitter: channels routed to reasoning and answer, calls handed to the
// gpt-oss tool-call parser verbatim, the same whether the text comes whole or split at any byte, and
// the thinking budget that follows it.
#include <gtest/gtest.h>

#include "chat/harmony.h"
#include "chat/thinking_budget.h"
#include "chat/tool_call_parser.h"
#include "tool_call_test_util.h"

namespace ember::chat {
namespace {

ReasoningDelta stream(HarmonyParser p, const std::vector<std::string_view>& pieces) {
  ReasoningDelta all;
  for (std::string_view piece : pieces) {
    const ReasoningDelta d = p.push(piece);
    all.reasoning += d.reasoning;
    all.content += d.content;
  }
  const ReasoningDelta d = p.flush();
  all.reasoning += d.reasoning;
  all.content += d.content;
  return all;
}

// `text` after `prompt` splits into `reasoning` and `content` whole, split in two at every byte and
// byte by byte.
void expect_split(std::string_view prompt, std::string_view text, const std::string& reasoning,
                  const std::string& content) {
  const HarmonyParser start = HarmonyParser::after_prompt(prompt);
  const ReasoningDelta whole = stream(start, {text});
  EXPECT_EQ(whole.reasoning, reasoning);
  EXPECT_EQ(whole.content, content);
  for (size_t i = 0; i <= text.size(); ++i) {
    const ReasoningDelta d = stream(start, {text.substr(0, i), text.substr(i)});
    EXPECT_EQ(d.reasoning, reasoning) << "split at " << i;
    EXPECT_EQ(d.content, content) << "split at " << i;
  }
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
  const ReasoningDelta d = stream(start, bytes);
  EXPECT_EQ(d.reasoning, reasoning) << "byte by byte";
  EXPECT_EQ(d.content, content) << "byte by byte";
}

constexpr std::string_view kPrompt = "<|start|>user<|message|>Hi<|end|><|start|>assistant";

TEST(Harmony, AnalysisIsReasoningAndFinalIsTheAnswer) {
  expect_split(kPrompt,
               "<|channel|>analysis<|message|>User says hi. Reply.<|end|>"
               "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?<|return|>",
               "User says hi. Reply.", "Hello! How can I help?");
  // The end token (<|return|>) is no text when it is the model's stop token.
  expect_split(kPrompt, "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>b", "a",
               "b");
  EXPECT_EQ(split_harmony("<|channel|>final<|message|>only an answer").content, "only an answer");
}

TEST(Harmony, APreambleOnCommentaryIsTheAnswer) {
  expect_split(kPrompt, "<|channel|>commentary<|message|>Let me look.<|end|>", "", "Let me look.");
}

TEST(Harmony, ThePromptMayOpenTheMessage) {
  HarmonyParser p = HarmonyParser::after_prompt("<|start|>assistant<|channel|>analysis<|message|>");
  EXPECT_TRUE(p.in_reasoning());
  expect_split("<|start|>assistant<|channel|>analysis<|message|>", "think<|end|><|start|>assistant<|channel|>final<|message|>ok",
               "think", "ok");
  expect_split("<|start|>assistant<|channel|>final<|message|>", "ok", "", "ok");
}

TEST(Harmony, ReasoningStateFollowsTheChannels) {
  HarmonyParser p = HarmonyParser::after_prompt(kPrompt);
  EXPECT_FALSE(p.in_reasoning());
  p.push("<|channel|>analy");
  EXPECT_FALSE(p.in_reasoning());
  EXPECT_EQ(p.push("sis<|message|>x<|e").reasoning, "x");
  EXPECT_TRUE(p.in_reasoning());
  p.push("nd|>");
  EXPECT_FALSE(p.in_reasoning());
}

TEST(Harmony, ACallGoesToTheToolCallParserVerbatim) {
  const std::string call =
      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>";
  expect_split(kPrompt, "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant" + call,
               "Need the weather.", call);
  // The recipient in the role (as the published template writes past calls) keeps its <|start|>.
  const std::string in_role =
      "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Oslo\"}<|call|>";
  expect_split(kPrompt, "<|channel|>analysis<|message|>t<|end|>" + in_role, "t", in_role);

  const ParsedReply r = test::parse_counted(ToolCallFormat::kHarmony, split_harmony(call).content);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"city\":\"Paris\"}");
  const ParsedReply role = test::parse_counted(ToolCallFormat::kHarmony, split_harmony(in_role).content);
  ASSERT_EQ(role.tool_calls.size(), 1u);
  EXPECT_EQ(role.tool_calls[0].name, "get_weather");
  // A call whose <|call|> the stop token replaced is still whole.
  const ReasoningDelta cut = split_harmony("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}");
  EXPECT_EQ(test::parse_counted(ToolCallFormat::kHarmony, cut.content).tool_calls.size(), 1u);
}

TEST(Harmony, TextThatIsNoHarmonyIsTheAnswer) {
  expect_split(kPrompt, "just words, no channels", "", "just words, no channels");
  const std::string long_text(400, 'x');
  EXPECT_EQ(split_harmony(long_text).content, long_text);
  // An unfinished header is dropped.
  EXPECT_EQ(split_harmony("<|channel|>fin").content, "");
}

TEST(Harmony, TemplatesAreToldByTheirMarkers) {
  EXPECT_TRUE(is_harmony_template("{{ '<|start|>assistant<|channel|>final<|message|>' }}"));
  EXPECT_FALSE(is_harmony_template("<|im_start|>assistant\n<think>"));
}

// The budget counts the analysis body's tokens after the one that opened it, then forces the close.
TEST(Harmony, BudgetClosesTheAnalysisAfterNTokens) {
  const std::vector<int32_t> close{7, 8};
  ThinkingBudget b = ThinkingBudget::of_parsed_thought(close, 2);
  EXPECT_TRUE(b.after_thought_token(false).empty());  // the header
  EXPECT_TRUE(b.after_thought_token(true).empty());   // <|message|> opened the analysis
  EXPECT_TRUE(b.after_thought_token(true).empty());   // 1
  EXPECT_EQ(b.after_thought_token(true), close);      // 2: closed
  EXPECT_TRUE(b.forced());
  EXPECT_TRUE(b.after_thought_token(false).empty());  // the final channel
  ThinkingBudget none = ThinkingBudget::of_parsed_thought(close, 0);
  EXPECT_EQ(none.after_thought_token(true), close);  // no thought at all
  ThinkingBudget unlimited = ThinkingBudget::of_parsed_thought(close, -1);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(unlimited.after_thought_token(true).empty());
}

}  // namespace
}  // namespace ember::chat
