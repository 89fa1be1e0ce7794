// Tool calls parsed per model family from real output strings (the models' documentation and their
// templates' rendering of calls), whole and streamed.
#include <gtest/gtest.h>

#include <cctype>
#include <set>

#include "base/error.h"
#include "chat/forced_tool_call.h"
#include "chat/reasoning.h"
#include "chat/tool_call_parser.h"
#include "tool_call_test_util.h"

namespace ember::chat {
namespace {

using test::expect_split_invariant;
using test::parse_counted;
using F = ToolCallFormat;

void expect_call(const ParsedReply& r, size_t i, const std::string& name, const std::string& args) {
  ASSERT_GT(r.tool_calls.size(), i);
  EXPECT_EQ(r.tool_calls[i].id, "call_" + std::to_string(i));
  EXPECT_EQ(r.tool_calls[i].name, name);
  EXPECT_EQ(r.tool_calls[i].arguments, args);
}

struct WantCall {
  std::string name, arguments;
};

// `text` parsed whole and streamed at every split gives this content and these calls.
void expect_reply(F format, std::string_view text, const std::string& content, const std::vector<WantCall>& calls) {
  const ParsedReply r = parse_counted(format, text);
  EXPECT_EQ(r.content, content);
  ASSERT_EQ(r.tool_calls.size(), calls.size());
  for (size_t i = 0; i < calls.size(); ++i) expect_call(r, i, calls[i].name, calls[i].arguments);
  expect_split_invariant(format, text);
}

// Qwen2.5's function-calling documentation: two calls in one reply.
constexpr std::string_view kQwenTwoCalls =
    "<tool_call>\n"
    "{\"name\": \"get_current_temperature\", \"arguments\": {\"location\": \"San Francisco, CA, USA\"}}\n"
    "</tool_call>\n"
    "<tool_call>\n"
    "{\"name\": \"get_temperature_date\", \"arguments\": {\"location\": \"San Francisco, CA, USA\", \"date\": "
    "\"2024-10-01\"}}\n"
    "</tool_call>";

TEST(HermesToolCalls, TwoCallsInOneReply) {
  expect_reply(F::kHermes, kQwenTwoCalls, "",
               {{"get_current_temperature", R"({"location":"San Francisco, CA, USA"})"},
                {"get_temperature_date", R"({"location":"San Francisco, CA, USA","date":"2024-10-01"})"}});
}

TEST(HermesToolCalls, NestedArgumentsAndEscapedQuotes) {
  // A string in the arguments holds the closing marker and escaped quotes; nesting goes three deep.
  const std::string text =
      "Let me write that file.\n<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a \\\"quoted\\\" "
      "name.txt\", \"options\": {\"modes\": [1, 2.5, {\"deep\": true, \"none\": null}], \"note\": \"}</tool_call>\"}}}"
      "\n</tool_call>\nDone.";
  expect_reply(F::kHermes, text, "Let me write that file.\nDone.",
               {{"write_file",
                 R"({"path":"a \"quoted\" name.txt","options":{"modes":[1,2.5,{"deep":true,"none":null}],"note":"}</tool_call>"}})"}});
}

TEST(HermesToolCalls, ArgumentsGivenAsAStringAreParsed) {
  const ParsedReply r =
      parse_counted(F::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": [1, 2]}\"}\n</tool_call>");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  expect_call(r, 0, "f", R"({"a":[1,2]})");
}

TEST(HermesToolCalls, MalformedCallsStayContent) {
  for (const std::string text : {
           "Try: <tool_call>\n{\"name\": \"f\", \"arguments\": {oops}}\n</tool_call> then.",
           "<tool_call>\n{\"arguments\": {\"a\": 1}}\n</tool_call>",             // no name
           "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",    // arguments not an object
           "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</toolcall>",      // wrong closing marker
           "x <tool_call> <tool_call>",
       }) {
    SCOPED_TRACE(text);
    expect_reply(F::kHermes, text, text, {});
  }
}

TEST(HermesToolCalls, AMalformedBlockDoesNotHideALaterCall) {
  const std::string text = "<tool_call>{\"name\": oops <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
  expect_reply(F::kHermes, text, "<tool_call>{\"name\": oops",
               {{"f", "{}"}});
}

// Decision: a call cut off by the end of generation stays content, byte for byte (the reply then
// has no partial call, and the finish reason stays "length"); a complete call whose closing marker
// was replaced by the stop token is a call.
TEST(HermesToolCalls, CallCutOffAtTheEndStaysContent) {
  const size_t second = kQwenTwoCalls.rfind("<tool_call>");
  const size_t json_end = kQwenTwoCalls.find("}}", second) + 2;
  for (size_t n = second; n < kQwenTwoCalls.size(); ++n) {
    const std::string_view cut = kQwenTwoCalls.substr(0, n);
    SCOPED_TRACE(std::string(cut.substr(second)));
    const ParsedReply r = parse_counted(F::kHermes, cut);
    // Complete JSON with nothing but whitespace after it: its closing marker was the stop token.
    const bool complete = n >= json_end && cut.find_first_not_of(" \n", json_end) == std::string_view::npos;
    ASSERT_EQ(r.tool_calls.size(), complete ? 2u : 1u);
    // The cut call's text, with the newline before it, is content.
    EXPECT_EQ(r.content, complete || n == second ? "" : std::string(cut.substr(second - 1)));
  }
  // Just the first call's text, with no closing marker.
  const ParsedReply r = parse_counted(F::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  expect_call(r, 0, "f", R"({"a":1})");
}

// Every family: truncating a two-call reply anywhere gives a prefix of its calls, streamed or not.
TEST(ToolCallParser, TruncatedRepliesGiveAPrefixOfTheCalls) {
  const std::vector<std::pair<F, std::string>> cases{
      {F::kHermes, std::string(kQwenTwoCalls)},
      {F::kLlama3, "{\"name\": \"a\", \"parameters\": {\"x\": 1}}\n{\"name\": \"b\", \"parameters\": {\"y\": [2]}}"},
      {F::kMistral, "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\": \"b\", \"arguments\": {}}]"},
      {F::kGranite, "<|tool_call|>[{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\": \"b\", \"arguments\": {}}]"},
      {F::kHarmony,
       "<|channel|>commentary to=functions.a <|constrain|>json<|message|>{\"x\": 1}<|call|>"
       "<|start|>assistant<|channel|>commentary to=functions.b <|constrain|>json<|message|>{}<|call|>"},
  };
  for (const auto& [format, text] : cases) {
    const ParsedReply full = parse_counted(format, text);
    ASSERT_EQ(full.tool_calls.size(), 2u) << text;
    for (size_t n = 0; n <= text.size(); n += 3) {
      const std::string cut = text.substr(0, n);
      SCOPED_TRACE(cut);
      const ParsedReply r = parse_counted(format, cut);
      ASSERT_LE(r.tool_calls.size(), 2u);
      for (size_t i = 0; i < r.tool_calls.size(); ++i) {
        EXPECT_EQ(r.tool_calls[i].name, full.tool_calls[i].name);
        EXPECT_EQ(r.tool_calls[i].arguments, full.tool_calls[i].arguments);
      }
      if (r.tool_calls.empty()) {
        EXPECT_EQ(r.content, cut);
      }
      test::expect_same_reply(test::stream_pieces(format, {cut.substr(0, n / 2), cut.substr(n / 2)}), r, "halves");
    }
  }
}

TEST(Llama3ToolCalls, JsonReplyFromTheModelCard) {
  // Llama 3.1's documented JSON tool call, as the whole reply.
  const std::string text =
      "{\"name\": \"get_current_conditions\", \"parameters\": {\"location\": \"San Francisco, CA\", \"unit\": "
      "\"Fahrenheit\"}}";
  expect_reply(F::kLlama3, text, "",
               {{"get_current_conditions", R"({"location":"San Francisco, CA","unit":"Fahrenheit"})"}});
}

TEST(Llama3ToolCalls, PythonTagAndTypedVariant) {
  // <|python_tag|> before the JSON, and Llama 3.2's {"type": "function", ...} spelling.
  const std::string text =
      "<|python_tag|>{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n"
      "{\"name\": \"get_time\", \"parameters\": {\"tz\": \"Europe/Paris\", \"fmt\": {\"h24\": true}}}";
  expect_reply(F::kLlama3, text, "",
               {{"get_weather", R"({"city":"Paris"})"},
                {"get_time", R"({"tz":"Europe/Paris","fmt":{"h24":true}})"}});
}

TEST(Llama3ToolCalls, JsonThatIsNotACallStaysContent) {
  for (const std::string text : {
           "{\"answer\": 42}",                                                      // no name
           "{\"name\": \"Alice\", \"age\": 3}",                                    // no parameters
           "Here: {\"name\": \"f\", \"parameters\": {}}",                         // not at the start
           "<|python_tag|>brave_search.call(query=\"weather in Menlo Park\")",   // built-in tool
       }) {
    SCOPED_TRACE(text);
    expect_reply(F::kLlama3, text, text, {});
  }
}

TEST(MistralToolCalls, ListOfCallsFromTheModelCard) {
  const std::string text =
      "[TOOL_CALLS] [{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Paris, France\", "
      "\"format\": \"celsius\"}}, {\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"San "
      "Francisco, \\\"CA\\\"\", \"format\": \"fahrenheit\"}}]";
  expect_reply(F::kMistral, text, "",
               {{"get_current_weather", R"({"location":"Paris, France","format":"celsius"})"},
                {"get_current_weather", R"({"location":"San Francisco, \"CA\"","format":"fahrenheit"})"}});
}

TEST(MistralToolCalls, NotAListStaysContent) {
  const std::string text = "[TOOL_CALLS] I cannot call tools [sic].";
  expect_reply(F::kMistral, text, text, {});
}

TEST(CommandRToolCalls, ActionBlockFromTheModelCard) {
  const std::string text =
      "Action: ```json\n[\n    {\n        \"tool_name\": \"internet_search\",\n        \"parameters\": {\n"
      "            \"query\": \"biggest penguin in the world\"\n        }\n    },\n    {\n        \"tool_name\": "
      "\"calculator\",\n        \"parameters\": {\"expr\": \"2 * (3 + 4)\", \"opts\": {\"precise\": true}}\n    }\n]\n```";
  expect_reply(F::kCommandR, text, "",
               {{"internet_search", R"({"query":"biggest penguin in the world"})"},
                {"calculator", R"j({"expr":"2 * (3 + 4)","opts":{"precise":true}})j"}});
}

TEST(GraniteToolCalls, ListAfterTheMarker) {
  const std::string text =
      "<|tool_call|>[{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Boston, MA\"}}, "
      "{\"name\": \"get_stock_price\", \"arguments\": {\"ticker\": \"IBM\", \"range\": [\"2024-01-01\", "
      "\"2024-06-30\"]}}]";
  expect_reply(F::kGranite, text, "",
               {{"get_current_weather", R"({"location":"Boston, MA"})"},
                {"get_stock_price", R"({"ticker":"IBM","range":["2024-01-01","2024-06-30"]})"}});
}

TEST(HarmonyToolCalls, CallAfterTheAnalysisChannel) {
  // OpenAI's harmony guide: a thought, then a call with the recipient in the channel header.
  const std::string text =
      "<|channel|>analysis<|message|>Need to use function get_weather.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"San Francisco\"}<|call|>";
  expect_reply(F::kHarmony, text, "<|channel|>analysis<|message|>Need to use function get_weather.<|end|>",
               {{"get_weather", R"({"location":"San Francisco"})"}});
}

TEST(HarmonyToolCalls, RecipientInTheRoleAndNoCallToken) {
  // The template's own rendering (recipient after the role, "json" without <|constrain|>), the
  // second call ending where <|call|> stopped generation.
  const std::string text =
      "<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{\"q\": \"say \\\"hi\\\"\", "
      "\"n\": {\"k\": [1]}}<|call|><|start|>assistant to=functions.save<|channel|>commentary json<|message|>{}";
  expect_reply(F::kHarmony, text, "",
               {{"lookup", R"({"q":"say \"hi\"","n":{"k":[1]}})"},
                {"save", "{}"}});
}

TEST(HarmonyToolCalls, MessagesThatAreNotCallsStayContent) {
  const std::string text = "<|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>";
  expect_reply(F::kHarmony, text, text, {});
}

TEST(DeepSeekR1ToolCalls, TwoCallsAsTheTemplateWritesThem) {
  const std::string text =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"location\": "
      "\"Tokyo\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"tz\": "
      "\"JST\", \"f\": {\"a\": \"\\\"\"}}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  expect_reply(F::kDeepSeekR1, text, "",
               {{"get_weather", R"({"location":"Tokyo"})"},
                {"get_time", R"({"tz":"JST","f":{"a":"\""}})"}});
}

// Qwen3 thinks, then calls: the reasoning parser runs first and the tool-call parser reads only its
// content, streamed through both at every split.
TEST(ToolCallParser, ComposesWithTheReasoningParser) {
  const std::string text =
      "<think>\nTwo cities, so two calls. I might write <tool_call> here, but not as a call.\n</think>\n\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Berlin\"}}\n</tool_call>";
  const ReasoningDelta split = split_reasoning(text);
  const ParsedReply want = parse_counted(F::kHermes, split.content);
  ASSERT_EQ(want.tool_calls.size(), 2u);
  EXPECT_EQ(want.content, "");
  expect_call(want, 1, "get_weather", R"({"city":"Berlin"})");
  EXPECT_NE(split.reasoning.find("<tool_call> here"), std::string::npos);
  for (size_t i = 0; i <= text.size(); ++i) {
    ReasoningParser reasoning;
    ToolCallParser calls(F::kHermes, test::counting_ids());
    std::string thought;
    ParsedReply got;
    for (const std::string_view piece : {std::string_view(text).substr(0, i), std::string_view(text).substr(i)}) {
      const ReasoningDelta d = reasoning.push(piece);
      thought += d.reasoning;
      append_delta(got, calls.push(d.content));
    }
    const ReasoningDelta d = reasoning.flush();
    thought += d.reasoning;
    append_delta(got, calls.push(d.content));
    append_delta(got, calls.flush());
    EXPECT_EQ(thought, split.reasoning) << "split at " << i;
    test::expect_same_reply(got, want, "split at " + std::to_string(i));
  }
}

TEST(ToolCallParser, StreamsOpenAiChunks) {
  ToolCallParser p(F::kHermes, test::counting_ids());
  ToolCallDelta a = p.push("Checking.\n<tool_");
  EXPECT_EQ(a.content, "Checking.");
  EXPECT_TRUE(a.tool_calls.empty());
  ToolCallDelta b = p.push("call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>");
  EXPECT_EQ(b.content, "");
  ASSERT_EQ(b.tool_calls.size(), 2u);
  EXPECT_EQ(tool_call_chunk_json(b.tool_calls[0]).dump(),
            R"({"index":0,"id":"call_0","type":"function","function":{"name":"f","arguments":""}})");
  EXPECT_EQ(tool_call_chunk_json(b.tool_calls[1]).dump(), R"({"index":0,"function":{"arguments":"{\"x\":1}"}})");
  EXPECT_EQ(p.calls(), 1u);
  EXPECT_EQ(tool_calls_json(parse_counted(F::kHermes, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>")
                                .tool_calls)
                .dump(),
            R"([{"id":"call_0","type":"function","function":{"name":"f","arguments":"{}"}}])");
}

TEST(ToolCallParser, DefaultIdsAreUniqueAndMistralsHaveNineCharacters) {
  std::set<std::string> seen;
  CallIdSource ids = random_call_ids(F::kHermes);
  for (int i = 0; i < 100; ++i) {
    const std::string id = ids();
    EXPECT_EQ(id.rfind("call_", 0), 0u) << id;
    EXPECT_EQ(id.size(), 5u + 24u) << id;
    EXPECT_TRUE(seen.insert(id).second) << id;
  }
  const ParsedReply r = parse_tool_calls(F::kMistral, "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {}}]");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  ASSERT_EQ(r.tool_calls[0].id.size(), 9u);
  for (char c : r.tool_calls[0].id) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << r.tool_calls[0].id;
}

// A deterministic instance of the (small) schemas the forced-call shapes are made of.
nlohmann::ordered_json schema_instance(const nlohmann::ordered_json& s) {
  if (s.contains("anyOf")) return schema_instance(s["anyOf"][0]);
  if (s.contains("const")) return s["const"];
  const std::string type = s.value("type", "");
  if (type == "array") return nlohmann::ordered_json::array({schema_instance(s["items"])});
  if (type == "string") return "x \"y\"";
  if (type == "object") {
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    for (const auto& key : s.value("required", nlohmann::ordered_json::array()))
      o[key.get<std::string>()] = schema_instance(s["properties"][key.get<std::string>()]);
    return o;
  }
  return nullptr;
}

const nlohmann::ordered_json kTools = nlohmann::ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time",
   "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}}
])");

TEST(ForcedToolCalls, EveryShapeParsesAsTheCallItForces) {
  for (const F format : {F::kHermes, F::kLlama3, F::kMistral, F::kGranite, F::kCommandR, F::kHarmony, F::kDeepSeekR1}) {
    SCOPED_TRACE(tool_call_format_name(format));
    const auto named = forced_tool_calls(format, kTools, "get_time");
    ASSERT_EQ(named.size(), 1u);
    EXPECT_EQ(named[0].body_schema.dump().find("get_weather"), std::string::npos);
    const std::string text = named[0].prefix + schema_instance(named[0].body_schema).dump() + named[0].suffix;
    const ParsedReply r = parse_counted(format, text);
    EXPECT_EQ(r.content, "") << text;
    ASSERT_EQ(r.tool_calls.size(), 1u) << text;
    expect_call(r, 0, "get_time", R"({"tz":"x \"y\""})");
    // Any tool: one shape whose schema offers both, or one shape per tool.
    std::string all;
    for (const ForcedToolCall& shape : forced_tool_calls(format, kTools)) all += shape.prefix + shape.body_schema.dump();
    EXPECT_NE(all.find("get_weather"), std::string::npos);
    EXPECT_NE(all.find("get_time"), std::string::npos);
  }
  const auto single = forced_tool_calls(F::kMistral, kTools, "", /*parallel_tool_calls=*/false);
  EXPECT_EQ(single[0].body_schema.at("maxItems"), 1);
  EXPECT_EQ(single[0].body_schema.at("items").at("anyOf").size(), 2u);
}

TEST(ForcedToolCalls, BadToolsAndUnknownNamesAreClearErrors) {
  const auto message = [](const nlohmann::ordered_json& tools, std::string_view only) {
    try {
      forced_tool_calls(F::kHermes, tools, only);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(kTools, "get_stock").find("tool_choice"), std::string::npos);
  EXPECT_NE(message(kTools, "get_stock").find("get_stock"), std::string::npos);
  nlohmann::ordered_json bad = kTools;
  bad[1]["function"].erase("name");
  EXPECT_NE(message(bad, "").find("tools[1].function.name"), std::string::npos);
  bad = kTools;
  bad[0]["function"]["parameters"] = "none";
  EXPECT_NE(message(bad, "").find("tools[0].function.parameters"), std::string::npos);
  // A tool without parameters takes an empty object.
  bad = kTools;
  bad[0]["function"].erase("parameters");
  const auto shapes = forced_tool_calls(F::kLlama3, bad, "get_weather");
  EXPECT_EQ(shapes[0].body_schema.at("properties").at("parameters").at("type"), "object");
}

// Random replies built from each family's markers, pieces of calls, JSON and prose: streaming at
// every split equals the whole parse, a reply without calls is all content, every call is sound.
TEST(ToolCallParser, RandomRepliesStreamAsTheyParse) {
  const std::vector<std::string> common{" ", "\n", "x", "Hi.", "{", "}", "[", "]", "\"", "\\\"", ",", ":", "<", "|>",
                                        "{\"name\": \"f\", ", "\"arguments\": {\"a\": [1, {\"b\": \"}\"}]}}",
                                        "\"parameters\": {}}", "{\"name\": \"g\", \"parameters\": {\"k\": null}}"};
  const std::vector<std::pair<F, std::vector<std::string>>> families{
      {F::kHermes, {"<tool_call>", "</tool_call>", "<tool_", "<tool_call>\n{\"name\": \"h\", \"arguments\": {}}\n</tool_call>"}},
      {F::kLlama3, {"<|python_tag|>", "<|python"}},
      {F::kMistral, {"[TOOL_CALLS]", "[TOOL_", "[TOOL_CALLS] [{\"name\": \"m\", \"arguments\": {\"q\": 1}}]"}},
      {F::kGranite, {"<|tool_call|>", "<|tool", "<|tool_call|>[{\"name\": \"g\", \"arguments\": {}}]"}},
      {F::kCommandR, {"Action:", "Act", "```json\n", "```", "Action: ```json\n[{\"tool_name\": \"c\", \"parameters\": {}}]\n```"}},
      {F::kHarmony, {"<|start|>", "<|channel|>", "<|message|>", "<|call|>", "<|end|>", "assistant", " to=functions.t ",
                     "commentary", " <|constrain|>json", "<|chan",
                     "<|start|>assistant<|channel|>commentary to=functions.t json<|message|>{\"a\": 1}<|call|>"}},
      {F::kDeepSeekR1, {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "function<｜tool▁sep｜>d\n", "```json\n", "\n```",
                        "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "<｜tool▁",
                        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>d\n```json\n{}\n```<｜tool▁call▁end｜>"}},
  };
  std::mt19937 rng(2024);
  for (const auto& [format, own] : families) {
    SCOPED_TRACE(tool_call_format_name(format));
    size_t with_calls = 0;
    std::vector<std::string> pieces = common;
    for (int twice = 0; twice < 2; ++twice) pieces.insert(pieces.end(), own.begin(), own.end());
    for (int round = 0; round < 150; ++round) {
      std::string text;
      for (size_t n = std::uniform_int_distribution<size_t>(1, 24)(rng); n > 0; --n)
        text += pieces[std::uniform_int_distribution<size_t>(0, pieces.size() - 1)(rng)];
      SCOPED_TRACE(text);
      const ParsedReply whole = parse_counted(format, text);
      if (whole.tool_calls.empty()) {
        EXPECT_EQ(whole.content, text);
      }
      with_calls += whole.tool_calls.empty() ? 0 : 1;
      for (const ToolCall& c : whole.tool_calls) {
        EXPECT_FALSE(c.name.empty());
        EXPECT_TRUE(nlohmann::ordered_json::parse(c.arguments).is_object()) << c.arguments;
      }
      const std::string_view v(text);
      for (size_t i = 0; i <= v.size(); ++i)
        test::expect_same_reply(test::stream_pieces(format, {v.substr(0, i), v.substr(i)}), whole,
                                "split at " + std::to_string(i));
      std::vector<std::string_view> bytes;
      for (size_t i = 0; i < v.size(); ++i) bytes.push_back(v.substr(i, 1));
      test::expect_same_reply(test::stream_pieces(format, bytes), whole, "byte by byte");
      if (::testing::Test::HasFailure()) return;
    }
    EXPECT_GT(with_calls, 0u);  // the pieces do make calls
  }
}

}  // namespace
}  // namespace ember::chat
