#pragma once
// Causal grouped-query attention of new query tokens over a paged key/value cache.
#include <cstdint>
#include <span>

#include "kernels/cpu.h"
#include "kernels/kv_type.h"
#include "kernels/thread_pool.h"

namespace ember::kernels {

// Keys and values of one sequence in one layer, stored in fixed-size blocks of positions.
// Position p lives in block k_blocks[p / block_size] (values: v_blocks), slot p % block_size. A block
// holds each kv head's slots together: value i of kv head h in slot s is element
// of row h * block_size + s, so one head's keys are read as one sequential run. Rows are stored as
// `type` (kv_type.h); scores and sums are computed in float32 whatever the stored type.
// Row index, within a block, of kv head `kvh`'s values in slot `slot` (the layout above): the one
// place both the cache writer and the attention kernel take it from.
inline int64_t kv_row(int64_t block_size, int64_t kvh, int64_t slot) { return kvh * block_size + slot; }

struct KvView {
  const void* const* k_blocks = nullptr;
  const void* const* v_blocks = nullptr;
  int64_t block_size = 0;
  KvType type = KvType::F32;
};

struct AttentionShape {
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t sliding_window = 0;  // 0: unlimited; else key j is visible to query i when i - W < j <= i
  float scale = 1.0f;
  float softcap = 0.0f;  // 0: none; else scores become tanh(s / softcap) * softcap (Gemma 2)
  // n_heads learned logits (gpt-oss's sinks), one per query head: each joins its head's softmax
  // denominator as a score with no value, so a head may attend to nothing. Null: none.
  const float* sinks = nullptr;
};

// For each of n_tokens queries (q: [n_tokens][n_heads*head_dim]) at positions first_pos + t,
// attends over cached positions [max(0, pos-W+1), pos] and writes out: [n_tokens][n_heads*head_dim].
// Streams over the cache with an online softmax, so nothing of context length is materialised.
void attention(const float* q, int64_t n_tokens, int64_t first_pos, const KvView& kv, const AttentionShape& s,
               float* out, ThreadPool& pool);

// One sequence's share of a batched attention call (the arguments of the call above).
struct AttentionItem {
  const float* q = nullptr;
  int64_t n_tokens = 0;
  int64_t first_pos = 0;
  KvView kv;
  float* out = nullptr;
  // Every token alone through the single-token kernel, as decode steps of one token compute it (the
  // same bits; the prompt kernel may differ in the last ones): speculative decoding's verification.
  bool by_token = false;
};

// Attention of several sequences in one pool dispatch: a decode step of many sequences has little
// work per sequence, so one loop over all (sequence, token, kv head) units keeps the threads busy.
void attention(std::span<const AttentionItem> items, const AttentionShape& s, ThreadPool& pool);
// The same with an explicit instruction set (tests run every supported one; Scalar is the reference).
void attention(std::span<const AttentionItem> items, const AttentionShape& s, ThreadPool& pool, Isa isa);

}  // namespace ember::kernels
