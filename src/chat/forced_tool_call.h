#pragma once
// What a grammar must force so that the model writes a well-formed call in its family's format
// (tool_choice "required" or a named function): literal prefix text, one JSON value matching
// body_schema, literal suffix text. No grammar here; the integrator builds it from these with the
// JSON-schema-to-grammar converter.
//
// Shapes per family (P = a tool's `parameters`, an empty object schema when absent):
//   hermes       "<tool_call>\n" {"name": const NAME, "arguments": P} "\n</tool_call>"
//   llama3       "" {"name": const NAME, "parameters": P} ""
//   mistral      "[TOOL_CALLS] " [{"name": const NAME, "arguments": P}, ...] ""
//   granite      "<|tool_call|>" [{"name": const NAME, "arguments": P}, ...] ""
//   command-r    "Action:\n```json\n" [{"tool_name": const NAME, "parameters": P}, ...] "\n```"
//   gpt-oss      "<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>" P "<|call|>"
//   deepseek-r1  "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n" P
//                "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
// Where the name sits in the JSON, one shape covers all allowed tools (an anyOf over them when
// there are several); where it sits in the literal text (gpt-oss, DeepSeek-R1), there is one shape
// per allowed tool and the grammar is the alternation of them. Objects are closed
// (additionalProperties false) and both keys required; lists have minItems 1 (maxItems 1 without
// parallel calls).
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/tool_call_format.h"

namespace ember::chat {

struct ForcedToolCall {
  std::string prefix;
  nlohmann::ordered_json body_schema;
  std::string suffix;
  std::string name;  // the tool's, where the prefix names it (gpt-oss, DeepSeek-R1); "": the body does
};

// tools: the request's OpenAI `tools` ([{"type": "function", "function": {"name", "description",
// "parameters"}}]); only: "" allows every tool, else the one function named. Throws ember::Error
// naming the field (tools[i].function.name, tool_choice) on a malformed tool or an unknown name.
std::vector<ForcedToolCall> forced_tool_calls(ToolCallFormat format, const nlohmann::ordered_json& tools,
                                              std::string_view only = {}, bool parallel_tool_calls = true);

// Throws as forced_tool_calls does when `tools` holds a malformed tool: every request with tools is
// checked, whatever its tool_choice, so that a tool the model is merely offered is not taken silently.
void check_function_tools(const nlohmann::ordered_json& tools);

}  // namespace ember::chat
