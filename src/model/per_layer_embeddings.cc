#include "model/per_layer_embeddings.h"

#include <cmath>

#include "kernels/ops.h"

namespace ember::model {

void PerLayerEmbeddings::inputs(std::span<const int32_t> ids, const float* x, int64_t hidden, float eps, float* out,
                                kernels::ThreadPool& pool) const {
  const int64_t n = static_cast<int64_t>(ids.size()), row = layers * width;
  kernels::matmul(projection, x, n, out, pool);
  kernels::scale_inplace(out, static_cast<float>(1.0 / std::sqrt(static_cast<double>(hidden))), n * row);
  kernels::rms_norm(out, norm.data(), n * layers, width, eps, out);
  std::vector<float> embedded(static_cast<size_t>(row));
  const auto table_scale = static_cast<float>(std::sqrt(static_cast<double>(width)));
  const auto mix = static_cast<float>(1.0 / std::sqrt(2.0));
  for (int64_t t = 0; t < n; ++t) {
    const int32_t id = ids[static_cast<size_t>(t)];
    kernels::copy_row(table, id < table.rows ? id : 0, embedded.data());
    float* o = out + t * row;
    for (int64_t i = 0; i < row; ++i) o[i] = (o[i] + embedded[static_cast<size_t>(i)] * table_scale) * mix;
  }
}

void PerLayerGate::apply(float* x, int64_t n, const float* slices, int64_t stride, float eps, float* g, float* y,
                         kernels::ThreadPool& pool) const {
  const int64_t width = gate.rows, hidden = projection.rows;
  kernels::matmul(gate, x, n, g, pool);
  for (int64_t t = 0; t < n; ++t) kernels::gelu_tanh_mul(g + t * width, slices + t * stride, width);
  kernels::matmul(projection, g, n, y, pool);
  kernels::rms_norm(y, norm.data(), n, hidden, eps, y);
  kernels::add_inplace(x, y, n * hidden);
}

}  // namespace ember::model
