#include "chat/tool_messages.h"

#include <string>

#include "base/error.h"

namespace ember::chat {

nlohmann::ordered_json messages_for_template(const nlohmann::ordered_json& messages) {
  nlohmann::ordered_json out = messages;
  if (!out.is_array()) fail("messages", "must be an array");
  for (size_t i = 0; i < out.size(); ++i) {
    nlohmann::ordered_json& m = out[i];
    if (!m.is_object() || !m.contains("tool_calls") || m["tool_calls"].is_null()) continue;
    const std::string where = "messages[" + std::to_string(i) + "].tool_calls";
    if (!m["tool_calls"].is_array()) fail(where, "must be an array");
    for (size_t j = 0; j < m["tool_calls"].size(); ++j) {
      nlohmann::ordered_json& call = m["tool_calls"][j];
      const std::string at = where + "[" + std::to_string(j) + "].function";
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
        fail(at, "must be an object with name and arguments");
      nlohmann::ordered_json& args = call["function"]["arguments"];
      if (args.is_string()) {
        try {
          args = nlohmann::ordered_json::parse(args.get<std::string>());
        } catch (const nlohmann::json::exception& e) {
          fail(at + ".arguments", std::string("is not valid JSON: ") + e.what());
        }
      }
      if (!args.is_object()) fail(at + ".arguments", "must be a JSON object (or a string holding one)");
    }
  }
  return out;
}

}  // namespace ember::chat
