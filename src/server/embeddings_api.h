#pragma once
// OpenAI's /v1/embeddings over an engine::Embedder: the request checked field by field and the
// response shaped (lists of floats, or base64 of little-endian float32 as OpenAI sends them). No
// HTTP here, so all of it is testable without a socket.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/embedder.h"
#include "server/openai.h"

namespace ember::server {

struct EmbeddingsRequest {
  std::vector<TextPrompt> inputs;  // one or more, each text or token ids
  bool base64 = false;             // encoding_format "base64"
  int64_t dimensions = 0;          // 0: the model's own width
  std::string model;
};

// The widths `dimensions` may ask for: `full` (the vectors' width), and fewer only where the
// folder declares Matryoshka training (config_sentence_transformers.json's truncate_dim).
struct EmbeddingWidths {
  int64_t full = 0;
  bool matryoshka = false;
};

// Throws ApiError(400) naming the field: unknown ones included (model and user are accepted).
EmbeddingsRequest parse_embeddings_request(const ordered_json& body, const EmbeddingWidths& widths, size_t vocab_size);

// {"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model", "usage"}.
ordered_json embeddings_response(const engine::Embeddings& e, bool base64, const std::string& model);

// The bytes of `v` as little-endian float32, in base64.
std::string base64_floats(std::span<const float> v);

// The route's work for one served model: its Embedder when the folder has sentence-transformers
// modules, else why not (every request then gets a 400 saying what is missing).
class EmbeddingsApi {
 public:
  EmbeddingsApi(model::Model& model, const tokenizer::Tokenizer& tokenizer);
  // The response to a request body; throws ApiError.
  ordered_json respond(const ordered_json& body, const std::string& model_name);

 private:
  std::optional<engine::Embedder> embedder_;
  std::string unavailable_;  // set when there is no embedder
  size_t vocab_size_;
};

}  // namespace ember::server
