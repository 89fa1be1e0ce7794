#pragma once
// Embeddings from a sentence-transformers folder with a decoder backbone: each text (or list of
// token ids) to one vector as the folder's modules compute it. The prompt is put before the text,
// the tokenizer adds its special tokens, inputs longer than max_seq_length are cut (special tokens
// kept), and a batch of inputs runs as one forward pass in which every input is a sequence of its
// own (positions from 0, no padding), so batching never changes a vector. Keys and values are
// float32 during the pass, whatever the model's KV cache type.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/sentence_transformers.h"
#include "tokenizer/tokenizer.h"

namespace ember::engine {

struct EmbeddingInput {
  std::string text;
  // Token ids instead of text: embedded as they are (special tokens included, no prompt added).
  std::optional<std::vector<int32_t>> ids;
  // A name of the folder's prompts; unset: its default_prompt_name, if any.
  std::optional<std::string> prompt_name;
};

struct Embeddings {
  std::vector<std::vector<float>> vectors;  // one per input, in order
  int64_t tokens = 0;                       // over all inputs (what usage reports)
};

class Embedder {
 public:
  // Throws ember::Error naming what the folder lacks for embeddings (modules.json,
  // 1_Pooling/config.json) or what it asks for that Ember does not implement.
  Embedder(model::Model& model, const tokenizer::Tokenizer& tokenizer);

  const model::SentenceTransformersConfig& config() const { return config_; }
  // The width of a vector unless asked otherwise: truncate_dim where the folder declares it.
  int64_t dimension() const;
  // The most tokens an input keeps: max_seq_length, within the model's context.
  int64_t max_tokens() const { return max_tokens_; }

  // The ids input `in` is embedded from; `prompt_tokens` (if given) gets how many of the first are
  // the prompt's, as sentence-transformers counts them. Throws ember::Error for an unknown prompt.
  std::vector<int32_t> tokens(const EmbeddingInput& in, int64_t* prompt_tokens = nullptr) const;

  // `dimensions` 0: dimension(); fewer: the first values, re-normalised where the folder normalises.
  // Throws ember::Error naming the input ("input 2: ...") for one that cannot be embedded.
  Embeddings embed(std::span<const EmbeddingInput> inputs, int64_t dimensions = 0);

  // Tokens per forward pass: a batch larger than this runs as several passes (memory stays bounded).
  static constexpr int64_t kBatchTokens = 2048;

 private:
  model::Model& model_;
  const tokenizer::Tokenizer& tokenizer_;
  model::SentenceTransformersConfig config_;
  int64_t max_tokens_ = 0;
  size_t special_tokens_ = 0;  // what the post-processor adds to one sequence
};

}  // namespace ember::engine
