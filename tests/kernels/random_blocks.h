#pragma once
// Test helpers shared by the block-quant tests (kquant_test.cc, stored_quant_test.cc): a random matrix
// of ggml blocks with its repacked copy and dequantized floats, and activations with outliers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/gguf_quants.h"
#include "kernels/quant.h"

namespace ember::kernels::test {

// ggml blocks of `type` (rows x cols), each drawn by block(i, bytes), repacked by from_ggml_blocks
// and dequantized by dequantize_row.
struct RandomGgmlMatrix {
  template <class Block>
  RandomGgmlMatrix(GgmlType type, int64_t rows, int64_t cols, ThreadPool& pool, Block&& block)
      : ggml(static_cast<size_t>(ggml_row_bytes(type, cols) * rows)), f(static_cast<size_t>(rows * cols)) {
    const GgmlTypeInfo info = ggml_type_info(type);
    for (int64_t i = 0; i < rows * cols / info.block_size; ++i) block(i, ggml.data() + i * info.block_bytes);
    for (int64_t r = 0; r < rows; ++r)
      dequantize_row(type, ggml.data() + r * ggml_row_bytes(type, cols), cols, f.data() + r * cols);
    m = from_ggml_blocks(type, ggml.data(), rows, cols, pool);
  }
  std::vector<uint8_t> ggml;
  std::vector<float> f;
  QuantizedMatrix m;
};

// Every weight of k's repacked copy dequantizes (copy_row) to exactly the bits of ggml's reference.
inline void expect_lossless(const RandomGgmlMatrix& k, const std::string& what) {
  const WeightMatrix& w = k.m.view();
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    copy_row(w, r, row.data());
    for (int64_t c = 0; c < w.cols; ++c)
      ASSERT_EQ(std::memcmp(&row[c], &k.f[r * w.cols + c], 4), 0)
          << what << " r=" << r << " c=" << c << ": " << row[c] << " vs " << k.f[r * w.cols + c];
  }
}

// Gaussian activations with an outlier per token and, in every third token from the second, an
// all-zero run of `zero_run` values from column zero_run (where the row is long enough).
inline std::vector<float> random_acts(int64_t n, int64_t cols, int64_t zero_run, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (auto& v : x) v = dist(rng);
  for (int64_t t = 0; t < n; ++t) {
    x[t * cols + (t * 37) % cols] = 60.0f * (t % 2 ? 1.0f : -1.0f);
    if (cols >= 2 * zero_run && t % 3 == 1) std::fill_n(x.begin() + t * cols + zero_run, zero_run, 0.0f);
  }
  return x;
}

}  // namespace ember::kernels::test
