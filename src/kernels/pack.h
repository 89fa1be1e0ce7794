#pragma once
// Plain (F32/F16/BF16) weights repacked into row panels for the matmul: the layout lets one kernel
// run decode and batches with the same summation order, without horizontal sums.
//
// Layout (Layout::Panels): rows are padded with zeros to panels of kPanelRows. Panel p holds rows
// [16p, 16p + 16) column by column: element (r, c) is at p * panel_stride + c * 16 +
// panel_slot(r % 16), in the matrix's dtype. A kernel loads the 16 rows' weights of one column as two
// 8-float vectors and multiplies them by one broadcast activation.
#include <cstdint>

#include "kernels/matmul.h"
#include "kernels/weight_buffer.h"

namespace ember::kernels {

constexpr int64_t kPanelRows = 16;

// A panel-packed copy of a plain weight matrix; owns its memory (64-byte aligned).
class PackedMatrix {
 public:
  PackedMatrix() = default;
  const WeightMatrix& view() const { return view_; }
  int64_t bytes() const;

 private:
  friend PackedMatrix pack(const WeightMatrix& w, DType to, ThreadPool& pool, WeightArena* arena);
  WeightBuffer data_;
  WeightMatrix view_;
};

// Packs a row-major plain matrix (any dtype but quantized) into panels, keeping its dtype, or
// converting it to `to` (F32, F16 or BF16; rounding to nearest even). Memory from `arena` when given
// (a model's weights), else its own.
PackedMatrix pack(const WeightMatrix& w, ThreadPool& pool);
PackedMatrix pack(const WeightMatrix& w, DType to, ThreadPool& pool, WeightArena* arena = nullptr);

// Bytes the panels of a rows x cols matrix of `dtype` occupy.
int64_t packed_bytes(DType dtype, int64_t rows, int64_t cols);

// Zero bytes after each panel of kPanelGapFrom bytes or more. Decode reads several panels side by
// side; a power of two apart (16 x 2048 bf16 columns: 64 KiB) their streams contend for the same
// DRAM banks, and one thread's decode from memory read 10% less (kernels_bench BM_DecodeStream, Zen 3).
constexpr int64_t kPanelGapBytes = 17 * 64;
constexpr int64_t kPanelGapFrom = int64_t{32} << 10;

// Elements from one panel's start to the next.
inline int64_t panel_stride(DType dtype, int64_t cols) {
  const auto es = static_cast<int64_t>(dtype_size(dtype));
  return kPanelRows * cols + (kPanelRows * cols * es >= kPanelGapFrom ? kPanelGapBytes / es : 0);
}

// Where row i of a panel sits in its column. BF16 interleaves the halves (r0 r8 r1 r9 ... r7 r15):
// read as 8 32-bit words, a shift left by 16 gives rows 0-7 as float32 and clearing the low halves
// gives rows 8-15, two cheap instructions where widening each half takes two (bf16 decode with the
// weights in cache was half as fast as f16's conversion, vcvtph2ps). The other types keep row order.
inline int64_t panel_slot(DType dtype, int64_t i) {
  if (dtype != DType::BF16) return i;
  return i < kPanelRows / 2 ? 2 * i : 2 * (i - kPanelRows / 2) + 1;
}

// Element index of weight (r, c) in a packed matrix.
inline int64_t panel_index(DType dtype, int64_t cols, int64_t r, int64_t c) {
  return (r / kPanelRows) * panel_stride(dtype, cols) + c * kPanelRows + panel_slot(dtype, r % kPanelRows);
}

}  // namespace ember::kernels
