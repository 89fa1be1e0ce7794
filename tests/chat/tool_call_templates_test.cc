// Every chat template of ../shared/chat_templates: its tool-call family, and a tool round trip
// (assistant tool_calls, then a `tool` message) rendered through it.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "base/error.h"
#include "chat/chat_template.h"
#include "chat/tool_call_format.h"
#include "chat/tool_call_parser.h"
#include "chat/tool_messages.h"
#include "jinja/testdata_util.h"
#include "tool_call_test_util.h"

namespace ember::chat {
namespace {

using nlohmann::ordered_json;

struct SharedTemplate {
  std::string name;
  std::string source;
};

std::vector<SharedTemplate> shared_templates() {
  std::vector<SharedTemplate> out;
  for (const auto& e : std::filesystem::directory_iterator(ember::test::shared_dir() + "/chat_templates"))
    if (e.path().extension() == ".jinja")
      out.push_back({e.path().stem().string(), ember::test::read_text(e.path().string())});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

// (Command R's template needs every parameter's description.)
// Templates that take tool definitions but render no past calls, so they show no call format.
const std::set<std::string> kToolsWithoutACallFormat{"phi-4-multimodal"};

const ordered_json kWeatherTool = ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
  "description": "Current weather of a city",
  "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                                  "unit": {"type": "string", "description": "celsius or fahrenheit"}},
                 "required": ["city"]}}}])");

// OpenAI request messages: the arguments come as a JSON string; the id has 9 characters (Mistral's rule).
const ordered_json kToolConversation = ordered_json::parse(R"([
  {"role": "system", "content": "You are a weather bot."},
  {"role": "user", "content": "What is the weather like?"},
  {"role": "assistant", "content": null, "tool_calls": [{"id": "abc123DEF", "type": "function",
    "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]},
  {"role": "tool", "tool_call_id": "abc123DEF", "content": "{\"temperature_c\": 18}"}
])");

std::string render(const SharedTemplate& t, size_t messages, bool add_generation_prompt) {
  TemplateInputs in;
  ordered_json part = ordered_json::array();
  for (size_t i = 0; i < messages; ++i) part.push_back(kToolConversation[i]);
  in.messages = messages_for_template(part);
  in.tools = kWeatherTool;
  in.add_generation_prompt = add_generation_prompt;
  in.variables = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  jinja::RenderOptions opts;
  opts.now = ember::test::fixture_clock();
  return ChatTemplate(t.source).render(in, opts);
}

TEST(ToolCallTemplates, EveryTemplateThatRendersCallsHasAFamily) {
  const auto templates = shared_templates();
  ASSERT_FALSE(templates.empty());
  size_t detected = 0;
  for (const SharedTemplate& t : templates) {
    SCOPED_TRACE(t.name);
    const bool renders_calls = t.source.find("tool_calls") != std::string::npos;
    const bool takes_tools = t.source.find("tools") != std::string::npos;
    const auto format = detect_tool_call_format(t.source);
    if (format) {
      ++detected;
      EXPECT_TRUE(renders_calls);
      EXPECT_EQ(require_tool_call_format(t.source), *format);
      continue;
    }
    EXPECT_FALSE(renders_calls) << "renders tool calls but no family was detected";
    EXPECT_EQ(takes_tools, kToolsWithoutACallFormat.count(t.name) == 1);
    try {
      require_tool_call_format(t.source);
      ADD_FAILURE() << "expected an unknown-format error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("unknown tool-call format"), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(detected, 0u);
}

// The template's own rendering of the assistant's call is what the model writes: parsed with the
// detected family it gives the call back, streamed or not.
TEST(ToolCallTemplates, RenderedCallsParseBackWithTheDetectedFamily) {
  for (const SharedTemplate& t : shared_templates()) {
    const auto format = detect_tool_call_format(t.source);
    if (!format) continue;
    SCOPED_TRACE(t.name + " (" + tool_call_format_name(*format) + ")");
    const std::string prompt = render(t, 2, /*add_generation_prompt=*/true);
    const std::string with_call = render(t, 3, /*add_generation_prompt=*/false);
    size_t common = 0;
    while (common < prompt.size() && common < with_call.size() && prompt[common] == with_call[common]) ++common;
    // The reply starts after the last tag or line the two share (not inside a marker they begin alike).
    while (common > 0 && with_call[common - 1] != '>' && with_call[common - 1] != '\n') --common;
    const std::string reply = with_call.substr(common);
    const ParsedReply r = test::parse_counted(*format, reply);
    ASSERT_EQ(r.tool_calls.size(), 1u) << reply;
    EXPECT_EQ(r.tool_calls[0].name, "get_weather");
    EXPECT_EQ(r.tool_calls[0].arguments, R"({"city":"Paris","unit":"celsius"})");
    test::expect_split_invariant(*format, reply);
  }
}

TEST(ToolCallTemplates, ToolRoundTripRendersWithTheCallAndTheResult) {
  for (const SharedTemplate& t : shared_templates()) {
    if (!detect_tool_call_format(t.source)) continue;
    SCOPED_TRACE(t.name);
    const std::string text = render(t, kToolConversation.size(), /*add_generation_prompt=*/true);
    EXPECT_NE(text.find("get_weather"), std::string::npos) << text;
    EXPECT_NE(text.find("Paris"), std::string::npos) << text;  // only in the call's arguments
    EXPECT_NE(text.find("temperature_c"), std::string::npos) << text;
  }
}

// Families without a template in ../shared: short templates written here that render a call the
// way Granite 3's and gpt-oss's templates do.
TEST(ToolCallTemplates, GraniteAndGptOssCallsRenderAndParseBack) {
  const std::vector<std::pair<ToolCallFormat, std::string>> sources{
      {ToolCallFormat::kGranite,
       "{%- for message in messages %}{%- if message.role == 'assistant' and message.tool_calls is defined %}"
       "{{- '<|start_of_role|>assistant<|end_of_role|><|tool_call|>' + message.tool_calls | map(attribute='function') "
       "| list | tojson(indent=4) + '<|end_of_text|>\\n' }}{%- else %}{{- '<|start_of_role|>' + message.role + "
       "'<|end_of_role|>' + message.content + '<|end_of_text|>\\n' }}{%- endif %}{%- endfor %}"},
      {ToolCallFormat::kHarmony,
       "{%- for message in messages %}{%- if message.tool_calls is defined %}"
       "{%- set tool_call = message.tool_calls[0].function %}{{- '<|start|>assistant to=' }}"
       "{{- 'functions.' + tool_call.name + '<|channel|>commentary ' }}{{- 'json' + '<|message|>' }}"
       "{{- tool_call.arguments|tojson }}{{- '<|call|>' }}{%- else %}{{- '<|start|>' + message.role + "
       "'<|message|>' + message.content + '<|end|>' }}{%- endif %}{%- endfor %}"},
  };
  for (const auto& [format, source] : sources) {
    SCOPED_TRACE(tool_call_format_name(format));
    ASSERT_EQ(detect_tool_call_format(source), format);
    const std::string text = render({"inline", source}, 3, /*add_generation_prompt=*/false);
    const ParsedReply r = test::parse_counted(format, text);
    ASSERT_EQ(r.tool_calls.size(), 1u) << text;
    EXPECT_EQ(r.tool_calls[0].name, "get_weather");
    EXPECT_EQ(r.tool_calls[0].arguments, R"({"city":"Paris","unit":"celsius"})");
    EXPECT_EQ(r.content.find("get_weather"), std::string::npos) << r.content;
    test::expect_split_invariant(format, text);
  }
}

TEST(MessagesForTemplate, ParsesArgumentStringsAndNamesABadOne) {
  const ordered_json m = messages_for_template(kToolConversation);
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], ordered_json::parse(R"({"city": "Paris", "unit": "celsius"})"));
  EXPECT_EQ(m[3], kToolConversation[3]);
  ordered_json bad = kToolConversation;
  bad[2]["tool_calls"][0]["function"]["arguments"] = "{\"city\": ";
  try {
    messages_for_template(bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("messages[2].tool_calls[0].function.arguments"), std::string::npos) << e.what();
  }
  bad[2]["tool_calls"][0]["function"]["arguments"] = "[1, 2]";
  EXPECT_THROW(messages_for_template(bad), Error);
}

}  // namespace
}  // namespace ember::chat
