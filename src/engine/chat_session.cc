#include "engine/chat_session.h"

namespace ember::engine {

ChatSession::ChatSession(model::Model& model, const tokenizer::Tokenizer& tokenizer, const std::string& model_dir,
                         int64_t context_tokens, const std::string& template_source)
    : tokenizer_(tokenizer), prompts_(tokenizer, model_dir, template_source), session_(model, tokenizer, context_tokens) {}

std::vector<int32_t> ChatSession::render_prompt(const nlohmann::ordered_json& messages, const ChatOptions& options,
                                                std::string* rendered_text) const {
  ChatPrompt p = prompts_.build(messages, options);
  if (rendered_text != nullptr) *rendered_text = std::move(p.text);
  return std::move(p.ids);
}

ChatReply ChatSession::reply(const nlohmann::ordered_json& messages, const sampling::SamplingParams& params,
                             const ChatOptions& options, const ChatCallbacks& cb) {
  GenerationRequest request = chat_request(prompts_.build(messages, options), params);
  request.grammar = options.grammar;
  GenerationCallbacks gcb;
  gcb.on_text = cb.on_content;
  gcb.on_reasoning = cb.on_reasoning;
  gcb.cancelled = cb.cancelled;
  ChatReply reply;
  reply.generation = session_.generate(std::move(request), gcb);
  reply.content = reply.generation.text;
  reply.reasoning_content = reply.generation.reasoning;
  reply.thought_forced_closed = reply.generation.thought_forced_closed;
  return reply;
}

}  // namespace ember::engine
