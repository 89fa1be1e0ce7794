#include "kernels/pack.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "base/error.h"

namespace ember::kernels {

void PackedMatrix::Free::operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t{64}); }

int64_t packed_bytes(DType dtype, int64_t rows, int64_t cols) {
  const int64_t panels = (rows + kPanelRows - 1) / kPanelRows;
  return panels * kPanelRows * cols * static_cast<int64_t>(dtype_size(dtype));
}

int64_t PackedMatrix::bytes() const { return data_ ? packed_bytes(view_.dtype, view_.rows, view_.cols) : 0; }

PackedMatrix pack(const WeightMatrix& w, ThreadPool& pool) {
  if (w.qtype != QType::None || w.layout != Layout::Rows) fail("pack", "needs a plain row-major matrix");
  const int64_t es = static_cast<int64_t>(dtype_size(w.dtype)), panels = (w.rows + kPanelRows - 1) / kPanelRows;
  PackedMatrix m;
  const int64_t bytes = packed_bytes(w.dtype, w.rows, w.cols);
  m.data_.reset(static_cast<uint8_t*>(::operator new[](static_cast<size_t>(std::max<int64_t>(64, bytes)), std::align_val_t{64})));
  uint8_t* dst = m.data_.get();
  const auto* src = static_cast<const uint8_t*>(w.data);
  pool.parallel_for(panels, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      uint8_t* panel = dst + p * kPanelRows * w.cols * es;
      for (int64_t i = 0; i < kPanelRows; ++i) {
        const int64_t r = p * kPanelRows + i;
        if (r >= w.rows) {  // padding rows: zeros (0 is all-zero bits in every float type)
          for (int64_t c = 0; c < w.cols; ++c) std::memset(panel + (c * kPanelRows + i) * es, 0, static_cast<size_t>(es));
          continue;
        }
        const uint8_t* row = src + r * w.cols * es;
        for (int64_t c = 0; c < w.cols; ++c)
          std::memcpy(panel + (c * kPanelRows + i) * es, row + c * es, static_cast<size_t>(es));
      }
    }
  });
  m.view_ = w;
  m.view_.data = dst;
  m.view_.layout = Layout::Panels;
  return m;
}

}  // namespace ember::kernels
