#pragma once
// How much context fits: the KV cache is sized from the memory the system has, not from the model's
// trained context alone (131072 tokens for Llama 3.x would ask for more memory than most machines
// have). The context per sequence is the smallest of the model's max_position_embeddings, the
// requested context, and what fits for the planned sequences in the budget.
#include <cstdint>
#include <string>

#include "base/dtype.h"
#include "model/model.h"

namespace ember::engine {

struct MemoryRequest {
  int64_t context = 0;     // tokens per sequence asked for (--ctx); <= 0: no limit of its own
  int64_t sequences = 1;   // sequences that hold a context at once (--parallel)
  // KV blocks allocated per sequence's context: 2 for the server, which keeps as many again for
  // reusing finished conversations' prefixes.
  int64_t pool_factor = 1;
  int64_t budget_bytes = 0;  // memory for the KV cache (--mem); <= 0: kAvailableShare of what is available
};

struct MemoryPlan {
  int64_t weight_bytes = 0;        // as held in memory (after packing or quantization)
  int64_t kv_bytes_per_token = 0;  // attention layers x KV heads x head_dim x 2 x element size
  // A hybrid's recurrent state (conv windows and delta-rule states of its linear-attention layers)
  // with the snapshots a sequence may keep: fixed per sequence, whatever its length. 0: none.
  int64_t state_bytes_per_sequence = 0;
  int64_t available_bytes = 0;     // what the system reports available (MemAvailable)
  int64_t budget_bytes = 0;        // for the KV cache
  int64_t sequences = 1, context = 0;
  int64_t pool_factor = 1;  // KV blocks held per sequence's context (MemoryRequest::pool_factor)
  kernels::KvType kv_dtype = model::kKvTypeDefault;

  int64_t kv_bytes() const;  // of the whole pool at full use (pool_factor included)
  int64_t state_bytes() const { return pool_factor * sequences * state_bytes_per_sequence; }
  std::string describe() const;  // the one line printed at start
};

// The share of available memory the KV cache may take by default.
constexpr double kAvailableShare = 0.8;
// A context shorter than this (or than max_position_embeddings, if smaller) is not worth serving.
constexpr int64_t kMinUsefulContext = 256;

// Bytes the system reports available (/proc/meminfo MemAvailable); 0 if it cannot tell.
int64_t available_memory_bytes();

// Throws ember::Error with the numbers when not even one sequence of a useful context fits.
MemoryPlan plan_memory(const model::Model& model, const MemoryRequest& request);
// The same from the parts, for a model not yet loaded and for tests.
// state_bytes_per_sequence comes off the budget before the context is sized.
MemoryPlan plan_memory(int64_t max_position_embeddings, int64_t kv_bytes_per_token, int64_t weight_bytes,
                       kernels::KvType kv_dtype, int64_t available_bytes, const MemoryRequest& request,
                       int64_t state_bytes_per_sequence = 0);

}  // namespace ember::engine
