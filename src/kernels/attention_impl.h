#pragma once
// Internal: what attention.cc (dispatch, scalar reference) shares with attention_avx2.cc.
#include <algorithm>
#include <cstdint>

#include "kernels/attention.h"
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

// All query heads of kv head `kvh` for one query token at position `pos` (q and out: that token's
// rows of all heads), a tile of positions at a time. `sc` holds kAttnTile scores per query head of
// the group, `m` and `l` one float per query head (running maximum and sum).
void attend_group_scalar(const float* q, int64_t pos, int64_t kvh, const KvView& kv, const AttentionShape& s,
                         float* out, float* sc, float* m, float* l);
void attend_group_avx2(const float* q, int64_t pos, int64_t kvh, const KvView& kv, const AttentionShape& s, float* out,
                       float* sc, float* m, float* l);

}  // namespace ember::kernels::detail
