#include "engine/chat_session.h"

#include "chat/reasoning.h"

namespace ember::engine {

ChatSession::ChatSession(model::Model& model, const tokenizer::Tokenizer& tokenizer, const std::string& model_dir,
                         int64_t context_tokens)
    : tokenizer_(tokenizer), prompts_(tokenizer, model_dir), session_(model, tokenizer, context_tokens) {}

std::vector<int32_t> ChatSession::render_prompt(const nlohmann::ordered_json& messages, const ChatOptions& options,
                                                std::string* rendered_text) const {
  ChatPrompt p = prompts_.build(messages, options);
  if (rendered_text != nullptr) *rendered_text = std::move(p.text);
  return std::move(p.ids);
}

ChatReply ChatSession::reply(const nlohmann::ordered_json& messages, const sampling::SamplingParams& params,
                             const ChatOptions& options, const ChatCallbacks& cb) {
  ChatPrompt prompt = prompts_.build(messages, options);
  ChatReply reply;
  chat::ReasoningParser parser(prompt.opens_reasoning);
  auto route = [&](const chat::ReasoningDelta& d) {
    reply.reasoning_content += d.reasoning;
    reply.content += d.content;
    if (!d.reasoning.empty() && cb.on_reasoning) cb.on_reasoning(d.reasoning);
    if (!d.content.empty() && cb.on_content) cb.on_content(d.content);
  };
  GenerationCallbacks gcb;
  gcb.on_text = [&](std::string_view t) { route(parser.push(t)); };
  gcb.cancelled = cb.cancelled;
  if (prompt.think_budget) gcb.force_after = [&](int32_t t) { return prompt.think_budget->after_token(t); };
  reply.generation = session_.generate(prompt.ids, params, gcb);
  route(parser.flush());
  reply.thought_forced_closed = prompt.think_budget && prompt.think_budget->forced();
  return reply;
}

}  // namespace ember::engine
