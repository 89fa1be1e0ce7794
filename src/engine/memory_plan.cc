#include "engine/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "base/format.h"

namespace ember::engine {

namespace {
std::string size(int64_t bytes) { return format_bytes(static_cast<double>(bytes)); }
}  // namespace

int64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

int64_t MemoryPlan::kv_bytes() const { return pool_factor * sequences * context * kv_bytes_per_token; }

std::string MemoryPlan::describe() const {
  std::ostringstream o;
  o << "memory plan: KV cache " << kernels::kv_type_name(kv_dtype) << ", " << context << " tokens x " << sequences
    << (sequences == 1 ? " sequence" : " sequences") << (pool_factor > 1 ? " x " + std::to_string(pool_factor) + " for prefix reuse" : "")
    << " (" << size(kv_bytes()) << " at full use, " << size(kv_bytes_per_token) << " per token), weights "
    << size(weight_bytes);
  if (state_bytes_per_sequence > 0)
    o << ", recurrent state " << size(state_bytes_per_sequence) << " per sequence with its snapshots ("
      << size(state_bytes()) << " in all)";
  o << "; budget " << size(budget_bytes) << " of " << size(available_bytes) << " available";
  return o.str();
}

MemoryPlan plan_memory(int64_t max_position_embeddings, int64_t kv_bytes_per_token, int64_t weight_bytes,
                       kernels::KvType kv_dtype, int64_t available_bytes, const MemoryRequest& r,
                       int64_t state_bytes_per_sequence) {
  MemoryPlan p;
  p.state_bytes_per_sequence = state_bytes_per_sequence;
  p.weight_bytes = weight_bytes;
  p.kv_bytes_per_token = kv_bytes_per_token;
  p.available_bytes = available_bytes;
  p.kv_dtype = kv_dtype;
  p.sequences = std::max<int64_t>(1, r.sequences);
  p.pool_factor = std::max<int64_t>(1, r.pool_factor);
  p.budget_bytes = r.budget_bytes > 0 ? r.budget_bytes
                                      : static_cast<int64_t>(kAvailableShare * static_cast<double>(available_bytes));
  const int64_t per_token_all = kv_bytes_per_token * p.sequences * p.pool_factor;
  const int64_t for_kv = std::max<int64_t>(0, p.budget_bytes - p.state_bytes());
  const int64_t fits = per_token_all > 0 ? for_kv / per_token_all : max_position_embeddings;
  p.context = std::min(max_position_embeddings, fits);
  if (r.context > 0) p.context = std::min(p.context, r.context);
  const int64_t useful = std::min({kMinUsefulContext, max_position_embeddings, r.context > 0 ? r.context : INT64_MAX});
  if (p.context < useful)
    throw Error("not enough memory for the KV cache: " + std::to_string(p.sequences) + " x " + std::to_string(useful) +
                " tokens need " + size(useful * per_token_all + p.state_bytes()) + " (" + size(kv_bytes_per_token) +
                " per token in " +
                kernels::kv_type_name(kv_dtype) + "), but the budget is " + size(p.budget_bytes) + " of " +
                size(available_bytes) + " available (set --mem, lower --parallel, or use --kv-dtype q8_0)");
  return p;
}

MemoryPlan plan_memory(const model::Model& model, const MemoryRequest& request) {
  const model::ModelConfig& c = model.config();
  return plan_memory(c.max_position_embeddings, model::KvCache::bytes_per_token(c, model.kv_dtype()), model.decode_weight_bytes(), model.kv_dtype(),
                     available_memory_bytes(), request, model::KvCache::state_bytes_with_snapshots(c));
}

}  // namespace ember::engine
