#pragma once
// What an ember::Model holds behind its public header: the engine's model, its tokenizer, its chat
// template and its decoding defaults, and the conversions from the public types.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ember/ember.h"
#include "engine/chat_prompt.h"
#include "engine/generation.h"
#include "engine/memory_plan.h"
#include "engine/session.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace ember {

struct Model::Impl {
  Impl(const std::string& path, const LoadOptions& options);

  // The model's defaults with `o` laid over them (throws ember::Error for a bad option).
  sampling::SamplingParams params(const SamplingOptions& o) const;

  std::string dir;
  std::unique_ptr<model::Model> model;
  tokenizer::Tokenizer tokenizer;
  engine::ChatPromptBuilder prompts;
  sampling::SamplingParams defaults;
  // The memory plan of `sequences` sequences (pool_factor: KV blocks per context) under the load
  // options' context and memory budget; its context per sequence.
  int64_t planned_context(int64_t sequences, int64_t pool_factor) const;

  engine::MemoryRequest memory;  // from the load options
  int64_t context;               // for one sequence (Model::generate, Model::chat)
  std::unique_ptr<engine::Session> session;  // Model::generate's sequence, made on first use
};

nlohmann::ordered_json to_json(const std::vector<Message>& messages);
// ChatOptions::speculate and ServiceOptions::speculate: prompt lookup with the engine's defaults.
inline engine::SpecOptions prompt_lookup() {
  engine::SpecOptions s;
  s.mode = engine::SpecMode::kNgram;
  return s;
}
// ChatOptions::draft and ServiceOptions::draft: `draft` (which the caller keeps alive) checked against
// `target`'s vocabulary, its cost estimated as the CLI does; prompt lookup where only `speculate` is set.
engine::SpecOptions speculation_of(const Model::Impl& target, const Model::Impl* draft, bool speculate);
Reply to_reply(engine::GenerationResult r);

}  // namespace ember
