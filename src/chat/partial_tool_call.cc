#include "chat/partial_tool_call.h"

#include <optional>
#include <regex>
#include <string>

namespace ember::chat {

namespace {

struct Item {
  std::string_view text;
  bool complete = false;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// The top-level values of a JSON prefix: the items of a list, or the one value. Strings are skipped
// whole, so brackets and commas inside them do not count.
std::vector<Item> json_items(std::string_view body, bool list) {
  body = trimmed(body);
  std::vector<Item> out;
  size_t i = 0;
  if (list) {
    if (body.empty() || body[0] != '[') return out;
    i = 1;
  }
  size_t start = i;
  int depth = 0;
  bool in_string = false, escaped = false;
  auto add = [&](size_t end, bool complete) {
    const std::string_view t = trimmed(body.substr(start, end - start));
    if (!t.empty()) out.push_back({t, complete});
  };
  for (; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (depth == 0) {  // the list's own end
        add(i, true);
        return out;
      }
      if (--depth == 0 && !list) {
        add(i + 1, true);
        return out;
      }
    } else if (c == ',' && depth == 0 && list) {
      add(i, true);
      start = i + 1;
    }
  }
  add(body.size(), false);
  return out;
}

// {"name": "N", "arguments": ... (or tool_name / parameters, the order the grammar forces).
std::optional<ToolCall> json_call(const Item& item) {
  static const std::regex head(R"re(^\{\s*"(?:name|tool_name)"\s*:\s*("(?:[^"\\]|\\.)*")\s*(?:,\s*"(?:arguments|parameters)"\s*:\s*)?)re");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_search(item.text.begin(), item.text.end(), m, head)) return std::nullopt;
  ToolCall call;
  call.name = nlohmann::ordered_json::parse(m[1].str()).get<std::string>();
  std::string_view args = item.text.substr(static_cast<size_t>(m.length(0)));
  if (item.complete) {
    args = trimmed(args);
    if (!args.empty() && args.back() == '}') args.remove_suffix(1);  // the call object's
  }
  call.arguments = std::string(args);
  return call;
}

// Complete arguments compact, as the parser gives them; a prefix as written.
std::string compact_if_whole(const std::string& args) {
  const auto j = nlohmann::ordered_json::parse(args, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? args : j.dump();
}

}  // namespace

std::vector<ToolCall> partial_tool_calls(const std::vector<ForcedToolCall>& shapes, std::string_view text,
                                         const CallIdSource& ids) {
  text = trimmed(text);
  std::vector<ToolCall> calls;
  for (const ForcedToolCall& shape : shapes) {
    if (text.size() < shape.prefix.size() || text.substr(0, shape.prefix.size()) != shape.prefix) continue;
    std::string_view body = text.substr(shape.prefix.size());
    if (!shape.name.empty()) {  // the prefix named the tool; the body is its arguments (then the suffix, begun)
      const std::vector<Item> args = json_items(body, /*list=*/false);
      calls.push_back({"", shape.name, args.empty() ? std::string() : std::string(args[0].text)});
    } else {
      for (const Item& item : json_items(body, shape.body_schema.value("type", "") == "array"))
        if (auto call = json_call(item)) calls.push_back(std::move(*call));
    }
    break;
  }
  for (ToolCall& c : calls) {
    c.arguments = compact_if_whole(c.arguments);
    if (ids) c.id = ids();
  }
  return calls;
}

}  // namespace ember::chat
