#pragma once
// Finding a model's chat template and rendering a conversation with it, the way Hugging Face
// transformers' apply_chat_template(..., tokenize=False) does.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "jinja/template.h"

namespace ember::chat {

// The model folder's template as tokenizer::select_chat_template picks it (without tools):
// chat_template.jinja, else tokenizer_config.json "chat_template" (a string, or the "default" of a
// list of {name, template}); throws naming the folder if there is none.
std::string load_chat_template(const std::string& model_dir);

struct TemplateInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;      // null when absent (still defined for the template)
  nlohmann::ordered_json documents;  // null when absent
  bool add_generation_prompt = true;
  // Special tokens (bos_token, eos_token, ...) and extra keyword arguments (enable_thinking, ...).
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
};

class ChatTemplate {  // parsed once, rendered many times
 public:
  explicit ChatTemplate(std::string_view source);
  std::string render(const TemplateInputs& in, const jinja::RenderOptions& opts = {}) const;

 private:
  jinja::Template template_;
};

}  // namespace ember::chat
