#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/pack.h"
#include "kernels/quant.h"

namespace ember::kernels {
namespace {

std::vector<float> randn(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Random weights of `dtype` (rows x cols) with the float32 originals; `rows_view` points at the
// stored type row-major, `view` at its panel-packed copy (what matmul takes).
struct RandomWeights {
  RandomWeights(DType dtype, int64_t rows, int64_t cols, std::mt19937& rng) : f(randn(rows * cols, rng)) {
    rows_view = WeightMatrix{f.data(), dtype, rows, cols};
    if (dtype != DType::F32) {
      h.resize(f.size());
      for (size_t i = 0; i < f.size(); ++i) h[i] = dtype == DType::F16 ? f32_to_f16(f[i]) : f32_to_bf16(f[i]);
      rows_view.data = h.data();
    }
    packed = pack(rows_view, pool);
    view = packed.view();
  }
  std::vector<float> f;
  std::vector<uint16_t> h;
  WeightMatrix rows_view, view;
  ThreadPool pool{1};
  PackedMatrix packed;
};

// Every dtype, every instruction set this machine has, and awkward shapes (tails of the SIMD
// width, token counts around the register tiles) against the scalar reference.
TEST(Matmul, EveryIsaMatchesReferenceForAllDtypesAndShapes) {
  ThreadPool pool(2);
  std::mt19937 rng(7);
  for (Isa isa : supported_isas())
    for (DType t : {DType::F32, DType::F16, DType::BF16})
      for (int64_t rows : {1, 7, 33})
        for (int64_t cols : {1, 8, 19, 64, 130})
          for (int64_t n : {1, 3, 4, 9, 70}) {
            const RandomWeights rw(t, rows, cols, rng);
            const WeightMatrix& w = rw.view;
            std::vector<float> x = randn(n * cols, rng), y(n * rows), ref(n * rows);
            matmul(w, x.data(), n, y.data(), pool, isa);
            matmul_reference(rw.rows_view, x.data(), n, ref.data());
            for (size_t i = 0; i < y.size(); ++i)
              ASSERT_NEAR(y[i], ref[i], 1e-4 * (1 + std::sqrt(static_cast<float>(cols))))
                  << isa_name(isa) << " " << dtype_name(t) << " rows=" << rows << " cols=" << cols << " n=" << n;
          }
}

// Wide rows take the column-blocked path (sums carried from one column block to the next).
TEST(Matmul, WideRowsMatchReference) {
  ThreadPool pool(2);
  std::mt19937 rng(5);
  for (Isa isa : supported_isas())
    for (DType t : {DType::F32, DType::F16, DType::BF16})
      for (int64_t n : {1, 2, 5})
        for (int64_t rows : {9, 70}) {  // 70: panels a gap apart (pack.h), and a partial last one
          const int64_t cols = 2600;
          const RandomWeights rw(t, rows, cols, rng);
          const WeightMatrix& w = rw.view;
          std::vector<float> x = randn(n * cols, rng), y(n * rows), ref(n * rows);
          matmul(w, x.data(), n, y.data(), pool, isa);
          matmul_reference(w, x.data(), n, ref.data());
          for (size_t i = 0; i < y.size(); ++i)
            ASSERT_NEAR(y[i], ref[i], 1e-4 * (1 + std::sqrt(static_cast<float>(cols))))
                << isa_name(isa) << " " << dtype_name(t) << " rows=" << rows << " n=" << n;
        }
}

// A fused set (plain and quantized outputs of different heights) equals separate products.
// A token's outputs are the same bits alone (decode) as among many (a prompt, a batch of
// sequences): the column blocks and register tiles must not change the order of any sum. Rows wider
// than the column block, with a tail, for every dtype and instruction set.
// The last `count` tokens of a call of 71, in a call of their own, get the same bits.
// The last `count` tokens of n decoded or prefilled alone give the bits they get among all n. n = 71:
// a prompt's block of 64, then one of 7 (tiles of 4 and 3); n = 66: a last block of 2 tokens, which
// prefill computes two panels at a time, as it does 3 tokens alone (the other tiles take one panel).
void expect_batch_invariant(const WeightMatrix& w, Isa isa, ThreadPool& pool, std::mt19937& rng, const std::string& what) {
  for (const int64_t n : {71, 66}) {
    std::vector<float> x = randn(n * w.cols, rng), all(n * w.rows);
    matmul(w, x.data(), n, all.data(), pool, isa);
    for (int64_t count : {1, 2, 3, 5, 7, 16}) {
      const int64_t t0 = n - count;
      std::vector<float> some(count * w.rows);
      matmul(w, x.data() + t0 * w.cols, count, some.data(), pool, isa);
      for (int64_t i = 0; i < count * w.rows; ++i)
        ASSERT_EQ(some[i], all[t0 * w.rows + i]) << "isa " << static_cast<int>(isa) << " " << what << " cols " << w.cols
                                                 << " of " << n << " tokens, the last " << count << ", element " << i;
    }
  }
}

TEST(Matmul, TokenResultsDoNotDependOnHowManyShareTheCall) {
  ThreadPool pool(2);
  std::mt19937 rng(11);
  const int64_t rows = 13;
  for (Isa isa : supported_isas()) {
    // Plain weights: a partial panel alone, and full panels before one (each panel's outputs are
    // fetched ahead of its tiles in prefill); 70 rows: five panels, which a few tokens stream two at
    // a time (and one alone). 4100 columns: 7 tokens' activations fit in L2 (panel by panel), 16
    // and more do not (column block by column block).
    for (DType t : {DType::F32, DType::F16, DType::BF16})
      for (int64_t plain_rows : {rows, int64_t{40}, int64_t{70}})
        for (int64_t cols : {40, 2052, 4100}) {
          const RandomWeights rw(t, plain_rows, cols, rng);
          expect_batch_invariant(rw.view, isa, pool, rng, std::string(dtype_name(t)) + " rows " + std::to_string(plain_rows));
        }
    // Quantized: the server's batched steps of a --quantize model rely on this as well. 70 rows: five
    // groups, which decode reads two at a time (and one alone).
    for (QType q : {QType::Q8_0, QType::Q4_0})
      for (int64_t quant_rows : {rows, int64_t{70}})
        for (int64_t cols : {64, 2080}) {
          const std::vector<float> wf = randn(quant_rows * cols, rng);
          const QuantizedMatrix qm = quantize(WeightMatrix{wf.data(), DType::F32, quant_rows, cols}, q, pool);
          expect_batch_invariant(qm.view(), isa, pool, rng,
                                 std::string(q == QType::Q8_0 ? "q8_0" : "q4_0") + " rows " + std::to_string(quant_rows));
        }
  }
}

// The AVX-512 panel kernel gives the AVX2 kernel's bits (same fused multiply-add chains), so a
// model's goldens and batch invariance hold on either machine: every token count around its tiles
// and blocks, partial panels, columns past a column block with a tail, one and two threads (445
// rows: decode's tiles of 12 panels and a shorter last one). The first n tokens of a call of 70 get
// the same bits in a call of n.
TEST(Matmul, Avx512PanelKernelEqualsAvx2BitForBit) {
  if (!isa_supported(Isa::Avx512)) GTEST_SKIP() << "no AVX-512 here";
  std::mt19937 rng(17);
  const int64_t max_n = 70;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (DType t : {DType::F32, DType::F16, DType::BF16})
      for (int64_t rows : {5, 16, 47, 80, 445})
        for (int64_t cols : {1, 19, 300, 530}) {
          const RandomWeights rw(t, rows, cols, rng);
          const std::vector<float> x = randn(max_n * cols, rng);
          std::vector<float> all(max_n * rows);
          matmul(rw.view, x.data(), max_n, all.data(), pool, Isa::Avx512);
          for (int64_t n = 1; n <= max_n; ++n) {
            std::vector<float> y512(n * rows), y2(n * rows);
            matmul(rw.view, x.data(), n, y512.data(), pool, Isa::Avx512);
            matmul(rw.view, x.data(), n, y2.data(), pool, Isa::Avx2);
            for (int64_t i = 0; i < n * rows; ++i) {
              ASSERT_EQ(y512[i], y2[i]) << dtype_name(t) << " rows=" << rows << " cols=" << cols << " n=" << n
                                        << " threads=" << threads << " element " << i;
              ASSERT_EQ(y512[i], all[i]) << dtype_name(t) << " rows=" << rows << " cols=" << cols << " n=" << n
                                         << " threads=" << threads << " element " << i << " (batch of " << max_n << ")";
            }
          }
        }
  }
}

// BF16 weights with BF16-rounded activations (llama.cpp's precision; the BF16 dot product on
// AVX512-BF16 CPUs): on every instruction set, bit for bit the product of the rounded activations
// without the flag (float32 sums of exact products in column order), whatever the token count (the
// BF16 dot kernel's tiles, blocks and tails; decode's own kernel), thread count or shape (odd columns
// take the float32 kernels); the flag does change results, and is refused on other weights.
TEST(Matmul, Bf16ActivationsAreRoundedActivationsOnEveryIsa) {
  std::mt19937 rng(23);
  const int64_t max_n = 70;
  bool changed = false;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (int64_t rows : {5, 47, 80})
      for (int64_t cols : {2, 19, 300, 530}) {
        RandomWeights rw(DType::BF16, rows, cols, rng);
        WeightMatrix flagged = rw.view;
        flagged.bf16_activations = true;
        const std::vector<float> x = randn(max_n * cols, rng);
        std::vector<float> xr(x.size()), all(max_n * rows), ref(max_n * rows);
        for (size_t i = 0; i < x.size(); ++i) xr[i] = bf16_to_f32(f32_to_bf16(x[i]));
        matmul_reference(flagged, x.data(), max_n, ref.data());
        for (Isa isa : supported_isas()) {
          matmul(flagged, x.data(), max_n, all.data(), pool, isa);
          for (int64_t n : {1, 2, 3, 8, 9, 10, 27, 64, 65, 70}) {
            std::vector<float> y(n * rows), plain(n * rows), unrounded(n * rows);
            matmul(flagged, x.data(), n, y.data(), pool, isa);
            matmul(rw.view, xr.data(), n, plain.data(), pool, isa);
            matmul(rw.view, x.data(), n, unrounded.data(), pool, isa);
            const std::string at = std::string(isa_name(isa)) + " rows=" + std::to_string(rows) + " cols=" +
                                   std::to_string(cols) + " n=" + std::to_string(n) + " threads=" + std::to_string(threads);
            for (int64_t i = 0; i < n * rows; ++i) {
              ASSERT_EQ(y[i], plain[i]) << at << " element " << i;
              ASSERT_EQ(y[i], all[i]) << at << " element " << i << " (batch of " << max_n << ")";
              ASSERT_NEAR(y[i], ref[i], 1e-4 * (1 + std::sqrt(static_cast<float>(cols)))) << at << " element " << i;
              changed = changed || y[i] != unrounded[i];
            }
          }
        }
      }
  }
  EXPECT_TRUE(changed) << "rounding the activations changed no result";
  ThreadPool pool(1);
  RandomWeights f16(DType::F16, 16, 32, rng);
  WeightMatrix wrong = f16.view;
  wrong.bf16_activations = true;
  std::vector<float> x(32, 1.0f), y(16);
  EXPECT_THROW(matmul(wrong, x.data(), 1, y.data(), pool), Error);
}

TEST(Matmul, FusedEqualsSeparateProducts) {
  ThreadPool pool(2);
  std::mt19937 rng(9);
  const int64_t cols = 96;
  // Plain weights of two dtypes and both Q8_0-style types, each with activations laid out of its own
  // (AVX-512), for a token count within one register tile and one beyond it.
  for (int64_t n : {3, 14}) {
    std::vector<float> x = randn(n * cols, rng);
    for (Isa isa : supported_isas()) {
      const RandomWeights a(DType::F32, 40, cols, rng), b(DType::BF16, 8, cols, rng);
      std::vector<float> w2 = randn(19 * cols, rng), w3 = randn(13 * cols, rng);
      QuantizedMatrix c = quantize(WeightMatrix{w2.data(), DType::F32, 19, cols}, QType::Q4_0, pool);
      QuantizedMatrix d = quantize(WeightMatrix{w3.data(), DType::F32, 13, cols}, QType::Q8_0, pool);
      const WeightMatrix* ws[] = {&a.view, &b.view, &c.view(), &d.view()};
      std::vector<std::vector<float>> fused(4), alone(4);
      std::vector<MatmulOut> outs;
      for (int i = 0; i < 4; ++i) {
        fused[i].resize(n * ws[i]->rows);
        alone[i].resize(n * ws[i]->rows);
        outs.push_back({ws[i], fused[i].data()});
        matmul(*ws[i], x.data(), n, alone[i].data(), pool, isa);
      }
      matmul_fused(outs, x.data(), n, pool, isa);
      for (int i = 0; i < 4; ++i) EXPECT_EQ(fused[i], alone[i]) << isa_name(isa) << " output " << i << ", " << n << " tokens";
    }
  }
  std::vector<float> x = randn(3 * cols, rng);
  std::vector<float> y(64);
  const RandomWeights narrow(DType::F32, 5, 64, rng), wide(DType::F32, 40, cols, rng);
  const MatmulOut mixed[] = {{&wide.view, y.data()}, {&narrow.view, y.data()}};
  EXPECT_THROW(matmul_fused(mixed, x.data(), 1, pool), Error);
}

// Packing keeps every weight (any row count, padding rows are not rows; BF16's interleaved halves;
// the gap after panels of 32 KiB or more), and matmul refuses plain weights that were not packed
// rather than reading them in the wrong layout.
TEST(Pack, KeepsEveryWeightAndMatmulNeedsIt) {
  ThreadPool pool(2);
  std::mt19937 rng(13);
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int64_t rows : {1, 16, 17, 50})
      for (int64_t cols : {37, 130, 1100}) {  // pack copies blocks of 64 columns; 1100: panels with a gap
        const RandomWeights rw(t, rows, cols, rng);
        EXPECT_EQ(rw.view.layout, Layout::Panels);
        EXPECT_EQ(rw.packed.bytes(), packed_bytes(t, rows, cols));
        EXPECT_EQ(weight_bytes(rw.view), packed_bytes(t, rows, cols));
        const int64_t panels = (rows + kPanelRows - 1) / kPanelRows, dense = panels * kPanelRows * cols * static_cast<int64_t>(dtype_size(t));
        EXPECT_EQ(packed_bytes(t, rows, cols), dense + (cols == 1100 ? panels * kPanelGapBytes : 0)) << dtype_name(t);
        std::vector<float> a(cols), b(cols);
        for (int64_t r = 0; r < rows; ++r) {
          copy_row(rw.rows_view, r, a.data());
          copy_row(rw.view, r, b.data());
          ASSERT_EQ(a, b) << dtype_name(t) << " row " << r;
          for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(weight_at(rw.view, r, c), a[c]);
        }
        std::vector<float> x = randn(cols, rng), y(rows);
        try {
          matmul(rw.rows_view, x.data(), 1, y.data(), pool);
          ADD_FAILURE() << "unpacked plain weights were accepted";
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("pack"), std::string::npos) << e.what();
        }
        EXPECT_THROW(pack(rw.view, pool), Error);  // already packed
      }
}

// Quantized weights: every instruction set computes the same integer dot products as the scalar
// reference (only float rounding of the per-block scaling may differ).
TEST(Matmul, QuantizedEveryIsaMatchesReference) {
  ThreadPool pool(2);
  std::mt19937 rng(11);
  for (QType q : {QType::Q8_0, QType::Q4_0})
    for (Isa isa : supported_isas())
      for (int64_t rows : {1, 16, 37, 70})
        for (int64_t cols : {32, 96, 256})
          for (int64_t n : {1, 5, 8, 19, 70}) {
            std::vector<float> wf = randn(rows * cols, rng), x = randn(n * cols, rng), y(n * rows), ref(n * rows);
            QuantizedMatrix qm = quantize(WeightMatrix{wf.data(), DType::F32, rows, cols}, q, pool);
            matmul(qm.view(), x.data(), n, y.data(), pool, isa);
            matmul_reference(qm.view(), x.data(), n, ref.data());
            for (size_t i = 0; i < y.size(); ++i)
              ASSERT_NEAR(y[i], ref[i], 1e-5 * (1 + std::fabs(ref[i])) * cols / 32)
                  << qtype_name(q) << " " << isa_name(isa) << " rows=" << rows << " cols=" << cols << " n=" << n;
          }
}

// Quantization error stays within what the formats allow: q8_0 at most half a step (amax/254 of its
// block); q4_0 half a step (amax/16) except that the side opposite the largest value ends at 7 steps,
// so up to amax/8; plus the float16 rounding of the scale (amax * 2^-10 covers it).
TEST(Quantize, RoundTripErrorWithinHalfAStep) {
  ThreadPool pool(1);
  std::mt19937 rng(3);
  const int64_t rows = 21, cols = 128;
  std::vector<float> wf = randn(rows * cols, rng);
  for (QType q : {QType::Q8_0, QType::Q4_0}) {
    QuantizedMatrix qm = quantize(WeightMatrix{wf.data(), DType::F32, rows, cols}, q, pool);
    EXPECT_EQ(qm.bytes(), quantized_bytes(q, rows, cols));
    std::vector<float> row(cols);
    for (int64_t r = 0; r < rows; ++r) {
      copy_row(qm.view(), r, row.data());
      for (int64_t b = 0; b < cols / kQBlock; ++b) {
        float amax = 0;
        for (int64_t k = 0; k < kQBlock; ++k) amax = std::max(amax, std::fabs(wf[r * cols + b * kQBlock + k]));
        const float bound = q == QType::Q8_0 ? amax / 254 : amax / 8;
        for (int64_t k = 0; k < kQBlock; ++k) {
          const int64_t c = b * kQBlock + k;
          ASSERT_LE(std::fabs(row[c] - wf[r * cols + c]), bound + amax / 1024 + 1e-6f) << qtype_name(q) << " r=" << r << " c=" << c;
        }
      }
    }
  }
}

// Activations as ggml's Q8_0, written plainly: quants of 127 / amax rounded to even, the scale kept
// as float16. Random values, a zero block and halves.
TEST(Quantize, ActivationsAreGgmlQ8_0Exactly) {
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> d(-3, 3);
  const int64_t n = 9, cols = 5 * kQBlock;
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (auto& v : x) v = d(rng);
  std::fill_n(x.begin() + cols + kQBlock, kQBlock, 0.0f);  // token 1, block 1
  for (int64_t c = 0; c < kQBlock; ++c) x[2 * cols + c] = c == 0 ? 127.0f : 0.5f + static_cast<float>(c);
  ThreadPool pool(2);
  QuantizedActs a;
  quantize_acts(x.data(), n, cols, a, pool);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t b = 0; b < cols / kQBlock; ++b) {
      const float* v = x.data() + t * cols + b * kQBlock;
      float amax = 0.0f;
      for (int64_t k = 0; k < kQBlock; ++k) amax = std::max(amax, std::fabs(v[k]));
      const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
      ASSERT_EQ(a.d[t * a.n_blocks + b], f16_to_f32(f32_to_f16(amax / 127.0f)));
      int32_t sum = 0;
      for (int64_t k = 0; k < kQBlock; ++k) {
        const auto want = static_cast<int8_t>(std::nearbyint(v[k] * id));
        ASSERT_EQ(a.q[t * cols + b * kQBlock + k], want) << t << " " << b << " " << k;
        sum += want;
      }
      ASSERT_EQ(a.s[t * a.n_blocks + b], sum);
    }
}

TEST(Quantize, RejectsPartialBlocksAndUnknownNames) {
  ThreadPool pool(1);
  std::vector<float> wf(2 * 40, 1.0f);
  EXPECT_ANY_THROW(quantize(WeightMatrix{wf.data(), DType::F32, 2, 40}, QType::Q8_0, pool));
  EXPECT_ANY_THROW(parse_qtype("q5_k"));
  EXPECT_EQ(parse_qtype("q4_k"), QType::Q4_K);
  EXPECT_EQ(parse_qtype("q4_0"), QType::Q4_0);
}

}  // namespace
}  // namespace ember::kernels
