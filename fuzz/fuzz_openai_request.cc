// Request bodies as the server receives them: JSON -> OpenAI chat / text completion / Responses /
// embeddings request and Anthropic Messages / count_tokens request, then what the server does next
// without a model: render the messages with the chat-skills model's template and tokenize the
// prompt or the inputs.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "engine/chat_prompt.h"
#include "server/embeddings_api.h"
#include "server/messages_api.h"
#include "server/openai.h"
#include "server/responses_api.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Model {
  std::string dir = std::string(EMBER_SHARED_DIR).append("/models/chat-skills");
  ember::tokenizer::Tokenizer tok = ember::tokenizer::Tokenizer::from_folder(dir);
  ember::engine::ChatPromptBuilder builder{tok, dir};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Model model;
  const ember::sampling::SamplingParams defaults;
  const auto vocab = static_cast<size_t>(model.tok.vocab_size());
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto body = ember::server::parse_body(text);
    try {
      const auto chat = ember::server::parse_chat_request(body, defaults, vocab);
      (void)model.builder.build(chat.messages, chat.options);
    } catch (const ember::server::ApiError&) {
    } catch (const ember::Error&) {
    }
    try {
      const auto r = ember::server::parse_responses_request(body, defaults, vocab);
      (void)model.builder.build(r.chat.messages, r.chat.options);
    } catch (const ember::server::ApiError&) {
    } catch (const ember::Error&) {
    }
    for (const bool counting : {false, true}) {
      try {
        const auto chat = ember::server::parse_messages_request(body, defaults, vocab, counting);
        (void)model.builder.build(chat.messages, chat.options);
      } catch (const ember::server::ApiError&) {
      } catch (const ember::Error&) {
      }
    }
    try {
      const auto req = ember::server::parse_text_request(body, defaults, vocab);
      for (const auto& p : req.prompts) (void)model.tok.encode(p.text, true);
    } catch (const ember::server::ApiError&) {
    } catch (const ember::Error&) {
    }
    // Both kinds of model: one that may shorten its vectors (Matryoshka) and one that may not.
    for (const bool matryoshka : {false, true}) {
      try {
        const auto req = ember::server::parse_embeddings_request(body, {64, matryoshka}, vocab);
        for (const auto& p : req.inputs) (void)model.tok.encode(p.text, false);
      } catch (const ember::server::ApiError&) {
      } catch (const ember::Error&) {
      }
    }
  } catch (const ember::server::ApiError&) {
  }
  return 0;
}
