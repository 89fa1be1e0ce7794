#pragma once
// A conversation's messages checked before a chat template sees them, for the server's requests and
// the CLI's --messages files alike: a template given a bad message fails on its own terms ("line 16,
// column 42: can only concatenate str"), not naming the message at fault.
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"

namespace ember::chat {

// A bad message, `field` its path (messages[0].content); what() is "<field>: <what is wrong>".
struct MessageError : Error {
  MessageError(const std::string& field, const std::string& what);
  std::string field;
};

// Each message an object with a role of system, developer, user, assistant or tool, and no keys but
// role, content, name, tool_calls, tool_call_id, reasoning_content and refusal; content a string, a
// list of {"type": "text", "text"} parts (joined) or null (required but for assistant messages).
// Returns them as templates read them (messages_for_template). Throws MessageError.
nlohmann::ordered_json check_messages(const nlohmann::ordered_json& messages);

}  // namespace ember::chat
