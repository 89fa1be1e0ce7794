#pragma once
// Ember as a C++ library: load a model (a Hugging Face folder), tokenize and detokenize, render a
// conversation with the model's own chat template, generate with sampling options and a streaming
// callback, chat over several turns on one KV cache, and serve many sequences at once with
// continuous batching. Only standard headers: the engine's types stay behind these classes.
//
//   ember::Model model("../shared/models/chat-skills");
//   ember::Chat chat(model);
//   ember::Reply r = chat.say("What is 47 plus 85?");
//
// Errors are ember::Error (ember/error.h) with a message naming the file, field or position.
// Threads: a Model computes one forward pass at a time. Its generate(), its Chats and a Service on it
// must not run at the same time; a Service is the way to serve many sequences concurrently (its
// requests may be submitted and read from any thread).
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ember/error.h"
#include "ember/sampling_options.h"

// The library's classes are its only exported symbols (the engine inside stays hidden).
#define EMBER_API __attribute__((visibility("default")))

namespace ember {

struct LoadOptions {
  int threads = 0;               // 0: all cores
  int64_t context = 0;           // tokens per sequence; 0: the model's max_position_embeddings
  // Memory the KV cache may take, in bytes; 0: 80% of what the system has available. The context
  // is the smallest of the model's, `context` and what fits (ember's memory plan, as --mem).
  int64_t kv_memory_bytes = 0;
  // How the KV cache stores keys and values: "f16", "bf16", "q8_0" or "f32"; empty: Ember's default
  // (f16, as llama.cpp and the ember commands).
  std::string kv_dtype;
  std::string quantize = "none";  // "q8_0", "q4_0", "q4_k", or llama.cpp's mixes "q4_k_m", "q5_k_m": weight matrices quantized at load
  // BF16 weight matrices multiply activations rounded to BF16 (llama.cpp's precision for BF16 models):
  // faster prefill and batched steps on AVX512-BF16 CPUs, logits within BF16 rounding of float32's.
  // An error for a model without BF16 matrices.
  bool bf16_activations = false;
  std::function<void(const std::string& stage)> progress;  // loading stages, for a progress display
};

struct Message {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

// Streaming: text is delivered in whole UTF-8 characters and never includes a stop string.
struct StreamCallbacks {
  std::function<void(std::string_view text)> on_content;
  std::function<void(std::string_view text)> on_reasoning;  // a thinking model's thought
  std::function<bool()> cancelled;  // polled between tokens; true ends the reply ("cancelled")
};

struct Reply {
  std::string content;
  std::string reasoning;       // the thought, apart from the answer
  std::vector<int32_t> tokens;  // generated token ids
  std::string finish_reason;   // "stop", "length" or "cancelled"
  int64_t prompt_tokens = 0;
  int64_t prefilled_tokens = 0;  // prompt tokens that were not already in the cache
};

class EMBER_API Model {
 public:
  // Loads a model folder (config.json, safetensors, tokenizer.json, tokenizer_config.json,
  // generation_config.json).
  explicit Model(const std::string& path, const LoadOptions& options = {});
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  std::vector<int32_t> tokenize(std::string_view text, bool add_special_tokens = true) const;
  std::string detokenize(std::span<const int32_t> ids, bool skip_special_tokens = false) const;
  // The conversation as the model's chat template renders it (Hugging Face's output, byte for byte).
  std::string render(const std::vector<Message>& messages, bool add_generation_prompt = true,
                     std::optional<bool> enable_thinking = std::nullopt) const;

  // Continues `prompt` (its special tokens added as the tokenizer's post-processor says). Each call
  // reuses the longest prefix the model's own sequence already holds.
  Reply generate(std::string_view prompt, const SamplingOptions& sampling = {}, const StreamCallbacks& callbacks = {});

  std::string architecture() const;  // config.json's model_type
  int64_t context() const;           // tokens per sequence

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  friend class Chat;
  friend class Service;
};

struct ChatOptions {
  std::string system;                    // a system message first, if not empty
  std::optional<bool> enable_thinking;   // unset: the template's default
  int64_t think_budget = -1;             // tokens a thought may take before it is closed; < 0: no limit
  // Speculative decoding by prompt lookup (ember chat --spec ngram): the same replies, faster where
  // they repeat the conversation. Off for hybrid models (Qwen3-Next, Qwen3.5).
  bool speculate = false;
  // Speculative decoding by a draft model (ember chat --draft-model): a smaller model with this one's
  // vocabulary (else the Chat's constructor throws ember::Error naming the first token that differs),
  // which must outlive the Chat. Greedy replies are the same; sampled ones have the same distribution.
  // Takes precedence over `speculate`.
  Model* draft = nullptr;
};

// One multi-turn conversation on its own KV cache: each turn computes only what the cache does not hold.
class EMBER_API Chat {
 public:
  explicit Chat(Model& model, ChatOptions options = {});
  ~Chat();

  // Adds a user message, generates the assistant's reply and adds it to the history.
  Reply say(std::string_view user_message, const SamplingOptions& sampling = {}, const StreamCallbacks& callbacks = {});
  // The reply to a whole conversation (the history is not changed).
  Reply reply(const std::vector<Message>& conversation, const SamplingOptions& sampling = {},
              const StreamCallbacks& callbacks = {});
  const std::vector<Message>& history() const;
  void reset();  // back to the system message alone

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct ServiceOptions {
  int64_t max_parallel = 8;  // sequences decoded together
  int64_t max_queue = 64;    // requests waiting beyond those; more are refused
  bool speculate = false;    // prompt lookup for every request (ember serve --spec ngram), as ChatOptions
  Model* draft = nullptr;    // a draft model for every request (ember serve --draft-model), as ChatOptions
};

// Many sequences at once: one thread batches every running sequence into each forward pass.
class EMBER_API Service {
 public:
  explicit Service(Model& model, ServiceOptions options = {});
  ~Service();  // cancels what still runs

  struct Update {
    std::string content, reasoning;  // new text since the last update
    bool finished = false;
    std::string finish_reason;  // once finished
    std::string error;          // non-empty: the request failed
  };

  class EMBER_API Request {
   public:
    // Waits up to `timeout` for news; false when there was none or the request already finished.
    bool next(Update& update, std::chrono::milliseconds timeout);
    void cancel();

   private:
    friend class Service;
    std::shared_ptr<void> stream_;
  };

  // Throws ember::Error for a prompt that does not fit, bad options, or a full queue.
  Request chat(const std::vector<Message>& conversation, const SamplingOptions& sampling = {},
               std::optional<bool> enable_thinking = std::nullopt);
  Request complete(std::string_view prompt, const SamplingOptions& sampling = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember
