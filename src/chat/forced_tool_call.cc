#include "chat/forced_tool_call.h"

#include "base/error.h"

namespace ember::chat {
namespace {

using nlohmann::ordered_json;

struct FtcTool {
  std::string name;
  ordered_json parameters;
};

std::vector<FtcTool> ftc_allowed_tools(const ordered_json& tools, std::string_view only) {
  if (!tools.is_array() || tools.empty()) fail("tools", "must be a non-empty array");
  std::vector<FtcTool> out;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = "tools[" + std::to_string(i) + "]";
    const ordered_json& t = tools[i];
    if (!t.is_object() || t.value("type", "") != "function") fail(where + ".type", "must be \"function\"");
    const auto f = t.find("function");
    if (f == t.end() || !f->is_object()) fail(where + ".function", "must be an object");
    const auto name = f->find("name");
    if (name == f->end() || !name->is_string() || name->get_ref<const std::string&>().empty())
      fail(where + ".function.name", "must be a non-empty string");
    ordered_json params{{"type", "object"}, {"properties", ordered_json::object()}};
    if (const auto p = f->find("parameters"); p != f->end()) {
      if (!p->is_object()) fail(where + ".function.parameters", "must be a JSON Schema object");
      params = *p;
    }
    if (only.empty() || *name == only) out.push_back({name->get<std::string>(), params});
  }
  if (out.empty()) fail("tool_choice", "names the function \"" + std::string(only) + "\", which is not in tools");
  return out;
}

ordered_json ftc_call_object(const FtcTool& t, const char* name_key, const char* args_key) {
  return {{"type", "object"},
          {"properties", {{name_key, {{"const", t.name}}}, {args_key, t.parameters}}},
          {"required", {name_key, args_key}},
          {"additionalProperties", false}};
}

ordered_json ftc_any_call(const std::vector<FtcTool>& tools, const char* name_key, const char* args_key) {
  if (tools.size() == 1) return ftc_call_object(tools[0], name_key, args_key);
  ordered_json any = ordered_json::array();
  for (const FtcTool& t : tools) any.push_back(ftc_call_object(t, name_key, args_key));
  return {{"anyOf", any}};
}

ordered_json ftc_call_list(const std::vector<FtcTool>& tools, const char* name_key, const char* args_key,
                           bool parallel) {
  ordered_json list{{"type", "array"}, {"items", ftc_any_call(tools, name_key, args_key)}, {"minItems", 1}};
  if (!parallel) list["maxItems"] = 1;
  return list;
}

}  // namespace

void check_function_tools(const ordered_json& tools) { ftc_allowed_tools(tools, {}); }

std::vector<ForcedToolCall> forced_tool_calls(ToolCallFormat format, const ordered_json& tools, std::string_view only,
                                              bool parallel_tool_calls) {
  const std::vector<FtcTool> allowed = ftc_allowed_tools(tools, only);
  switch (format) {
    case ToolCallFormat::kHermes:
      return {{"<tool_call>\n", ftc_any_call(allowed, "name", "arguments"), "\n</tool_call>", ""}};
    case ToolCallFormat::kLlama3:
      return {{"", ftc_any_call(allowed, "name", "parameters"), "", ""}};
    case ToolCallFormat::kMistral:
      return {{"[TOOL_CALLS] ", ftc_call_list(allowed, "name", "arguments", parallel_tool_calls), "", ""}};
    case ToolCallFormat::kGranite:
      return {{"<|tool_call|>", ftc_call_list(allowed, "name", "arguments", parallel_tool_calls), "", ""}};
    case ToolCallFormat::kCommandR:
      return {{"Action:\n```json\n", ftc_call_list(allowed, "tool_name", "parameters", parallel_tool_calls), "\n```",
               ""}};
    case ToolCallFormat::kHarmony:
    case ToolCallFormat::kDeepSeekR1: {
      std::vector<ForcedToolCall> out;
      for (const FtcTool& t : allowed) {
        if (format == ToolCallFormat::kHarmony)
          out.push_back({"<|channel|>commentary to=functions." + t.name + " <|constrain|>json<|message|>", t.parameters,
                         "<|call|>", t.name});
        else
          out.push_back({"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>" + t.name + "\n```json\n",
                         t.parameters, "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", t.name});
      }
      return out;
    }
  }
  return {};
}

}  // namespace ember::chat
