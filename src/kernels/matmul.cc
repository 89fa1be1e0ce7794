#include "kernels/matmul.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "kernels/matmul_impl.h"
#include "kernels/quant.h"
#include "kernels/simd_avx2.h"

namespace ember::kernels {

namespace {

using detail::kTokenBlock;

using simd::load8;
inline float to_f32(const void* base, DType t, int64_t i) { return simd::load1(base, t, i); }

// The four horizontal sums of a0..a3 in one vector (no per-row reduction chain).
inline __m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

// R rows (R <= 4) x NT tokens over columns [k0, k1): each weight vector is converted once and used
// NT times; R*NT independent accumulators keep several load streams in flight. Column c of the
// tile's row i is w[i * ldw + c - wc0]. Writes (or adds, when `add`) y[t * ldy + i].
// The sum is reduced every kc columns and the pieces added in order, which is what column blocking
// of kc (a multiple of 8) does: a token gets the same bits whether the columns are blocked (many
// tokens) or streamed whole (decode), and whatever R and NT are.
template <DType T, int R, int NT>
void float_tile(const void* w, int64_t ldw, int64_t wc0, const float* x, int64_t ldx, int64_t k0, int64_t k1,
                int64_t kc, float* y, int64_t ldy, bool add) {
  for (int64_t b0 = k0; b0 < k1; b0 += kc, add = true) {
    const int64_t b1 = std::min(k1, b0 + kc);
    // The loops over R and NT must unroll (GCC does not at -O2) or the accumulators live on the stack.
    __m256 acc[R][NT];
    #pragma GCC unroll 4
    for (int i = 0; i < R; ++i)
      #pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) acc[i][t] = _mm256_setzero_ps();
    const int64_t b8 = b0 + ((b1 - b0) & ~int64_t{7});
    for (int64_t c = b0; c < b8; c += 8) {
      __m256 xv[NT];
      #pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) xv[t] = _mm256_loadu_ps(x + t * ldx + c);
      #pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        const __m256 wv = load8<T>(w, i * ldw + c - wc0);
        #pragma GCC unroll 4
        for (int t = 0; t < NT; ++t) acc[i][t] = _mm256_fmadd_ps(wv, xv[t], acc[i][t]);
      }
    }
    #pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      const __m256 z = _mm256_setzero_ps();
      alignas(16) float s[4];
      _mm_store_ps(s, hsum4(acc[0][t], R > 1 ? acc[R > 1 ? 1 : 0][t] : z, R > 2 ? acc[R > 2 ? 2 : 0][t] : z,
                            R > 3 ? acc[R > 3 ? 3 : 0][t] : z));
      #pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        for (int64_t c = b8; c < b1; ++c) s[i] += to_f32(w, T, i * ldw + c - wc0) * x[t * ldx + c];
        float& out = y[t * ldy + i];
        out = add ? out + s[i] : s[i];
      }
    }
  }
}

// Rows [r0, r1) x tokens [0, n) over columns [k0, k1) in register tiles. One or two tokens read
// the weights in place (decode: the weight stream is all that matters). More tokens first convert
// each 4-row tile's columns to float32 in `packed` (at most 32 KiB, cache-resident), so every
// weight is converted once and the 4-row x 3-token tiles run on plain loads.
// From this many tokens on, 16-bit weight tiles are converted to float32 once (float_block) and
// the columns are blocked (float_rows); fewer tokens stream the weights as stored.
constexpr int64_t kPackTokens = 3;

template <DType T>
void float_block(const WeightMatrix& w, const float* x, int64_t n, float* y, int64_t r0, int64_t r1, int64_t k0,
                 int64_t k1, int64_t kc, std::vector<float>& packed) {
  const bool add = k0 > 0;
  const int64_t kl = k1 - k0, es = static_cast<int64_t>(dtype_size(T));
  // The tile of rows starting at `wp` (row stride ldw, first column wc0) for every token; its
  // outputs start at y + r.
  auto tokens = [&]<DType W, int R>(const void* wp, int64_t ldw, int64_t wc0, int64_t r) {
    int64_t t = 0;
    for (; t + 3 <= n; t += 3)
      float_tile<W, R, 3>(wp, ldw, wc0, x + t * w.cols, w.cols, k0, k1, kc, y + t * w.rows + r, w.rows, add);
    for (; t + 2 <= n; t += 2)
      float_tile<W, R, 2>(wp, ldw, wc0, x + t * w.cols, w.cols, k0, k1, kc, y + t * w.rows + r, w.rows, add);
    if (t < n) float_tile<W, R, 1>(wp, ldw, wc0, x + t * w.cols, w.cols, k0, k1, kc, y + t * w.rows + r, w.rows, add);
  };
  auto row = [&](int64_t r) { return static_cast<const uint8_t*>(w.data) + r * w.cols * es; };
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    if (T != DType::F32 && n >= kPackTokens) {
      packed.resize(static_cast<size_t>(4 * kl));
      for (int64_t i = 0; i < 4; ++i) {
        const uint8_t* src = row(r + i) + k0 * es;
        float* dst = packed.data() + i * kl;
        int64_t c = 0;
        for (; c + 8 <= kl; c += 8) _mm256_storeu_ps(dst + c, load8<T>(src, c));
        for (; c < kl; ++c) dst[c] = to_f32(src, T, c);
      }
      tokens.template operator()<DType::F32, 4>(packed.data(), kl, k0, r);
    } else {
      tokens.template operator()<T, 4>(row(r), w.cols, 0, r);
    }
  }
  for (; r < r1; ++r) tokens.template operator()<T, 1>(row(r), w.cols, 0, r);
}

template <DType T>
void float_rows(const WeightMatrix& w, const float* x, int64_t n, float* y, int64_t r0, int64_t r1) {
  // Sums are reduced every kColBlock columns (see float_tile), so results do not depend on n.
  // Decode (n < kPackTokens) streams whole rows: the weight stream is what bounds it. More tokens
  // block the columns too: a block of tokens x columns of activations (at most 256 KiB) stays in
  // L2 while every row tile of [r0, r1) streams past it.
  constexpr int64_t kColBlock = 1024;
  const int64_t kc = w.cols <= 2 * kColBlock ? w.cols : kColBlock;
  std::vector<float> packed;
  if (n < kPackTokens) {
    float_block<T>(w, x, n, y, r0, r1, 0, w.cols, kc, packed);
    return;
  }
  for (int64_t t0 = 0; t0 < n; t0 += kTokenBlock) {
    const int64_t nt = std::min(kTokenBlock, n - t0);
    for (int64_t k0 = 0; k0 < w.cols; k0 += kc)
      float_block<T>(w, x + t0 * w.cols, nt, y + t0 * w.rows, r0, r1, k0, std::min(w.cols, k0 + kc), kc, packed);
  }
}

// Scalar quantized product of one row with one token: the exact integer dot per block, scaled.
float quant_row_dot(const WeightMatrix& w, int64_t r, const QuantizedActs& a, int64_t t) {
  float s = 0.0f;
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    int32_t dot = 0;
    for (int64_t k = 0; k < kQBlock; ++k) dot += quant_at(w, r, b * kQBlock + k) * a.q[t * a.cols + b * kQBlock + k];
    s += static_cast<float>(dot) * (scale_at(w, r, b) * a.d[t * a.n_blocks + b]);
  }
  return s;
}

// Scalar product of one plain row with one token, summed in column order.
float float_row_dot(const WeightMatrix& w, int64_t r, const float* x) {
  float s = 0.0f;
  for (int64_t c = 0; c < w.cols; ++c) s += to_f32(w.data, w.dtype, r * w.cols + c) * x[c];
  return s;
}

void check_isa(Isa isa) {
  if (!isa_supported(isa)) fail("matmul", std::string("instruction set ") + isa_name(isa) + " is not supported here");
}

// How many bytes ahead of their reads the quantized kernels prefetch weights: one core alone does not
// keep enough reads in flight to reach the memory's bandwidth while it also computes.
constexpr int64_t kPrefetchAhead = 2048;

// One 16-row group x NT tokens over all blocks. Each 64-byte unit row holds 4 weights of all 16
// rows: its two 32-byte halves (rows 0-7, 8-15) feed two accumulators, so a group streams through
// once. maddubs needs an unsigned operand: q8 uses the sign trick (|w| times x with w's sign), q4
// multiplies its unsigned nibbles and corrects by -8 * (sum of the block's activation quants).
template <bool Q8, int NT>
void quant_tile(const uint8_t* group, const uint16_t* scales, const QuantizedActs& a, int64_t t0, float* y, int64_t ldy,
                int64_t valid_rows) {
  const int64_t nb = a.n_blocks, bb = Q8 ? 512 : 256;
  const __m256i ones = _mm256_set1_epi16(1), low4 = _mm256_set1_epi8(0x0F);
  __m256 acc[2][NT];
  for (int h = 0; h < 2; ++h)
    for (int t = 0; t < NT; ++t) acc[h][t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* tile = group + b * bb;
    // The lines a few blocks ahead (past the group's end is harmless: prefetches do not fault).
    for (int64_t l = 0; l < bb; l += 64) _mm_prefetch(reinterpret_cast<const char*>(tile + kPrefetchAhead + l), _MM_HINT_T0);
    __m256i isum[2][NT];
    for (int h = 0; h < 2; ++h)
      for (int t = 0; t < NT; ++t) isum[h][t] = _mm256_setzero_si256();
    auto x4 = [&](int t, int64_t k) {
      int32_t v;
      std::memcpy(&v, a.q.data() + (t0 + t) * a.cols + b * kQBlock + k, 4);
      return _mm256_set1_epi32(v);
    };
    if constexpr (Q8) {
      for (int64_t j = 0; j < 8; ++j) {
        const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + j * 64));
        const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + j * 64 + 32));
        const __m256i u0 = _mm256_sign_epi8(w0, w0), u1 = _mm256_sign_epi8(w1, w1);
        for (int t = 0; t < NT; ++t) {
          const __m256i xv = x4(t, 4 * j);
          isum[0][t] = _mm256_add_epi32(isum[0][t], _mm256_madd_epi16(_mm256_maddubs_epi16(u0, _mm256_sign_epi8(xv, w0)), ones));
          isum[1][t] = _mm256_add_epi32(isum[1][t], _mm256_madd_epi16(_mm256_maddubs_epi16(u1, _mm256_sign_epi8(xv, w1)), ones));
        }
      }
    } else {
      for (int64_t j = 0; j < 4; ++j) {
        const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + j * 64));
        const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + j * 64 + 32));
        const __m256i lo0 = _mm256_and_si256(v0, low4), hi0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), low4);
        const __m256i lo1 = _mm256_and_si256(v1, low4), hi1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), low4);
        for (int t = 0; t < NT; ++t) {
          const __m256i xl = x4(t, 4 * j), xh = x4(t, 16 + 4 * j);
          const __m256i p0 = _mm256_add_epi16(_mm256_maddubs_epi16(lo0, xl), _mm256_maddubs_epi16(hi0, xh));
          const __m256i p1 = _mm256_add_epi16(_mm256_maddubs_epi16(lo1, xl), _mm256_maddubs_epi16(hi1, xh));
          isum[0][t] = _mm256_add_epi32(isum[0][t], _mm256_madd_epi16(p0, ones));
          isum[1][t] = _mm256_add_epi32(isum[1][t], _mm256_madd_epi16(p1, ones));
        }
      }
    }
    const uint16_t* sc = scales + b * kQGroupRows;
    const __m256 sw0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
    const __m256 sw1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + 8)));
    for (int t = 0; t < NT; ++t) {
      const int64_t tb = (t0 + t) * nb + b;
      if constexpr (!Q8) {
        const __m256i corr = _mm256_set1_epi32(8 * a.s[tb]);
        isum[0][t] = _mm256_sub_epi32(isum[0][t], corr);
        isum[1][t] = _mm256_sub_epi32(isum[1][t], corr);
      }
      const __m256 dx = _mm256_set1_ps(a.d[tb]);
      acc[0][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[0][t]), _mm256_mul_ps(sw0, dx), acc[0][t]);
      acc[1][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[1][t]), _mm256_mul_ps(sw1, dx), acc[1][t]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    alignas(32) float out[16];
    _mm256_store_ps(out, acc[0][t]);
    _mm256_store_ps(out + 8, acc[1][t]);
    std::copy_n(out, valid_rows, y + (t0 + t) * ldy);
  }
}

template <bool Q8>
void quant_groups(const WeightMatrix& w, const QuantizedActs& a, float* y, int64_t g0, int64_t g1) {
  const int64_t nb = a.n_blocks;
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
  // Token blocks outermost: a group's weights stay in L2 while a block of tokens reuses them.
  for (int64_t tb = 0; tb < a.n; tb += kTokenBlock) {
    const int64_t te = std::min(a.n, tb + kTokenBlock);
    for (int64_t g = g0; g < g1; ++g) {
      const uint8_t* group = base + g * nb * qblock_bytes(w.qtype);
      const uint16_t* scales = w.scales + g * nb * kQGroupRows;
      const int64_t valid = std::min(kQGroupRows, w.rows - g * kQGroupRows);
      float* yg = y + g * kQGroupRows;
      int64_t t = tb;
      for (; t + 2 <= te; t += 2) quant_tile<Q8, 2>(group, scales, a, t, yg, w.rows, valid);
      if (t < te) quant_tile<Q8, 1>(group, scales, a, t, yg, w.rows, valid);
    }
  }
}

}  // namespace

namespace detail {

void float_rows_avx2(const WeightMatrix& w, const float* x, int64_t n, float* y, int64_t r0, int64_t r1) {
  switch (w.dtype) {
    case DType::F32: float_rows<DType::F32>(w, x, n, y, r0, r1); break;
    case DType::F16: float_rows<DType::F16>(w, x, n, y, r0, r1); break;
    case DType::BF16: float_rows<DType::BF16>(w, x, n, y, r0, r1); break;
  }
}

void quant_groups_avx2(const WeightMatrix& w, const QuantizedActs& a, float* y, int64_t g0, int64_t g1) {
  if (w.qtype == QType::Q8_0) quant_groups<true>(w, a, y, g0, g1);
  else quant_groups<false>(w, a, y, g0, g1);
}

}  // namespace detail

int64_t weight_bytes(const WeightMatrix& w) {
  if (w.qtype != QType::None) return quantized_bytes(w.qtype, w.rows, w.cols);
  return w.rows * w.cols * static_cast<int64_t>(dtype_size(w.dtype));
}

void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  matmul(w, x, n_tokens, y, pool, best_isa());
}

void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, Isa isa) {
  const MatmulOut out{&w, y};
  matmul_fused(std::span<const MatmulOut>(&out, 1), x, n_tokens, pool, isa);
}

void matmul_fused(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens, ThreadPool& pool) {
  matmul_fused(outs, x, n_tokens, pool, best_isa());
}

void matmul_fused(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens, ThreadPool& pool, Isa isa) {
  check_isa(isa);
  if (n_tokens <= 0 || outs.empty()) return;
  const int64_t cols = outs[0].w->cols;
  // Work units are 16-row ranges (one quantized group, four float tiles), numbered across all outputs.
  std::vector<int64_t> first(outs.size() + 1, 0);
  bool quantized = false;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].w->cols != cols) fail("matmul", "fused products need weights with the same number of columns");
    first[i + 1] = first[i] + (outs[i].w->rows + kQGroupRows - 1) / kQGroupRows;
    quantized = quantized || outs[i].w->qtype != QType::None;
  }
  QuantizedActs a;
  if (quantized) quantize_acts(x, n_tokens, cols, a);
  auto rows = [&](const WeightMatrix& w, float* y, int64_t g0, int64_t g1) {
    const int64_t r0 = g0 * kQGroupRows, r1 = std::min(w.rows, g1 * kQGroupRows);
    if (isa == Isa::Scalar) {
      for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t r = r0; r < r1; ++r)
          y[t * w.rows + r] = w.qtype != QType::None ? quant_row_dot(w, r, a, t) : float_row_dot(w, r, x + t * cols);
    } else if (w.qtype != QType::None) {
      if (isa == Isa::Avx512) detail::quant_groups_avx512(w, a, y, g0, g1);
      else detail::quant_groups_avx2(w, a, y, g0, g1);
    } else {
      if (isa == Isa::Avx512) detail::float_rows_avx512(w, x, n_tokens, y, r0, r1);
      else detail::float_rows_avx2(w, x, n_tokens, y, r0, r1);
    }
  };
  // Chunks worth a thread hand-off (at least ~32K multiply-adds).
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, kQGroupRows * cols * n_tokens));
  pool.parallel_for(first.back(), grain, [&](int64_t u0, int64_t u1) {
    for (size_t i = 0; i < outs.size(); ++i) {
      const int64_t b = std::max(u0, first[i]), e = std::min(u1, first[i + 1]);
      if (b < e) rows(*outs[i].w, outs[i].y, b - first[i], e - first[i]);
    }
  });
}

void matmul_reference(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y) {
  if (w.qtype != QType::None) {
    QuantizedActs a;
    quantize_acts(x, n_tokens, w.cols, a);
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t r = 0; r < w.rows; ++r) y[t * w.rows + r] = quant_row_dot(w, r, a, t);
    return;
  }
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t r = 0; r < w.rows; ++r) y[t * w.rows + r] = float_row_dot(w, r, x + t * w.cols);
}

void copy_row(const WeightMatrix& w, int64_t row, float* out) {
  if (w.qtype != QType::None) {
    for (int64_t c = 0; c < w.cols; ++c) out[c] = scale_at(w, row, c / kQBlock) * static_cast<float>(quant_at(w, row, c));
    return;
  }
  for (int64_t c = 0; c < w.cols; ++c) out[c] = to_f32(w.data, w.dtype, row * w.cols + c);
}

}  // namespace ember::kernels
