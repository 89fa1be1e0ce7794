#include "engine/chat_plan.h"

#include <algorithm>

#include "base/error.h"
#include "sampling/json_schema.h"

namespace ember::engine {

std::optional<std::string> format_gbnf(const OutputFormat& format) {
  switch (format.kind) {
    case OutputFormat::Kind::kText: return std::nullopt;
    case OutputFormat::Kind::kJsonObject: return grammar::json_object_gbnf();
    case OutputFormat::Kind::kJsonSchema: return grammar::json_schema_to_gbnf(format.schema);
    case OutputFormat::Kind::kGbnf: return format.gbnf;
  }
  return std::nullopt;
}

GrammarConstraint GrammarCache::get(const std::string& gbnf, const std::string& source) {
  std::shared_ptr<const grammar::Vocabulary> vocab;
  {
    std::lock_guard lock(mu_);
    for (auto it = recent_.begin(); it != recent_.end(); ++it)
      if (it->first == gbnf) {
        std::rotate(it, it + 1, recent_.end());
        return recent_.back().second;
      }
    if (!vocab_) vocab_ = grammar_vocabulary(tokenizer_);
    vocab = vocab_;
  }
  // Compiled outside the lock: other requests' lookups need not wait for it. Two requests of a new
  // grammar at once may both compile it; the second to finish takes the first one's entry.
  GrammarConstraint c{std::make_shared<const grammar::Grammar>(grammar::Grammar::from_gbnf(gbnf)), vocab};
  c.source = source;
  std::lock_guard lock(mu_);
  for (const auto& [text, known] : recent_)
    if (text == gbnf) return known;
  if (recent_.size() >= capacity_) recent_.erase(recent_.begin());
  recent_.emplace_back(gbnf, c);
  return c;
}

ChatPlan plan_chat(const ChatPromptBuilder& prompts, const nlohmann::ordered_json& messages, const ChatOptions& options,
                   sampling::SamplingParams params, const ToolChoice& tool_choice, bool parallel_tool_calls,
                   const OutputFormat& format, GrammarCache& grammars) {
  using Mode = ToolChoice::Mode;
  ChatPlan plan;
  ChatPrompt prompt;
  ChatOptions with_format = options;
  with_format.structured = format.kind == OutputFormat::Kind::kJsonObject || format.kind == OutputFormat::Kind::kJsonSchema;
  try {
    prompt = prompts.build(messages, with_format);
  } catch (const Error& e) {
    throw RequestError(std::string("the chat template failed: ") + e.what(), "messages", "invalid_value");
  }
  if (tool_choice.mode != Mode::kNone) {
    plan.tool_format = prompts.tool_call_format();
    if (!plan.tool_format)
      throw RequestError("'tools': this model's chat template writes tool calls in no format Ember knows "
                         "(unknown tool-call format), so its calls could not be returned",
                         "tools", "invalid_value");
  }
  // A forced call's grammar wins; the request parsers refuse a format beside it.
  const bool forced = tool_choice.mode == Mode::kRequired || tool_choice.mode == Mode::kFunction;
  plan.gen = chat_request(std::move(prompt), std::move(params));
  // The grammar: a forced call's shapes (computed once: the reply's cut calls use them too), or the format's.
  const char* param = forced ? "tool_choice" : format_field(format);
  std::optional<std::string> gbnf;
  try {
    if (forced) {
      plan.forced = chat::forced_tool_calls(*plan.tool_format, options.tools, tool_choice.function, parallel_tool_calls);
      std::vector<grammar::FramedSchema> shapes;
      for (const auto& s : plan.forced) shapes.push_back({s.prefix, s.body_schema, s.suffix});
      gbnf = grammar::framed_schemas_to_gbnf(shapes);
    } else {
      gbnf = format_gbnf(format);
    }
    if (gbnf) plan.gen.grammar = grammars.get(*gbnf, std::string("'") + param + "'");
  } catch (const RequestError&) {
    throw;
  } catch (const Error& e) {
    throw RequestError(std::string("'") + param + "': " + e.what(), param, "invalid_value");
  }
  return plan;
}

}  // namespace ember::engine
