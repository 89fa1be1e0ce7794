#include "kernels/kquant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/gguf_quants.h"
#include "kernels/quant.h"
#include "random_blocks.h"

namespace ember::kernels {
namespace {

constexpr GgmlType kKTypes[] = {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                                GgmlType::Q6_K, GgmlType::IQ4_XS, GgmlType::IQ3_S};

// How a random super-block is drawn: ordinary values, every field at its extreme (largest quants,
// scales and mins, the largest float16 scale), or d = dmin = 0.
enum class BlockKind { Random, Extreme, Zero };

// One ggml super-block of `type` (layouts in gguf_quants.cc) with random quants and scales.
void random_ggml_block(GgmlType type, BlockKind kind, std::mt19937& rng, uint8_t* b) {
  const int64_t bytes = ggml_type_info(type).block_bytes;
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t i = 0; i < bytes; ++i) b[i] = static_cast<uint8_t>(kind == BlockKind::Extreme ? 0xFF : byte(rng));
  std::uniform_real_distribution<float> scale(1e-4f, 0.05f);
  auto put_f16 = [&](int64_t at, float v) {
    const uint16_t h = f32_to_f16(v);
    std::memcpy(b + at, &h, 2);
  };
  const float d = kind == BlockKind::Zero ? 0.0f : kind == BlockKind::Extreme ? 65504.0f : scale(rng);
  const float dmin = kind == BlockKind::Zero ? 0.0f : kind == BlockKind::Extreme ? 65504.0f : scale(rng);
  if (type == GgmlType::Q6_K) {
    if (kind == BlockKind::Extreme)  // scales at both ends of int8
      for (int j = 0; j < 16; ++j) b[192 + j] = static_cast<uint8_t>(j % 2 ? 0x80 : 0x7F);
    put_f16(208, d);
  } else if (type == GgmlType::Q2_K) {
    put_f16(80, d);
    put_f16(82, dmin);
  } else if (type == GgmlType::Q3_K) {
    if (kind == BlockKind::Extreme)  // every high bit clear: quants down to -4; 6-bit scales 0 - 32 = -32
      std::memset(b, 0, 32), std::memset(b + 96, 0, 12);
    put_f16(108, d);
  } else if (type == GgmlType::IQ3_S) {  // Extreme: grid index 511, every sign negative, scales 31
    put_f16(0, d);
  } else if (type == GgmlType::IQ4_XS) {
    if (kind == BlockKind::Extreme)  // scales 0 - 32 = -32 with the table's -127 (index 0) everywhere
      std::memset(b + 2, 0, 134);
    put_f16(0, d);
  } else {
    put_f16(0, d);
    put_f16(2, dmin);
  }
}

// A random K-quant matrix: ggml blocks, Ember's repacked copy and the dequantized floats; one block
// in ten at its extremes, one in ten zero.
struct RandomKMatrix : test::RandomGgmlMatrix {
  RandomKMatrix(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng, ThreadPool& pool)
      : RandomGgmlMatrix(type, rows, cols, pool, [&](int64_t, uint8_t* b) {
          const int k = std::uniform_int_distribution<int>(0, 9)(rng);
          random_ggml_block(type, k == 0 ? BlockKind::Extreme : k == 1 ? BlockKind::Zero : BlockKind::Random, rng, b);
        }) {}
};

// Activations with an outlier per token and one all-zero super-block.
std::vector<float> random_acts(int64_t n, int64_t cols, std::mt19937& rng) { return test::random_acts(n, cols, kQK_K, rng); }

// Every weight dequantizes from Ember's layout to exactly the bits ggml's reference gives.
TEST(KQuant, RepackIsLossless) {
  ThreadPool pool(2);
  std::mt19937 rng(11);
  for (GgmlType type : kKTypes) {
    const int64_t rows = 19, cols = 3 * kQK_K;
    const RandomKMatrix k(type, rows, cols, rng, pool);
    const WeightMatrix& w = k.m.view();
    EXPECT_EQ(w.qtype, kquant_of(type));
    EXPECT_EQ(k.m.bytes(), quantized_bytes(w.qtype, rows, cols));
    EXPECT_EQ(weight_bytes(w), kquant_bytes(w.qtype, rows, cols));
    // At the file's bits per weight (IQ3_S: and its 4-bit scales as bytes, 4 more per 256 weights), rows
    // padded to groups of 16: what keeps a GGUF resident at its size.
    const int64_t padded = (rows + 15) / 16 * 16, extra = type == GgmlType::IQ3_S ? 4 : 0;
    EXPECT_EQ(k.m.bytes(), (ggml_row_bytes(type, cols) + cols / kQK_K * extra) * padded) << ggml_type_name(type);
    test::expect_lossless(k, ggml_type_name(type));
  }
}

// The scalar reference equals the dequantized weights times the quantized activations (up to float
// rounding), and the float product within the activations' quantization error.
TEST(KQuant, ReferenceMatchesDequantizedProduct) {
  ThreadPool pool(1);
  std::mt19937 rng(12);
  for (GgmlType type : kKTypes) {
    const int64_t rows = 9, cols = 2 * kQK_K, n = 5;
    const RandomKMatrix k(type, rows, cols, rng, pool);
    const std::vector<float> x = random_acts(n, cols, rng);
    std::vector<float> y(static_cast<size_t>(n * rows));
    matmul_reference(k.m.view(), x.data(), n, y.data());
    KQuantActs a;
    quantize_acts_k(x.data(), n, cols, a, pool);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t r = 0; r < rows; ++r) {
        double exact_q = 0, exact_x = 0, mag = 0, qerr = 0;
        for (int64_t c = 0; c < cols; ++c) {
          const double w = k.f[r * cols + c], dx = a.d[t * a.n_blocks + c / kQK_K];  // signed, as ggml's Q8_K
          const double xq = dx * a.q[t * cols + c];
          exact_q += w * xq;
          exact_x += w * x[t * cols + c];
          mag += std::fabs(w * xq);
          qerr += std::fabs(w * dx) * 0.5;  // round to nearest: at most half a step per activation
          EXPECT_LE(std::fabs(x[t * cols + c] - xq), std::fabs(dx) * 0.5 * (1 + 1e-5)) << "activation " << c;
        }
        const double yv = y[t * rows + r];
        ASSERT_NEAR(yv, exact_q, 2e-5 * mag + 1e-6) << ggml_type_name(type) << " r=" << r << " t=" << t;
        ASSERT_NEAR(yv, exact_x, qerr + 2e-5 * mag + 1e-6) << ggml_type_name(type) << " r=" << r << " t=" << t;
      }
  }
}

// Every instruction set against the scalar reference: row counts off the 16-row work unit, token
// counts off the register tiles and across the 64-token block, one and several threads.
// Activations as ggml's Q8_K, written plainly: the first value of largest magnitude maps to -127.
// Random values, a zero super-block, +-amax ties (the first wins) and halves (to even).
TEST(KQuant, ActivationsAreGgmlQ8KExactly) {
  std::mt19937 rng(5);
  const int64_t n = 7, cols = 3 * kQK_K;
  std::vector<float> x = random_acts(n, cols, rng);
  std::fill_n(x.begin() + cols, kQK_K, 0.0f);                    // token 1, block 0
  x[2 * cols + 5] = -100.0f, x[2 * cols + 9] = 100.0f;     // token 2, block 0: -100 first
  x[3 * cols + 17] = 100.0f, x[3 * cols + 40] = -100.0f;   // token 3, block 0: +100 first
  for (int64_t c = 0; c < kQK_K; ++c) x[4 * cols + c] = c == 0 ? -127.0f : 0.5f + static_cast<float>(c % 7);
  ThreadPool pool(2);
  KQuantActs a;
  quantize_acts_k(x.data(), n, cols, a, pool);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t b = 0; b < cols / kQK_K; ++b) {
      const float* v = x.data() + t * cols + b * kQK_K;
      float amax = 0.0f, mx = 0.0f;
      for (int64_t k = 0; k < kQK_K; ++k)
        if (std::fabs(v[k]) > amax) amax = std::fabs(v[k]), mx = v[k];
      const float iscale = amax != 0.0f ? -127.0f / mx : 0.0f;
      ASSERT_EQ(a.d[t * a.n_blocks + b], amax != 0.0f ? 1.0f / iscale : 0.0f) << t << " " << b;
      for (int64_t j = 0; j < 16; ++j) {
        int sum = 0;
        for (int64_t k = 16 * j; k < 16 * j + 16; ++k) {
          const auto want = static_cast<int8_t>(std::min(127.0f, std::nearbyint(iscale * v[k])));
          ASSERT_EQ(a.q[t * cols + b * kQK_K + k], want) << t << " " << b << " " << k;
          sum += want;
        }
        ASSERT_EQ(a.sum16[(t * a.n_blocks + b) * 16 + j], sum);
      }
      for (int64_t j = 0; j < 8; ++j)
        ASSERT_EQ(a.sum32[(t * a.n_blocks + b) * 8 + j],
                  a.sum16[(t * a.n_blocks + b) * 16 + 2 * j] + a.sum16[(t * a.n_blocks + b) * 16 + 2 * j + 1]);
    }
}

// A token's outputs have the same bits alone (decode: both 8-row halves of a group in one pass) as
// among others (two-token tiles, a half per pass, and prompts): the server's batched steps of a GGUF
// model rely on it. Groups with one half partly or wholly past the last row, every instruction set.
TEST(KQuant, TokenResultsDoNotDependOnHowManyShareTheCall) {
  ThreadPool pool(2);
  std::mt19937 rng(29);
  const int64_t n = 9, cols = 2 * kQK_K;
  for (GgmlType type : kKTypes)
    for (int64_t rows : {5, 12, 33}) {
      const RandomKMatrix k(type, rows, cols, rng, pool);
      const std::vector<float> x = random_acts(n, cols, rng);
      for (Isa isa : supported_isas()) {
        std::vector<float> all(static_cast<size_t>(n * rows));
        matmul(k.m.view(), x.data(), n, all.data(), pool, isa);
        for (int64_t count : {1, 2, 3}) {
          const int64_t t0 = n - count;
          std::vector<float> some(static_cast<size_t>(count * rows));
          matmul(k.m.view(), x.data() + t0 * cols, count, some.data(), pool, isa);
          for (int64_t i = 0; i < count * rows; ++i)
            ASSERT_EQ(some[static_cast<size_t>(i)], all[static_cast<size_t>(t0 * rows + i)])
                << ggml_type_name(type) << " " << isa_name(isa) << " rows=" << rows << " tokens=" << count << " element " << i;
        }
      }
    }
}

// Every kernel adds in kquant_row_dot's order (exact integer sums, two fused multiply-adds per
// super-block): the bits equal the scalar reference's (70 rows: a thread's range of several groups).
// On AVX-512 machines decode runs the AVX-512 kernel for two tokens, and for one token of the
// one-plane types (Q4_K, IQ4_XS, Q2_K); the AVX2 kernel for one token of the others. The AVX-512
// kernel's 1- and 2-token tiles are also a prompt's last (9 and 10 tokens: a tile of 8, then 1 or 2).
TEST(KQuant, EveryIsaMatchesReference) {
  ThreadPool pool(2);
  std::mt19937 rng(13);
  for (GgmlType type : kKTypes)
    for (int64_t rows : {1, 5, 17, 33, 70})
      for (int64_t cols : {kQK_K, 3 * kQK_K})
        for (int64_t n : {1, 2, 3, 5, 9, 10, 70}) {
          const RandomKMatrix k(type, rows, cols, rng, pool);
          const WeightMatrix& w = k.m.view();
          const std::vector<float> x = random_acts(n, cols, rng);
          std::vector<float> ref(static_cast<size_t>(n * rows));
          matmul_reference(w, x.data(), n, ref.data());
          for (Isa isa : supported_isas()) {
            std::vector<float> y(static_cast<size_t>(n * rows), -1.0f);
            matmul(w, x.data(), n, y.data(), pool, isa);
            for (int64_t t = 0; t < n; ++t)
              for (int64_t r = 0; r < rows; ++r) {
                const size_t i = static_cast<size_t>(t * rows + r);
                ASSERT_EQ(y[i], ref[i]) << ggml_type_name(type) << " " << isa_name(isa) << " rows=" << rows
                                        << " cols=" << cols << " n=" << n << " r=" << r << " t=" << t;
              }
          }
        }
}

// The largest integer sums a kernel can meet (every quant at its maximum, every activation at
// +-127: AVX2 adds a Q4_K sub-block's products in 16 bits) equal the reference's.
TEST(KQuant, LargestSumsDoNotOverflow) {
  ThreadPool pool(2);
  const int64_t rows = 16, cols = 2 * kQK_K;
  for (GgmlType type : kKTypes) {
    std::vector<uint8_t> ggml(static_cast<size_t>(ggml_row_bytes(type, cols) * rows));
    std::mt19937 rng(5);
    for (size_t at = 0; at < ggml.size(); at += static_cast<size_t>(ggml_type_info(type).block_bytes))
      random_ggml_block(type, BlockKind::Extreme, rng, ggml.data() + at);
    const QuantizedMatrix m = from_ggml_blocks(type, ggml.data(), rows, cols, pool);
    for (float sign : {1.0f, -1.0f})
      for (int64_t n : {1, 2, 9}) {
        const std::vector<float> x(static_cast<size_t>(n * cols), sign);
        std::vector<float> ref(static_cast<size_t>(n * rows));
        matmul_reference(m.view(), x.data(), n, ref.data());
        for (Isa isa : supported_isas()) {
          std::vector<float> y(ref.size(), 0.0f);
          matmul(m.view(), x.data(), n, y.data(), pool, isa);
          for (size_t i = 0; i < y.size(); ++i)
            ASSERT_EQ(y[i], ref[i]) << ggml_type_name(type) << " " << isa_name(isa) << " n=" << n << " sign=" << sign
                                    << " i=" << i;
        }
      }
  }
}

// A fused set mixing K-quants with Q8_0 (as a Q4_K_M file's attention) equals the separate products.
TEST(KQuant, FusedWithOtherQuantTypes) {
  ThreadPool pool(2);
  std::mt19937 rng(14);
  const int64_t cols = 2 * kQK_K, n = 7;
  const RandomKMatrix a(GgmlType::Q4_K, 20, cols, rng, pool), b(GgmlType::Q6_K, 3, cols, rng, pool);
  std::vector<float> wf(static_cast<size_t>(6 * cols));
  std::normal_distribution<float> dist(0.0f, 0.1f);
  for (auto& v : wf) v = dist(rng);
  const QuantizedMatrix c = quantize(WeightMatrix{wf.data(), DType::F32, 6, cols}, QType::Q8_0, pool);
  const std::vector<float> x = random_acts(n, cols, rng);
  for (Isa isa : supported_isas()) {
    const WeightMatrix* ws[] = {&a.m.view(), &b.m.view(), &c.view()};
    std::vector<std::vector<float>> fused(3), single(3);
    std::vector<MatmulOut> outs;
    for (int i = 0; i < 3; ++i) {
      fused[i].resize(static_cast<size_t>(n * ws[i]->rows));
      single[i].resize(fused[i].size());
      outs.push_back(MatmulOut{ws[i], fused[i].data()});
      matmul(*ws[i], x.data(), n, single[i].data(), pool, isa);
    }
    matmul_fused(outs, x.data(), n, pool, isa);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(fused[i], single[i]) << isa_name(isa) << " output " << i;
  }
}

// Ember's own Q4_K quantizer: every weight within half a quant step of its float (its sub-block's
// range / 15, plus the 6-bit grids' rounding), on gaussian rows with outliers and an all-zero
// super-block, rows not a multiple of the group; quantize() refuses partial super-blocks and the
// K-quants it has no quantizer for.
TEST(KQuant, QuantizeQ4KRoundTrip) {
  ThreadPool pool(2);
  std::mt19937 rng(15);
  const int64_t rows = 21, cols = 3 * kQK_K;
  std::vector<float> f = random_acts(rows, cols, rng);
  std::fill_n(f.begin() + 2 * cols + kQK_K, kQK_K, 0.0f);
  const QuantizedMatrix q = quantize(WeightMatrix{f.data(), DType::F32, rows, cols}, QType::Q4_K, pool);
  EXPECT_EQ(q.view().qtype, QType::Q4_K);
  EXPECT_EQ(q.bytes(), kquant_bytes(QType::Q4_K, rows, cols));
  std::vector<float> row(static_cast<size_t>(cols));
  double err2 = 0, x2 = 0;
  for (int64_t r = 0; r < rows; ++r) {
    copy_row(q.view(), r, row.data());
    for (int64_t b = 0; b < cols / 32; ++b) {
      float lo = 0, hi = 0, amax = 0;  // of the sub-block; amax of its super-block
      for (int64_t k = 0; k < 32; ++k) {
        const float v = f[r * cols + 32 * b + k];
        lo = std::min(lo, v), hi = std::max(hi, v);
      }
      for (int64_t k = 0; k < kQK_K; ++k) amax = std::max(amax, std::fabs(f[r * cols + b / 8 * kQK_K + k]));
      for (int64_t k = 0; k < 32; ++k) {
        const int64_t c = 32 * b + k;
        // Half a step of the sub-block's range, plus the 6-bit grids' rounding up.
        ASSERT_LE(std::fabs(row[c] - f[r * cols + c]), 0.5f * (hi - lo) / 15.0f + amax / 100.0f + 1e-6f) << "r=" << r << " c=" << c;
        err2 += (row[c] - f[r * cols + c]) * (row[c] - f[r * cols + c]);
        x2 += f[r * cols + c] * f[r * cols + c];
      }
    }
  }
  EXPECT_LT(std::sqrt(err2 / x2), 0.15);  // 4-bit quants of gaussian values: about 0.1 relative error
  std::vector<float> zero(static_cast<size_t>(cols));
  copy_row(q.view(), 2, zero.data());
  for (int64_t c = kQK_K; c < 2 * kQK_K; ++c) ASSERT_EQ(zero[c], 0.0f) << c;
  std::vector<float> narrow(4 * 128);
  EXPECT_THROW(quantize(WeightMatrix{narrow.data(), DType::F32, 4, 128}, QType::Q4_K, pool), Error);
  EXPECT_THROW(quantize(WeightMatrix{f.data(), DType::F32, rows, cols}, QType::Q6_K, pool), Error);
}

// The same quants written as ggml's Q4_K blocks (what a GGUF file stores): ggml's dequantization of
// them gives the bits of Ember's own layout.
TEST(KQuant, QuantizeQ4KGgmlBlocksHoldTheSameQuants) {
  ThreadPool pool(2);
  std::mt19937 rng(16);
  const int64_t rows = 5, cols = 2 * kQK_K;
  const std::vector<float> f = random_acts(rows, cols, rng);
  const QuantizedMatrix q = quantize(WeightMatrix{f.data(), DType::F32, rows, cols}, QType::Q4_K, pool);
  std::vector<uint8_t> blocks(static_cast<size_t>(ggml_row_bytes(GgmlType::Q4_K, cols)));
  std::vector<float> ggml(static_cast<size_t>(cols)), ember(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(GgmlType::Q4_K, f.data() + r * cols, cols, blocks.data());
    dequantize_row(GgmlType::Q4_K, blocks.data(), cols, ggml.data());
    copy_row(q.view(), r, ember.data());
    for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(ggml[c], ember[c]) << "r=" << r << " c=" << c;
  }
}

TEST(KQuant, RejectsPartialSuperBlocks) {
  ThreadPool pool(1);
  std::vector<uint8_t> bytes(1024);
  EXPECT_THROW(from_ggml_blocks(GgmlType::Q4_K, bytes.data(), 1, 128, pool), Error);
  try {
    from_ggml_blocks(GgmlType::IQ2_XXS, bytes.data(), 1, 256, pool);
    FAIL() << "IQ2_XXS has no kernel";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("IQ2_XXS"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ember::kernels
