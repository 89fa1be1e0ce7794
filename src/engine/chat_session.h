#pragma once
// A multi-turn chat on one KV cache: renders the whole conversation with the model's chat template
// each turn, tokenizes it, and lets Session reuse the cached prefix, so only new tokens are computed.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "chat/chat_template.h"
#include "engine/session.h"

namespace ember::engine {

struct ChatOptions {
  std::optional<bool> enable_thinking;  // unset: the template's default
  int64_t think_budget = -1;            // < 0: unlimited
  nlohmann::ordered_json extra_variables = nlohmann::ordered_json::object();  // chat_template_kwargs
  nlohmann::ordered_json tools;         // null: none
};

struct ChatReply {
  std::string content;
  std::string reasoning_content;
  GenerationResult generation;
  bool thought_forced_closed = false;
};

struct ChatCallbacks {
  std::function<void(std::string_view)> on_content;
  std::function<void(std::string_view)> on_reasoning;
  std::function<bool()> cancelled;
};

class ChatSession {
 public:
  ChatSession(model::Model& model, const tokenizer::Tokenizer& tokenizer, const std::string& model_dir,
              int64_t context_tokens = 0);

  // The prompt ids for `messages` (a JSON array of {role, content, ...}) with the generation prompt.
  std::vector<int32_t> render_prompt(const nlohmann::ordered_json& messages, const ChatOptions& options,
                                     std::string* rendered_text = nullptr) const;

  // Generates the assistant's reply to `messages`, reusing whatever prefix of it the cache holds.
  ChatReply reply(const nlohmann::ordered_json& messages, const sampling::SamplingParams& params,
                  const ChatOptions& options = {}, const ChatCallbacks& callbacks = {});

  Session& session() { return session_; }
  const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }

 private:
  const tokenizer::Tokenizer& tokenizer_;
  chat::ChatTemplate template_;
  nlohmann::ordered_json special_tokens_;  // bos_token, eos_token, ... as transformers passes them
  Session session_;
};

}  // namespace ember::engine
