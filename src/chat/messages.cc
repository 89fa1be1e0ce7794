#include "chat/messages.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "chat/tool_messages.h"

namespace ember::chat {

namespace {

constexpr std::array<std::string_view, 5> kRoles{"system", "developer", "user", "assistant", "tool"};
constexpr std::array<std::string_view, 7> kKeys{"role",         "content",           "name",   "tool_calls",
                                                "tool_call_id", "reasoning_content", "refusal"};

template <size_t N>
bool is_one_of(const std::array<std::string_view, N>& names, std::string_view s) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

template <size_t N>
std::string listed(const std::array<std::string_view, N>& names) {
  std::string out;
  for (std::string_view n : names) out.append(out.empty() ? "" : ", ").append(n);
  return out;
}

nlohmann::ordered_json checked(const nlohmann::ordered_json& m, size_t i) {
  const std::string where = "messages[" + std::to_string(i) + "]";
  if (!m.is_object()) throw MessageError(where, "must be an object with role and content");
  for (const auto& [key, value] : m.items())
    if (!is_one_of(kKeys, key)) throw MessageError(where + "." + key, "is not a message field (" + listed(kKeys) + ")");
  if (!m.contains("role") || !m["role"].is_string()) throw MessageError(where + ".role", "must be a string");
  const std::string role = m["role"].get<std::string>();
  if (!is_one_of(kRoles, role))
    throw MessageError(where + ".role", "'" + role + "' is not a role (" + listed(kRoles) + ")");
  for (const char* key : {"name", "tool_call_id", "reasoning_content", "refusal"})
    if (m.contains(key) && !m[key].is_string() && !m[key].is_null())
      throw MessageError(where + "." + key, "must be a string");
  nlohmann::ordered_json out = m;
  if (!m.contains("content")) {
    if (role != "assistant") throw MessageError(where + ".content", "is required");
    return out;
  }
  const nlohmann::ordered_json& c = m["content"];
  if (c.is_array()) {
    std::string text;
    for (const auto& part : c) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
        throw MessageError(where + ".content", "parts must be {\"type\": \"text\", \"text\": string}");
      text += part["text"].get<std::string>();
    }
    out["content"] = text;
  } else if (!c.is_string() && !c.is_null()) {
    throw MessageError(where + ".content", "must be a string, a list of text parts or null");
  }
  return out;
}

}  // namespace

MessageError::MessageError(const std::string& field_, const std::string& what)
    : Error(field_ + ": " + what), field(field_) {}

nlohmann::ordered_json check_messages(const nlohmann::ordered_json& messages) {
  if (!messages.is_array() || messages.empty()) throw MessageError("messages", "must be a non-empty array");
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < messages.size(); ++i) out.push_back(checked(messages[i], i));
  try {
    return messages_for_template(out);
  } catch (const Error& e) {  // its messages name the call's path first
    const std::string what = e.what();
    const size_t colon = what.find(": ");
    throw MessageError(colon == std::string::npos ? "messages" : what.substr(0, colon),
                       colon == std::string::npos ? what : what.substr(colon + 2));
  }
}

}  // namespace ember::chat
