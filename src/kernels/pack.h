#pragma once
// Plain (F32/F16/BF16) weights repacked into row panels for the matmul: the layout lets one kernel
// run decode and batches with the same summation order, without horizontal sums.
//
// Layout (Layout::Panels): rows are padded with zeros to panels of kPanelRows. Panel p holds rows
// [16p, 16p + 16) column by column: element (r, c) is at p * 16 * cols + c * 16 + r % 16, in the
// matrix's dtype. A kernel loads the 16 rows' weights of one column as two 8-float vectors and
// multiplies them by one broadcast activation.
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
  friend PackedMatrix pack(const WeightMatrix& w, DType to, ThreadPool& pool);
  WeightBuffer data_;
  WeightMatrix view_;
};

// Packs a row-major plain matrix (any dtype but quantized) into panels, keeping its dtype, or
// converting it to `to` (F32, F16 or BF16; rounding to nearest even).
PackedMatrix pack(const WeightMatrix& w, ThreadPool& pool);
PackedMatrix pack(const WeightMatrix& w, DType to, ThreadPool& pool);

// Bytes the panels of a rows x cols matrix of `dtype` occupy.
int64_t packed_bytes(DType dtype, int64_t rows, int64_t cols);

// Element index of weight (r, c) in a packed matrix.
inline int64_t panel_index(int64_t cols, int64_t r, int64_t c) {
  return (r / kPanelRows) * kPanelRows * cols + c * kPanelRows + r % kPanelRows;
}

}  // namespace ember::kernels
