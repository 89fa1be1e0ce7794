#pragma once
// OpenAI request messages as chat templates expect them. OpenAI sends an assistant's
// tool_calls[i].function.arguments as a JSON string; Hugging Face templates read it as a mapping
// (Qwen2.5 and Llama 3 `| tojson` it, Command R iterates it, Mistral dumps the whole function), so
// the string is parsed into its object. `tool` messages (content, tool_call_id) pass unchanged.
#include <nlohmann/json.hpp>

namespace ember::chat {

// Throws ember::Error naming messages[i].tool_calls[j].function.arguments when one is not a JSON
// object (or a string holding one).
nlohmann::ordered_json messages_for_template(const nlohmann::ordered_json& messages);

}  // namespace ember::chat
