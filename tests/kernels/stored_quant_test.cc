// ggml's 32-weight block types kept as stored (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4: quant.h):
// lossless repacking against dequantize_row, the scalar reference against the dequantized product,
// and every instruction set's kernel bit for bit against the scalar reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/gguf_quants.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "random_blocks.h"

namespace ember::kernels::stored_quant_test {
namespace {

constexpr GgmlType kBlock32Types[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                                      GgmlType::Q5_1, GgmlType::IQ4_NL, GgmlType::MXFP4};

// How a random block is drawn: random bytes with ordinary scales, every byte 0xFF with the largest
// float16 scale (and min), or scale and min 0.
enum class BlockKind { Random, Extreme, Zero };

bool has_min(GgmlType t) { return t == GgmlType::Q4_1 || t == GgmlType::Q5_1; }

void random_block(GgmlType type, BlockKind kind, std::mt19937& rng, uint8_t* b) {
  const int64_t bytes = ggml_type_info(type).block_bytes;
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t i = 0; i < bytes; ++i) b[i] = static_cast<uint8_t>(kind == BlockKind::Extreme ? 0xFF : byte(rng));
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  auto put_f16 = [&](int64_t at, float v) {
    const uint16_t h = f32_to_f16(v);
    std::memcpy(b + at, &h, 2);
  };
  if (type == GgmlType::MXFP4) {  // an E8M0 exponent: 2^(e - 128); the smallest (a subnormal) for Zero
    b[0] = static_cast<uint8_t>(kind == BlockKind::Zero ? 0 : kind == BlockKind::Extreme ? 150 : std::uniform_int_distribution<int>(112, 126)(rng));
    return;
  }
  auto value = [&] { return kind == BlockKind::Zero ? 0.0f : kind == BlockKind::Extreme ? 65504.0f : scale(rng); };
  put_f16(0, value());
  if (has_min(type)) put_f16(2, value());
}

// A random matrix of `type`: one block in ten at its extremes (all of them if `extreme`), one in
// ten zero.
struct RandomBlocks : test::RandomGgmlMatrix {
  RandomBlocks(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng, ThreadPool& pool, bool extreme = false)
      : RandomGgmlMatrix(type, rows, cols, pool, [&](int64_t, uint8_t* b) {
          const int k = extreme ? 0 : std::uniform_int_distribution<int>(0, 9)(rng);
          random_block(type, k == 0 ? BlockKind::Extreme : k == 1 ? BlockKind::Zero : BlockKind::Random, rng, b);
        }) {}
};

// Activations with an outlier per token and an all-zero block in some tokens.
std::vector<float> random_acts(int64_t n, int64_t cols, std::mt19937& rng) { return test::random_acts(n, cols, 32, rng); }

// Every weight dequantizes from the repacked layout to exactly the bits ggml's reference gives, at
// the file's bytes per weight (rows padded to groups of 16).
TEST(StoredQuant, RepackIsLossless) {
  ThreadPool pool(2);
  std::mt19937 rng(21);
  for (GgmlType type : kBlock32Types) {
    const int64_t rows = 19, cols = 160;
    const RandomBlocks k(type, rows, cols, rng, pool);
    const WeightMatrix& w = k.m.view();
    EXPECT_EQ(w.qtype, stored_qtype(type)) << ggml_type_name(type);
    EXPECT_TRUE(has_stored_kernel(type));
    EXPECT_EQ(k.m.bytes(), quantized_bytes(w.qtype, rows, cols));
    EXPECT_EQ(weight_bytes(w), k.m.bytes());
    EXPECT_EQ(k.m.bytes(), ggml_row_bytes(type, cols) * ((rows + 15) / 16 * 16)) << ggml_type_name(type);
    test::expect_lossless(k, ggml_type_name(type));
  }
}

// The scalar reference equals the dequantized weights times the quantized activations (up to float
// rounding): the value, the scale, the offset and the min each have the meaning ggml gives them.
TEST(StoredQuant, ReferenceMatchesDequantizedProduct) {
  ThreadPool pool(1);
  std::mt19937 rng(22);
  for (GgmlType type : kBlock32Types) {
    if (type == GgmlType::MXFP4) continue;  // its activations are not rounded to int8: next test
    const int64_t rows = 9, cols = 128, n = 5;
    const RandomBlocks k(type, rows, cols, rng, pool);
    const std::vector<float> x = random_acts(n, cols, rng);
    std::vector<float> y(static_cast<size_t>(n * rows));
    matmul_reference(k.m.view(), x.data(), n, y.data());
    QuantizedActs a;
    quantize_acts(x.data(), n, cols, a, pool);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t r = 0; r < rows; ++r) {
        double exact = 0, mag = 0;
        for (int64_t c = 0; c < cols; ++c) {
          const double w = k.f[r * cols + c], xq = double(a.d[t * a.n_blocks + c / 32]) * a.q[t * cols + c];
          exact += w * xq;
          mag += std::fabs(w * xq);
        }
        ASSERT_NEAR(y[t * rows + r], exact, 1e-5 * mag + 1e-6) << ggml_type_name(type) << " r=" << r << " t=" << t;
      }
  }
}

// MXFP4 products take the activations at about 16 bits (two int8 passes: matmul.cc): the scalar
// reference is the exact product of the weights and the unrounded activations within ~1e-4 of the
// magnitudes summed, where one int8 pass is some 20 times further off on these activations.
TEST(StoredQuant, Mxfp4ProductIsNearTheUnroundedOne) {
  ThreadPool pool(1);
  std::mt19937 rng(26);
  const int64_t rows = 21, cols = 256, n = 6;
  const RandomBlocks k(GgmlType::MXFP4, rows, cols, rng, pool);
  const std::vector<float> x = random_acts(n, cols, rng);
  std::vector<float> y(static_cast<size_t>(n * rows));
  matmul_reference(k.m.view(), x.data(), n, y.data());
  double worst = 0;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double exact = 0, mag = 0;
      for (int64_t c = 0; c < cols; ++c) {
        exact += double(k.f[r * cols + c]) * x[t * cols + c];
        mag += std::fabs(double(k.f[r * cols + c]) * x[t * cols + c]);
      }
      worst = std::max(worst, std::fabs(y[t * rows + r] - exact) / (mag + 1e-30));
    }
  EXPECT_LT(worst, 1e-4);
}

void expect_every_isa_matches(const WeightMatrix& w, const std::vector<float>& x, int64_t n, ThreadPool& pool,
                              const std::string& what) {
  std::vector<float> ref(static_cast<size_t>(n * w.rows));
  matmul_reference(w, x.data(), n, ref.data());
  for (Isa isa : supported_isas()) {
    std::vector<float> y(ref.size(), -1.0f);
    matmul(w, x.data(), n, y.data(), pool, isa);
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_EQ(y[i], ref[i]) << what << " " << isa_name(isa) << " n=" << n << " element " << i;
  }
}

// Every kernel adds in quant_row_dot's order (exact integer dots, a fused multiply-add per block and
// one for the min): the bits equal the scalar reference's. Rows off the 16-row group, tokens off the
// register tiles and across the 64-token block (decode and prefill kernels), one and two threads.
TEST(StoredQuant, EveryIsaMatchesReference) {
  std::mt19937 rng(23);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (GgmlType type : kBlock32Types)
      for (int64_t rows : {1, 16, 37})
        for (int64_t cols : {32, 96, 512})
          for (int64_t n : {1, 2, 3, 13, 70}) {
            const RandomBlocks k(type, rows, cols, rng, pool);
            expect_every_isa_matches(k.m.view(), random_acts(n, cols, rng), n, pool,
                                     std::string(ggml_type_name(type)) + " rows=" + std::to_string(rows) +
                                         " cols=" + std::to_string(cols));
          }
  }
}

// The largest integer sums (every byte 0xFF: the largest nibbles, fifth bits and IQ4_NL's largest
// value; activations all +-127) equal the reference's: no kernel saturates its 16-bit pairs.
TEST(StoredQuant, LargestSumsDoNotOverflow) {
  ThreadPool pool(2);
  std::mt19937 rng(24);
  for (GgmlType type : kBlock32Types)
    for (float sign : {1.0f, -1.0f})
      for (int64_t n : {1, 2, 9}) {
        const RandomBlocks k(type, 16, 256, rng, pool, true);
        expect_every_isa_matches(k.m.view(), std::vector<float>(static_cast<size_t>(n * 256), sign), n, pool,
                                 std::string(ggml_type_name(type)) + " sign=" + std::to_string(sign));
      }
}

// A fused set of every stored type (as a GGUF file mixes them) equals the separate products.
TEST(StoredQuant, FusedEqualsSeparateProducts) {
  ThreadPool pool(2);
  std::mt19937 rng(25);
  const int64_t cols = 256, n = 7;
  std::vector<RandomBlocks> ms;
  ms.reserve(std::size(kBlock32Types));
  for (GgmlType type : kBlock32Types) ms.emplace_back(type, 5 + static_cast<int64_t>(ms.size()) * 7, cols, rng, pool);
  const std::vector<float> x = random_acts(n, cols, rng);
  for (Isa isa : supported_isas()) {
    std::vector<std::vector<float>> fused(ms.size()), single(ms.size());
    std::vector<MatmulOut> outs;
    for (size_t i = 0; i < ms.size(); ++i) {
      fused[i].resize(static_cast<size_t>(n * ms[i].m.view().rows));
      single[i].resize(fused[i].size());
      matmul(ms[i].m.view(), x.data(), n, single[i].data(), pool, isa);
    }
    for (size_t i = 0; i < ms.size(); ++i) outs.push_back(MatmulOut{&ms[i].m.view(), fused[i].data()});
    matmul_fused(outs, x.data(), n, pool, isa);
    for (size_t i = 0; i < ms.size(); ++i) EXPECT_EQ(fused[i], single[i]) << isa_name(isa) << " output " << i;
  }
}

// Types without a kernel and partial blocks are refused naming the type; Ember does not quantize to
// the stored-only types.
TEST(StoredQuant, RefusesWhatHasNoKernel) {
  ThreadPool pool(1);
  std::vector<uint8_t> bytes(1024);
  for (GgmlType type : {GgmlType::IQ2_XS, GgmlType::IQ3_XXS, GgmlType::F32}) {
    EXPECT_FALSE(has_stored_kernel(type)) << ggml_type_name(type);
    try {
      from_ggml_blocks(type, bytes.data(), 1, 256, pool);
      FAIL() << ggml_type_name(type) << " has no kernel";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(ggml_type_name(type)), std::string::npos) << e.what();
    }
  }
  try {
    from_ggml_blocks(GgmlType::Q5_1, bytes.data(), 1, 48, pool);
    FAIL() << "48 columns are not whole blocks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q5_1"), std::string::npos) << e.what();
  }
  std::vector<float> wf(64);
  EXPECT_THROW(quantize(WeightMatrix{wf.data(), DType::F32, 2, 32}, QType::Q5_0, pool), Error);
}

}  // namespace
}  // namespace ember::kernels::stored_quant_test
