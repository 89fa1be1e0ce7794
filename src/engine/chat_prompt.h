#pragma once
// The prompt of a chat request, exactly as ChatSession builds it: the model's chat template with the
// special-token variables transformers passes, encoded without adding special tokens, plus the
// thinking state (does the prompt leave <think> open, a thinking budget). Thread-safe.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "chat/harmony.h"
#include "chat/thinking_budget.h"
#include "chat/tool_call_format.h"
#include "engine/generation.h"
#include "tokenizer/tokenizer.h"

namespace ember::engine {

struct ChatOptions {
  std::optional<bool> enable_thinking;  // unset: the template's default
  int64_t think_budget = -1;            // < 0: unlimited
  nlohmann::ordered_json extra_variables = nlohmann::ordered_json::object();  // chat_template_kwargs
  nlohmann::ordered_json tools;         // null: none
  std::optional<GrammarConstraint> grammar;  // the reply follows it (after the thought)
  // The answer is structured (JSON of response_format or --json-schema), its grammar holding from
  // the reply's first token: a harmony prompt then opens the final channel itself, so that the model
  // writes the JSON where it writes answers (not in place of a channel's header).
  bool structured = false;
  // The last message is the assistant's reply begun (Anthropic's prefill, vLLM's
  // continue_final_message): the prompt ends inside it, with no generation prompt, as transformers'
  // apply_chat_template(continue_final_message=True) renders it; the reply is the rest.
  bool continue_final_message = false;
};

struct ChatPrompt {
  std::string text;
  std::vector<int32_t> ids;
  bool opens_reasoning = false;
  bool thinking_off = false;  // the request turned thinking off (enable_thinking false)
  std::optional<chat::ThinkingBudget> think_budget;
  std::optional<chat::HarmonyParser> harmony;  // set: the template is harmony (gpt-oss), the reply split by channel
};

// The generation request of a chat prompt: its ids, its thinking state and budget, the reasoning split.
GenerationRequest chat_request(ChatPrompt prompt, sampling::SamplingParams params);

class ChatPromptBuilder {
 public:
  // A folder without a chat template (an embedding model's) is no error until a prompt is asked of it.
  // `template_source`, when not empty, is the chat template instead of the folder's (--chat-template),
  // with or without tools.
  ChatPromptBuilder(const tokenizer::Tokenizer& tokenizer, const std::string& model_dir,
                    const std::string& template_source = "");

  // Throws ember::Error, saying why, when there is no chat template (a base model's folder or file).
  void require_template() const;
  // The rendered text alone. Throws ember::Error when the template fails (e.g. raise_exception on a
  // bad role order) or the folder has none.
  std::string render(const nlohmann::ordered_json& messages, const ChatOptions& options, bool add_generation_prompt) const;
  // The prompt of a reply: rendered with the generation prompt and encoded. Throws as render().
  ChatPrompt build(const nlohmann::ordered_json& messages, const ChatOptions& options) const;
  // The format this model writes tool calls in, told from the template a request with tools renders
  // through; nullopt when the template shows none Ember knows.
  std::optional<chat::ToolCallFormat> tool_call_format() const { return tool_format_; }

 private:
  const tokenizer::Tokenizer& tokenizer_;
  std::optional<chat::ChatTemplate> template_;
  std::string no_template_;  // why there is no template_
  std::optional<chat::ChatTemplate> tool_template_;  // a named list's "tool_use", for requests with tools
  std::optional<chat::ToolCallFormat> tool_format_;
  bool harmony_ = false;  // the template renders harmony (gpt-oss): replies split by channel, not by <think>
  nlohmann::ordered_json special_tokens_;
};

}  // namespace ember::engine
