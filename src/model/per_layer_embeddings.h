#pragma once
// Gemma 4's per-layer embeddings (PLE): a second embedding table holding a slice of `width` values
// for every layer, mixed with a projection of the token's embedding; each layer then gates its
// slice into the residual stream through a projection of its own.
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/thread_pool.h"

namespace ember::model {

struct PerLayerEmbeddings {
  kernels::WeightMatrix table;       // [vocab_size_per_layer_input][layers * width]
  kernels::WeightMatrix projection;  // [layers * width][hidden]
  std::vector<float> norm;           // [width]
  int64_t layers = 0, width = 0;

  bool empty() const { return width == 0; }
  // out ([n][layers * width]; token t's slice of layer l at out + (t * layers + l) * width), from the
  // tokens' ids and their scaled embeddings x ([n][hidden]):
  //   (norm(x projection^T / sqrt(hidden)) + table[id] * sqrt(width)) / sqrt(2)
  // An id past the table reads its row 0, as transformers masks it.
  void inputs(std::span<const int32_t> ids, const float* x, int64_t hidden, float eps, float* out,
              kernels::ThreadPool& pool) const;
};

// One layer's use of its slice: x += norm((gelu(x gate^T) * slice) projection^T, norm).
struct PerLayerGate {
  kernels::WeightMatrix gate;        // [width][hidden]
  kernels::WeightMatrix projection;  // [hidden][width]
  std::vector<float> norm;           // [hidden]

  // x: [n][hidden]; token t's slice at slices + t * stride. g ([n][width]) and y ([n][hidden]) are
  // scratch space.
  void apply(float* x, int64_t n, const float* slices, int64_t stride, float eps, float* g, float* y,
             kernels::ThreadPool& pool) const;
};

}  // namespace ember::model
