#include "chat/tool_call_format.h"

#include "base/error.h"

namespace ember::chat {

std::optional<ToolCallFormat> detect_tool_call_format(std::string_view src) {
  const auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  // Most specific markers first: several families also mention plain "tool_call".
  if (has("<|call|>") && has("<|channel|>")) return ToolCallFormat::kHarmony;
  if (has("<｜tool▁calls▁begin｜>")) return ToolCallFormat::kDeepSeekR1;
  if (has("<|tool_call|>")) return ToolCallFormat::kGranite;
  if (has("[TOOL_CALLS]")) return ToolCallFormat::kMistral;
  if (has("<tool_call>")) return ToolCallFormat::kHermes;
  if (has("Action:") && has("tool_name")) return ToolCallFormat::kCommandR;
  if (has("<|start_header_id|>") && (has("<|python_tag|>") || (has("tool_call") && has("\"parameters\""))))
    return ToolCallFormat::kLlama3;
  return std::nullopt;
}

ToolCallFormat require_tool_call_format(std::string_view template_source) {
  if (const auto f = detect_tool_call_format(template_source)) return *f;
  fail("tools", "unknown tool-call format: the model's chat template shows none of the tool-call formats Ember "
                "parses (Hermes/Qwen, Llama 3, Mistral, Command R, Granite, gpt-oss, DeepSeek-R1)");
}

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes: return "hermes";
    case ToolCallFormat::kLlama3: return "llama3";
    case ToolCallFormat::kMistral: return "mistral";
    case ToolCallFormat::kCommandR: return "command-r";
    case ToolCallFormat::kGranite: return "granite";
    case ToolCallFormat::kHarmony: return "gpt-oss";
    case ToolCallFormat::kDeepSeekR1: return "deepseek-r1";
  }
  return "unknown";
}

}  // namespace ember::chat
