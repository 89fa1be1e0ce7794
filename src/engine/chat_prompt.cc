#include "engine/chat_prompt.h"

#include "base/error.h"
#include "chat/reasoning.h"
#include "tokenizer/tokenizer_config.h"

namespace ember::engine {
namespace {

// The rendered conversation cut right after the text of its last message, as transformers cuts it
// for continue_final_message: at the last occurrence of that text (stripped, where the template
// trimmed it).
std::string cut_after_final_message(const std::string& rendered, const nlohmann::ordered_json& messages) {
  if (!messages.is_array() || messages.empty() || messages.back().value("role", "") != "assistant")
    throw Error("continue_final_message: the last message must be the assistant's");
  const nlohmann::ordered_json& content = messages.back().contains("content") ? messages.back()["content"] : nullptr;
  std::string text;
  if (content.is_string()) {
    text = content.get<std::string>();
  } else if (content.is_array()) {  // the last text part
    for (auto it = content.rbegin(); it != content.rend() && text.empty(); ++it)
      if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) text = (*it)["text"].get<std::string>();
  }
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t first = text.find_first_not_of(kSpace);
  if (first == std::string::npos)
    throw Error("continue_final_message: the last (assistant) message has no text to continue");
  const std::string left = text.substr(first), stripped = left.substr(0, left.find_last_not_of(kSpace) + 1);
  const size_t at = rendered.rfind(stripped);
  if (at == std::string::npos)
    throw Error("continue_final_message: the chat template does not render the last message's text, so the reply "
                "cannot continue it");
  return rendered.substr(0, at + (rendered.compare(at, left.size(), left) == 0 ? left.size() : stripped.size()));
}

}  // namespace

ChatPromptBuilder::ChatPromptBuilder(const tokenizer::Tokenizer& tokenizer, const std::string& model_dir,
                                     const std::string& template_source)
    : tokenizer_(tokenizer), special_tokens_(tokenizer::special_token_variables(tokenizer.config())) {
  if (!template_source.empty()) {
    template_.emplace(template_source);
    tool_format_ = chat::detect_tool_call_format(template_source);
    harmony_ = chat::is_harmony_template(template_source);
    return;
  }
  try {
    const std::string& source = tokenizer::select_chat_template(tokenizer.config(), /*with_tools=*/false, model_dir);
    try {
      template_.emplace(source);
    } catch (const Error& e) {  // a template that does not parse: say whose
      fail(model_dir, std::string("its chat template: ") + e.what());
    }
    harmony_ = chat::is_harmony_template(source);
  } catch (const Error& e) {
    no_template_ = e.what();
    return;
  }
  // transformers renders a request with tools through a named list's "tool_use" template.
  const bool named_tool_use = tokenizer.config().named_chat_templates.count("tool_use") != 0;
  const std::string& tool_source = tokenizer::select_chat_template(tokenizer.config(), named_tool_use, model_dir);
  if (named_tool_use) tool_template_.emplace(tool_source);
  tool_format_ = chat::detect_tool_call_format(tool_source);
}

void ChatPromptBuilder::require_template() const {
  if (!template_) throw Error(no_template_);
}

std::string ChatPromptBuilder::render(const nlohmann::ordered_json& messages, const ChatOptions& options,
                                      bool add_generation_prompt) const {
  require_template();
  chat::TemplateInputs in;
  in.messages = messages;
  in.tools = options.tools;
  in.add_generation_prompt = add_generation_prompt && !options.continue_final_message;
  in.variables = special_tokens_;
  for (auto it = options.extra_variables.begin(); it != options.extra_variables.end(); ++it)
    in.variables[it.key()] = it.value();
  if (options.enable_thinking) in.variables["enable_thinking"] = *options.enable_thinking;
  // gpt-oss knows low, medium and high: an API's "none" or "minimal" asks for the least of them.
  if (auto effort = in.variables.find("reasoning_effort");
      harmony_ && effort != in.variables.end() && (*effort == "none" || *effort == "minimal"))
    *effort = "low";
  const std::string text = (tool_template_ && !options.tools.is_null() ? *tool_template_ : *template_).render(in);
  return options.continue_final_message ? cut_after_final_message(text, messages) : text;
}

ChatPrompt ChatPromptBuilder::build(const nlohmann::ordered_json& messages, const ChatOptions& options) const {
  ChatPrompt p;
  p.text = render(messages, options, /*add_generation_prompt=*/true);
  if (harmony_ && options.structured && p.text.ends_with("<|start|>assistant")) p.text += chat::kHarmonyFinal;
  p.ids = tokenizer_.encode(p.text, /*add_special_tokens=*/false);
  p.opens_reasoning = chat::prompt_opens_reasoning(p.text);
  p.thinking_off = options.enable_thinking == false;
  if (harmony_) {  // the channels tell the thought; the budget ends the analysis message
    p.harmony = chat::HarmonyParser::after_prompt(p.text);
    p.opens_reasoning = p.harmony->in_reasoning();
    if (options.think_budget >= 0)
      p.think_budget = chat::ThinkingBudget::of_parsed_thought(tokenizer_.encode(chat::kHarmonyCloseThought, false),
                                                                options.think_budget);
    return p;
  }

  const auto open_id = tokenizer_.token_to_id(chat::kThinkOpen);
  if (options.think_budget >= 0 && open_id) {
    std::vector<int32_t> close_ids;
    if (auto close = tokenizer_.token_to_id(chat::kThinkClose)) close_ids = {*close};
    else close_ids = tokenizer_.encode(chat::kThinkClose, false);
    if (options.think_budget == 0 && p.opens_reasoning) {  // no thought at all: close it in the prompt
      p.ids.insert(p.ids.end(), close_ids.begin(), close_ids.end());
      p.opens_reasoning = false;
    }
    p.think_budget.emplace(*open_id, close_ids, options.think_budget, p.opens_reasoning);
  }
  return p;
}

GenerationRequest chat_request(ChatPrompt prompt, sampling::SamplingParams params) {
  GenerationRequest g;
  g.prompt = std::move(prompt.ids);
  g.params = std::move(params);
  g.split_reasoning = true;
  g.starts_in_reasoning = prompt.opens_reasoning;
  g.may_open_thought = !prompt.thinking_off;
  g.think_budget = std::move(prompt.think_budget);
  g.harmony = std::move(prompt.harmony);
  return g;
}

}  // namespace ember::engine
