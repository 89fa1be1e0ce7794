#pragma once
// Internal: what attention.cc (dispatch, scalar reference) shares with the SIMD kernels (attention_avx2.cc
// for single tokens, attention_prompt.h for prompts).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "kernels/exp.h"
#include "kernels/load_scalar.h"

namespace ember::kernels::detail {

// Positions whose scores are computed together: the running maximum (and the rescale of what was
// accumulated) is updated once per tile instead of once per position. A decode step of a short
// conversation fits one tile: smaller tiles cost more in per-tile work than the scores themselves.
constexpr int64_t kAttnTile = 128;

// The first position a query at `pos` sees (window 0: unlimited).
inline int64_t first_visible(int64_t pos, int64_t window) {
  return window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
}

// What a finished row of query head `head` is multiplied by, given its running maximum m and sum l:
// 1 / l, or with a sink 1 / (l + exp(sink - m)), taken relative to the larger of the two so that
// nothing overflows. Without sinks the bits are those of 1 / l.
inline float row_normaliser(const AttentionShape& s, int64_t head, float m, float l) {
  if (s.sinks == nullptr) return 1.0f / l;
  const float sink = s.sinks[head];
  if (sink <= m) return 1.0f / (l + exp_det(sink - m));
  const float r = exp_det(m - sink);  // l and the accumulated row were taken relative to m
  return r / (l * r + 1.0f);
}

// Readers of one stored row, chosen once per call (the kernels are templates over them, so there is
// no branch per value): load1(row, i) is value i as float32; the SIMD kernels add their loads.
template <DType T>
struct ElemRow {
  static float load1(const void* row, int64_t i) { return simd::load1(row, T, i); }
};
template <int64_t B>
struct Q8Row {
  static float load1(const void* row, int64_t i) { return q8_row_value<B>(row, i); }
};

// f(reader) with the reader of rows of `type` at head size hd.
template <class F>
void with_row_reader(KvType type, int64_t hd, F&& f) {
  switch (type) {
    case KvType::F32: f(ElemRow<DType::F32>{}); return;
    case KvType::F16: f(ElemRow<DType::F16>{}); return;
    case KvType::BF16: f(ElemRow<DType::BF16>{}); return;
    case KvType::Q8_0:
      switch (kv_q8_block(hd)) {
        case 32: f(Q8Row<32>{}); return;
        case 16: f(Q8Row<16>{}); return;
        default: f(Q8Row<8>{}); return;  // kv_row_bytes refused other head sizes at cache creation
      }
  }
}

// krow[j] and vrow[j]: kv head kvh's key and value rows of position p0 + j, j < n, for rows of
// row_bytes. Block and slot are stepped rather than divided (a 64-bit division per key costs more
// than its scores do at small head sizes).
inline void kv_rows(const KvView& kv, int64_t kvh, int64_t row_bytes, int64_t p0, int64_t n, const void** krow,
                    const void** vrow) {
  int64_t blk = p0 / kv.block_size, slot = p0 % kv.block_size;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t offset = kv_row(kv.block_size, kvh, slot) * row_bytes;
    krow[j] = static_cast<const uint8_t*>(kv.k_blocks[blk]) + offset;
    vrow[j] = static_cast<const uint8_t*>(kv.v_blocks[blk]) + offset;
    if (++slot == kv.block_size) {
      slot = 0;
      ++blk;
    }
  }
}

// A prompt's work unit (attention_prompt.h): up to block_tokens consecutive tokens of one
// sequence times the query heads of one kv head, kBlockRows query rows or more. Each tile of keys
// and values is read (and converted to float32) once for all of them.
constexpr int64_t kBlockRows = 32;
inline int64_t block_tokens(const AttentionShape& s) {
  return std::max<int64_t>(1, kBlockRows / (s.n_heads / s.n_kv_heads));
}

// A work unit's buffers (one per pool chunk): a tile of keys and of values as float32, the query
// rows' columns a vector of rows to a group, a tile of scores, and each row's running maximum and sum
// and output row. Only the prompt kernel uses it (a decode chunk never allocates one).
struct AttnScratch {
  explicit AttnScratch(const AttentionShape& s)
      : k(static_cast<size_t>(kAttnTile * s.head_dim)), v(k.size()),
        qt(static_cast<size_t>(lanes(s) * s.head_dim)), scores(static_cast<size_t>(kAttnTile * lanes(s))),
        m(static_cast<size_t>(lanes(s))), l(m.size()), out_rows(m.size()) {}
  // Rows of a unit rounded up to a multiple of 16 (AVX-512 lanes), and at least a group of query heads.
  static int64_t lanes(const AttentionShape& s) {
    const int64_t group = s.n_heads / s.n_kv_heads;
    return std::max<int64_t>((block_tokens(s) * group + 15) / 16 * 16, group);
  }
  std::vector<float> k, v, qt, scores, m, l;
  std::vector<float*> out_rows;
};

// All query heads of kv head `kvh` for one query token at position `pos` (q and out: that token's
// rows of all heads), a tile of positions at a time. `sc` holds kAttnTile scores per query head of
// the group, `m` and `l` one float per query head (running maximum and sum).
void attend_group_scalar(const float* q, int64_t pos, int64_t kvh, const KvView& kv, const AttentionShape& s,
                         float* out, float* sc, float* m, float* l);
void attend_group_avx2(const float* q, int64_t pos, int64_t kvh, const KvView& kv, const AttentionShape& s, float* out,
                       float* sc, float* m, float* l);
// The same in AVX-512 (attention_decode_avx512.cc), whose sums may differ from AVX2's in the last bits.
void attend_group_avx512(const float* q, int64_t pos, int64_t kvh, const KvView& kv, const AttentionShape& s,
                         float* out, float* sc, float* m, float* l);
// Tokens [t0, t0 + nt) of a prompt `it` (nt <= block_tokens(s)) for kv head kvh. A token's result
// has the same bits whichever tokens share its unit, so however a prompt is split into steps of
// two tokens or more; it may differ in the last bits from attend_group_avx2's for the same token.
void attend_block_avx2(const AttentionItem& it, int64_t t0, int64_t nt, int64_t kvh, const AttentionShape& s,
                       AttnScratch& w);
// The same in AVX-512 (16 rows to a vector), with the same bits.
void attend_block_avx512(const AttentionItem& it, int64_t t0, int64_t nt, int64_t kvh, const AttentionShape& s,
                         AttnScratch& w);

}  // namespace ember::kernels::detail
