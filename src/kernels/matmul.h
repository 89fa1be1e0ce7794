#pragma once
// Matrix products of activations (float32) with weights in their stored dtype.
#include <cstdint>

#include "base/dtype.h"
#include "kernels/thread_pool.h"

namespace ember::kernels {

// A row-major weight matrix [rows][cols] in its stored dtype; rows are output features.
struct WeightMatrix {
  const void* data = nullptr;
  DType dtype = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
};

// y[t][r] = sum_c w[r][c] * x[t][c] for t < n_tokens (x: [n_tokens][cols], y: [n_tokens][rows]).
// Rows are split across the pool's threads; each thread reads its slice of the weights once.
void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

// Scalar reference of matmul (one thread, sequential sums): the oracle for every SIMD path.
void matmul_reference(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y);

// out[i] = row `row` of w converted to float32 (embedding lookup).
void copy_row(const WeightMatrix& w, int64_t row, float* out);

}  // namespace ember::kernels
