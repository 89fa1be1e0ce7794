#pragma once
// The tool-call format a model emits, told from its chat template: the template renders past calls
// the way the model was trained to write them, so the markers it uses name the family.
#include <optional>
#include <string_view>

namespace ember::chat {

enum class ToolCallFormat {
  kHermes,      // Hermes, Qwen2.5, Qwen3: <tool_call>{"name", "arguments"}</tool_call>, repeated
  kLlama3,      // Llama 3.1/3.2/3.3: {"name", "parameters"} as the whole reply, or after <|python_tag|>
  kMistral,     // Mistral v0.3: [TOOL_CALLS] [{"name", "arguments"}, ...]
  kCommandR,    // Command R+: Action:\n```json\n[{"tool_name", "parameters"}, ...]\n```
  kGranite,     // Granite 3: <|tool_call|>[{"name", "arguments"}, ...]
  kHarmony,     // gpt-oss: <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{...}<|call|>
  kDeepSeekR1,  // DeepSeek-R1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json ...
};

// nullopt when the template shows no tool-call format this parser knows.
std::optional<ToolCallFormat> detect_tool_call_format(std::string_view template_source);
// As detect_tool_call_format, but throws ember::Error "unknown tool-call format: ..." (the server's
// 400 for a request with `tools`).
ToolCallFormat require_tool_call_format(std::string_view template_source);

const char* tool_call_format_name(ToolCallFormat format);

}  // namespace ember::chat
