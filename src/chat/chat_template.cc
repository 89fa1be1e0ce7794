#include "chat/chat_template.h"

#include "tokenizer/tokenizer_config.h"

namespace ember::chat {

std::string load_chat_template(const std::string& model_dir) {
  return tokenizer::select_chat_template(tokenizer::load_tokenizer_config(model_dir), /*with_tools=*/false, model_dir);
}

ChatTemplate::ChatTemplate(std::string_view source) : template_(jinja::Template::parse(source)) {}

std::string ChatTemplate::render(const TemplateInputs& in, const jinja::RenderOptions& opts) const {
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  if (in.variables.is_object())
    for (const auto& [k, v] : in.variables.items()) ctx[k] = v;
  ctx["messages"] = in.messages;
  ctx["tools"] = in.tools;
  ctx["documents"] = in.documents;
  ctx["add_generation_prompt"] = in.add_generation_prompt;
  return template_.render(ctx, opts);
}

}  // namespace ember::chat
