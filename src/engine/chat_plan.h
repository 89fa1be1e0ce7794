#pragma once
// A chat request in the engine's terms, whichever front end asked (the server's three chat APIs,
// `ember chat`): the prompt its template renders, the grammar of its structured output or forced
// tool call, and the tool-call format its reply is parsed with, decided in one place.
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/forced_tool_call.h"
#include "chat/tool_call_format.h"
#include "engine/chat_prompt.h"
#include "engine/generation.h"
#include "engine/grammar_constraint.h"

namespace ember::engine {

// Whether and how the reply calls tools: "none", "auto", "required", or one named function.
struct ToolChoice {
  enum class Mode { kNone, kAuto, kRequired, kFunction } mode = Mode::kNone;
  std::string function;  // kFunction's name
};

// The structure the reply's text must have: free text, any JSON object, JSON of a schema, or a GBNF
// grammar of the request's own (llama-server's `grammar`; for a harmony reply it covers the channels'
// markers too).
struct OutputFormat {
  enum class Kind { kText, kJsonObject, kJsonSchema, kGbnf } kind = Kind::kText;
  std::string name;
  nlohmann::ordered_json schema;  // kJsonSchema's
  std::string gbnf;               // kGbnf's
};

// The GBNF of a format (none for free text). Throws ember::Error for a schema it cannot express.
std::optional<std::string> format_gbnf(const OutputFormat& format);
// The request field a format came from: "grammar" or "response_format".
inline const char* format_field(const OutputFormat& format) {
  return format.kind == OutputFormat::Kind::kGbnf ? "grammar" : "response_format";
}

// Compiled grammars by GBNF text, the most recent kept: requests with the same schema or tools (an
// agent's loop) share their compiled grammar and its computed masks. The vocabulary is built on the
// first use. Safe from several threads.
class GrammarCache {
 public:
  explicit GrammarCache(const tokenizer::Tokenizer& tokenizer, size_t capacity = 16)
      : tokenizer_(tokenizer), capacity_(capacity) {}
  // Throws ember::Error for GBNF that does not compile.
  GrammarConstraint get(const std::string& gbnf, const std::string& source);

 private:
  const tokenizer::Tokenizer& tokenizer_;
  size_t capacity_;
  std::mutex mu_;  // guards the two below
  std::shared_ptr<const grammar::Vocabulary> vocab_;
  std::vector<std::pair<std::string, GrammarConstraint>> recent_;  // most recent last
};

struct ChatPlan {
  GenerationRequest gen;
  std::optional<chat::ToolCallFormat> tool_format;  // set: the reply's calls are parsed out of it
  std::vector<chat::ForcedToolCall> forced;          // the shapes of a forced call (required or a function)
};

// The plan of a chat request. Throws RequestError naming the request's part at fault: "messages"
// (the template failed), "tools" (the template's tool-call format is unknown), "tool_choice",
// "response_format" (a schema the grammar engine cannot express), "grammar" (GBNF that does not compile).
ChatPlan plan_chat(const ChatPromptBuilder& prompts, const nlohmann::ordered_json& messages, const ChatOptions& options,
                   sampling::SamplingParams params, const ToolChoice& tool_choice, bool parallel_tool_calls,
                   const OutputFormat& format, GrammarCache& grammars);

}  // namespace ember::engine
