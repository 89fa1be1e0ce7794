#pragma once
// A multi-turn chat on one KV cache: renders the whole conversation with the model's chat template
// each turn, tokenizes it, and lets Session reuse the cached prefix, so only new tokens are computed.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine/chat_prompt.h"
#include "engine/session.h"

namespace ember::engine {

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
  // template_source: the chat template instead of the folder's when not empty (--chat-template).
  ChatSession(model::Model& model, const tokenizer::Tokenizer& tokenizer, const std::string& model_dir,
              int64_t context_tokens = 0, const std::string& template_source = "");

  // The prompt ids for `messages` (a JSON array of {role, content, ...}) with the generation prompt.
  std::vector<int32_t> render_prompt(const nlohmann::ordered_json& messages, const ChatOptions& options,
                                     std::string* rendered_text = nullptr) const;

  // Generates the assistant's reply to `messages`, reusing whatever prefix of it the cache holds.
  ChatReply reply(const nlohmann::ordered_json& messages, const sampling::SamplingParams& params,
                  const ChatOptions& options = {}, const ChatCallbacks& callbacks = {});

  // Throws ember::Error, saying why, when the model has no chat template to chat through.
  void require_template() const { prompts_.require_template(); }

  Session& session() { return session_; }
  const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }

 private:
  const tokenizer::Tokenizer& tokenizer_;
  ChatPromptBuilder prompts_;
  Session session_;
};

}  // namespace ember::engine
