#include "engine/chat_session.h"

#include "base/error.h"
#include "chat/reasoning.h"
#include "chat/thinking_budget.h"

namespace ember::engine {

ChatSession::ChatSession(model::Model& model, const tokenizer::Tokenizer& tokenizer, const std::string& model_dir,
                         int64_t context_tokens)
    : tokenizer_(tokenizer),
      template_(chat::load_chat_template(model_dir)),
      session_(model, tokenizer, context_tokens) {
  const auto& cfg = tokenizer.config();
  special_tokens_ = nlohmann::ordered_json::object();
  for (const auto& [key, value] : {std::pair{"bos_token", cfg.bos_token}, {"eos_token", cfg.eos_token},
                                   {"unk_token", cfg.unk_token}, {"pad_token", cfg.pad_token}})
    if (!value.empty()) special_tokens_[key] = value;
}

std::vector<int32_t> ChatSession::render_prompt(const nlohmann::ordered_json& messages, const ChatOptions& options,
                                                std::string* rendered_text) const {
  chat::TemplateInputs in;
  in.messages = messages;
  in.tools = options.tools;
  in.add_generation_prompt = true;
  in.variables = special_tokens_;
  for (auto it = options.extra_variables.begin(); it != options.extra_variables.end(); ++it)
    in.variables[it.key()] = it.value();
  if (options.enable_thinking) in.variables["enable_thinking"] = *options.enable_thinking;
  const std::string text = template_.render(in);
  if (rendered_text != nullptr) *rendered_text = text;
  // As transformers' apply_chat_template: the template already placed every special token.
  return tokenizer_.encode(text, /*add_special_tokens=*/false);
}

ChatReply ChatSession::reply(const nlohmann::ordered_json& messages, const sampling::SamplingParams& params,
                             const ChatOptions& options, const ChatCallbacks& cb) {
  std::string text;
  std::vector<int32_t> prompt = render_prompt(messages, options, &text);
  bool opens = chat::prompt_opens_reasoning(text);

  std::optional<chat::ThinkingBudget> budget;
  const auto open_id = tokenizer_.token_to_id("<think>");
  if (options.think_budget >= 0 && open_id) {
    std::vector<int32_t> close_ids;
    if (auto close = tokenizer_.token_to_id("</think>")) close_ids = {*close};
    else close_ids = tokenizer_.encode("</think>", false);
    if (options.think_budget == 0 && opens) {  // no thought at all: close it in the prompt
      prompt.insert(prompt.end(), close_ids.begin(), close_ids.end());
      opens = false;
    }
    budget.emplace(*open_id, close_ids, options.think_budget, opens);
  }

  ChatReply reply;
  chat::ReasoningParser parser(opens);
  auto route = [&](const chat::ReasoningDelta& d) {
    reply.reasoning_content += d.reasoning;
    reply.content += d.content;
    if (!d.reasoning.empty() && cb.on_reasoning) cb.on_reasoning(d.reasoning);
    if (!d.content.empty() && cb.on_content) cb.on_content(d.content);
  };
  GenerationCallbacks gcb;
  gcb.on_text = [&](std::string_view t) { route(parser.push(t)); };
  gcb.cancelled = cb.cancelled;
  if (budget) gcb.force_after = [&](int32_t t) { return budget->after_token(t); };
  reply.generation = session_.generate(prompt, params, gcb);
  route(parser.flush());
  reply.thought_forced_closed = budget && budget->forced();
  return reply;
}

}  // namespace ember::engine
