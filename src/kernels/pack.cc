#include "kernels/pack.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "base/error.h"
#include "kernels/load_scalar.h"

namespace ember::kernels {

int64_t packed_bytes(DType dtype, int64_t rows, int64_t cols) {
  const int64_t panels = (rows + kPanelRows - 1) / kPanelRows;
  return panels * panel_stride(dtype, cols) * static_cast<int64_t>(dtype_size(dtype));
}

int64_t PackedMatrix::bytes() const { return data_.data() ? packed_bytes(view_.dtype, view_.rows, view_.cols) : 0; }

PackedMatrix pack(const WeightMatrix& w, ThreadPool& pool) { return pack(w, w.dtype, pool); }

PackedMatrix pack(const WeightMatrix& w, DType to, ThreadPool& pool, WeightArena* arena) {
  if (w.qtype != QType::None || w.layout != Layout::Rows) fail("pack", "needs a plain row-major matrix");
  const int64_t es = static_cast<int64_t>(dtype_size(w.dtype)), panels = (w.rows + kPanelRows - 1) / kPanelRows;
  const int64_t ts = static_cast<int64_t>(dtype_size(to)), stride = panel_stride(to, w.cols);
  PackedMatrix m;
  const int64_t bytes = packed_bytes(to, w.rows, w.cols);
  m.data_ = arena != nullptr ? arena->take(bytes) : WeightBuffer(bytes);
  uint8_t* dst = m.data_.data();
  const auto* src = static_cast<const uint8_t*>(w.data);
  // One weight converted to `to`, rounding to nearest even (as torch's .to() does).
  auto put = [&](uint8_t* out, int64_t r, int64_t c) {
    const float v = simd::load1(src, w.dtype, r * w.cols + c);
    if (to == DType::F32) {
      std::memcpy(out, &v, sizeof v);
      return;
    }
    const uint16_t h = to == DType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
    std::memcpy(out, &h, sizeof h);
  };
  // Panel p's rows transposed a block of columns at a time, so that the block's stores stay in L1
  // (a whole panel is up to a few hundred KiB); the same type is copied as typed elements.
  // The source is read through memcpy: a safetensors file need not place its data at an aligned
  // offset (its header length is the writer's), so a typed load there would be misaligned.
  auto copy_panel = [&]<class T>(int64_t p) {
    T* panel = reinterpret_cast<T*>(dst + p * stride * ts);
    const auto* in = static_cast<const uint8_t*>(src) + p * kPanelRows * w.cols * static_cast<int64_t>(sizeof(T));
    const int64_t valid = std::min(kPanelRows, w.rows - p * kPanelRows);
    constexpr int64_t kBlock = 64;
    for (int64_t c0 = 0; c0 < w.cols; c0 += kBlock) {
      const int64_t c1 = std::min(w.cols, c0 + kBlock);
      for (int64_t i = 0; i < kPanelRows; ++i)
        for (int64_t c = c0; c < c1; ++c) {
          T v{};
          if (i < valid) std::memcpy(&v, in + (i * w.cols + c) * static_cast<int64_t>(sizeof(T)), sizeof(T));
          panel[c * kPanelRows + panel_slot(to, i)] = v;
        }
    }
  };
  pool.parallel_for(panels, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      if (to == w.dtype) {
        if (es == 4) copy_panel.template operator()<uint32_t>(p);
        else copy_panel.template operator()<uint16_t>(p);
        continue;
      }
      uint8_t* panel = dst + p * stride * ts;
      for (int64_t i = 0; i < kPanelRows; ++i) {
        const int64_t r = p * kPanelRows + i;
        const int64_t slot = panel_slot(to, i);
        if (r >= w.rows) {  // padding rows: zeros (0 is all-zero bits in every float type)
          for (int64_t c = 0; c < w.cols; ++c) std::memset(panel + (c * kPanelRows + slot) * ts, 0, static_cast<size_t>(ts));
          continue;
        }
        for (int64_t c = 0; c < w.cols; ++c) put(panel + (c * kPanelRows + slot) * ts, r, c);
      }
    }
  });
  m.view_ = w;
  m.view_.data = dst;
  m.view_.dtype = to;
  m.view_.layout = Layout::Panels;
  return m;
}

}  // namespace ember::kernels
