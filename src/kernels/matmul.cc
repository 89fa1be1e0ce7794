#include "kernels/matmul.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "kernels/matmul_impl.h"
#include "kernels/quant.h"

namespace ember::kernels {

namespace {

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// Loads 8 weights of any dtype as float32.
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p, DType t) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if (t == DType::F16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));  // bf16
}

inline float to_f32(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(base)[i];
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
  }
  return 0.0f;
}

// Computes up to 4 tokens against one weight row at a time so each weight load is reused.
template <typename W>
void rows_kernel(const W* w, DType t, int64_t cols, const float* x, int64_t n_tokens, int64_t rows,
                 int64_t r0, int64_t r1, float* y) {
  const int64_t c8 = cols & ~int64_t{7};
  for (int64_t r = r0; r < r1; ++r) {
    const W* wr = w + r * cols;
    int64_t tok = 0;
    for (; tok + 4 <= n_tokens; tok += 4) {
      const float* x0 = x + tok * cols;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t c = 0; c < c8; c += 8) {
        __m256 wv;
        if constexpr (std::is_same_v<W, float>) wv = load8(wr + c);
        else wv = load8(wr + c, t);
        a0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + c), a0);
        a1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + cols + c), a1);
        a2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + 2 * cols + c), a2);
        a3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + 3 * cols + c), a3);
      }
      float s[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
      for (int64_t c = c8; c < cols; ++c) {
        const float wc = to_f32(w, t, r * cols + c);
        for (int k = 0; k < 4; ++k) s[k] += wc * x0[k * cols + c];
      }
      for (int k = 0; k < 4; ++k) y[(tok + k) * rows + r] = s[k];
    }
    for (; tok < n_tokens; ++tok) {
      const float* xt = x + tok * cols;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0;
      int64_t c = 0;
      for (; c + 16 <= c8; c += 16) {
        if constexpr (std::is_same_v<W, float>) {
          a0 = _mm256_fmadd_ps(load8(wr + c), _mm256_loadu_ps(xt + c), a0);
          a1 = _mm256_fmadd_ps(load8(wr + c + 8), _mm256_loadu_ps(xt + c + 8), a1);
        } else {
          a0 = _mm256_fmadd_ps(load8(wr + c, t), _mm256_loadu_ps(xt + c), a0);
          a1 = _mm256_fmadd_ps(load8(wr + c + 8, t), _mm256_loadu_ps(xt + c + 8), a1);
        }
      }
      for (; c < c8; c += 8) {
        if constexpr (std::is_same_v<W, float>) a0 = _mm256_fmadd_ps(load8(wr + c), _mm256_loadu_ps(xt + c), a0);
        else a0 = _mm256_fmadd_ps(load8(wr + c, t), _mm256_loadu_ps(xt + c), a0);
      }
      float s = hsum(_mm256_add_ps(a0, a1));
      for (; c < cols; ++c) s += to_f32(w, t, r * cols + c) * xt[c];
      y[tok * rows + r] = s;
    }
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

void check_isa(Isa isa) {
  if (!isa_supported(isa)) fail("matmul", std::string("instruction set ") + isa_name(isa) + " is not supported here");
}

}  // namespace

namespace detail {

void float_rows_avx2(const WeightMatrix& w, const float* x, int64_t n, float* y, int64_t r0, int64_t r1) {
  for (int64_t t0 = 0; t0 < n; t0 += kTokenBlock) {
    const int64_t nt = std::min(kTokenBlock, n - t0);
    const float* xt = x + t0 * w.cols;
    float* yt = y + t0 * w.rows;
    if (w.dtype == DType::F32)
      rows_kernel(static_cast<const float*>(w.data), w.dtype, w.cols, xt, nt, w.rows, r0, r1, yt);
    else
      rows_kernel(static_cast<const uint16_t*>(w.data), w.dtype, w.cols, xt, nt, w.rows, r0, r1, yt);
  }
}

// 8 rows (one half of a 16-row group) per vector; maddubs needs an unsigned operand, so q8 uses the
// sign trick (|w| times x with w's sign) and q4 multiplies its unsigned nibbles and corrects by -8*sum.
void quant_groups_avx2(const WeightMatrix& w, const QuantizedActs& a, float* y, int64_t g0, int64_t g1) {
  const int64_t nb = a.n_blocks, bb = qblock_bytes(w.qtype);
  const bool q8 = w.qtype == QType::Q8_0;
  const __m256i ones = _mm256_set1_epi16(1), low4 = _mm256_set1_epi8(0x0F);
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
  // Token blocks outermost: a group's weights stay in L2 while a block of tokens reuses them.
  for (int64_t tb = 0; tb < a.n; tb += kTokenBlock)
  for (int64_t g = g0; g < g1; ++g)
    for (int64_t t = tb; t < std::min(a.n, tb + kTokenBlock); ++t) {
      const int8_t* xq = a.q.data() + t * a.cols;
      for (int64_t h = 0; h < 2; ++h) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
          const uint8_t* tile = base + (g * nb + b) * bb + h * 32;
          const int8_t* xb = xq + b * kQBlock;
          __m256i isum = _mm256_setzero_si256();
          auto x4 = [&](int64_t k) { int32_t v; std::memcpy(&v, xb + k, 4); return _mm256_set1_epi32(v); };
          if (q8) {
            for (int64_t j = 0; j < 8; ++j) {
              const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + j * 64));
              const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(x4(4 * j), wv));
              isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, ones));
            }
          } else {
            for (int64_t j = 0; j < 4; ++j) {
              const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + j * 64));
              const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
              const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, x4(4 * j)), _mm256_maddubs_epi16(hi, x4(16 + 4 * j)));
              isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, ones));
            }
            isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(8 * a.s[t * nb + b]));
          }
          const __m256 sw = _mm256_cvtph_ps(_mm_loadu_si128(
              reinterpret_cast<const __m128i*>(w.scales + (g * nb + b) * kQGroupRows + h * 8)));
          acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(sw, _mm256_set1_ps(a.d[t * nb + b])), acc);
        }
        alignas(32) float out[8];
        _mm256_store_ps(out, acc);
        const int64_t r0 = g * kQGroupRows + h * 8;
        for (int64_t i = 0; i < 8 && r0 + i < w.rows; ++i) y[t * w.rows + r0 + i] = out[i];
      }
  }
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
  check_isa(isa);
  if (n_tokens <= 0) return;
  if (w.qtype != QType::None) {
    QuantizedActs a;
    a.n = n_tokens;
    quantize_acts(x, n_tokens, w.cols, a);
    const int64_t groups = (w.rows + kQGroupRows - 1) / kQGroupRows;
    pool.parallel_for(groups, 1, [&](int64_t g0, int64_t g1) {
      switch (isa) {
        case Isa::Avx512: detail::quant_groups_avx512(w, a, y, g0, g1); break;
        case Isa::Avx2: detail::quant_groups_avx2(w, a, y, g0, g1); break;
        case Isa::Scalar:
          for (int64_t t = 0; t < n_tokens; ++t)
            for (int64_t r = g0 * kQGroupRows; r < std::min(w.rows, g1 * kQGroupRows); ++r)
              y[t * w.rows + r] = quant_row_dot(w, r, a, t);
          break;
      }
    });
    return;
  }
  if (isa == Isa::Scalar) {
    matmul_reference(w, x, n_tokens, y);
    return;
  }
  // Chunks of whole 4-row tiles, each worth a thread hand-off (~16K multiply-adds).
  constexpr int64_t kTile = 4;
  const int64_t tiles = (w.rows + kTile - 1) / kTile;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, w.cols * n_tokens * kTile));
  pool.parallel_for(tiles, grain, [&](int64_t a, int64_t b) {
    const int64_t r0 = a * kTile, r1 = std::min(w.rows, b * kTile);
    if (isa == Isa::Avx512) detail::float_rows_avx512(w, x, n_tokens, y, r0, r1);
    else detail::float_rows_avx2(w, x, n_tokens, y, r0, r1);
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
    for (int64_t r = 0; r < w.rows; ++r) {
      float s = 0.0f;
      for (int64_t c = 0; c < w.cols; ++c) s += to_f32(w.data, w.dtype, r * w.cols + c) * x[t * w.cols + c];
      y[t * w.rows + r] = s;
    }
}

void copy_row(const WeightMatrix& w, int64_t row, float* out) {
  if (w.qtype != QType::None) {
    for (int64_t c = 0; c < w.cols; ++c) out[c] = scale_at(w, row, c / kQBlock) * static_cast<float>(quant_at(w, row, c));
    return;
  }
  for (int64_t c = 0; c < w.cols; ++c) out[c] = to_f32(w.data, w.dtype, row * w.cols + c);
}

}  // namespace ember::kernels
