// AVX-512 attention kernel of single query tokens (decode steps): up to four query heads of a kv
// head share every key and value row read, 16 columns to an instruction. Scores are sums over the
// head's columns, 16 of them (4 heads x 4 keys, 2 x 8 or 1 x 16) reduced together; the weighted sum
// keeps 16 vectors of outputs in registers across the tile's value rows. Head sizes that are not a
// multiple of 8 take the AVX2 kernel. Only AVX512F is used (CMakeLists.txt).
#include "kernels/avx512_intrinsics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/attention_simd.h"

namespace ember::kernels::detail {

namespace {

constexpr int64_t kL = 16;  // lanes

inline __m512 widen(__m256 lo, __m256 hi) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}

// 16 values from element i of a row, as float32.
template <DType T>
inline __m512 load16(ElemRow<T>, const void* row, int64_t i) {
  if constexpr (T == DType::F32) {
    return _mm512_loadu_ps(static_cast<const float*>(row) + i);
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + i));
    if constexpr (T == DType::F16) return _mm512_cvtph_ps(h);
    else return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}
template <int64_t B>
inline __m512 load16(Q8Row<B>, const void* row, int64_t i) {
  if constexpr (B >= 16) {
    const auto* blk = static_cast<const uint8_t*>(row) + (i / B) * (B + 2);
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2 + i % B));
    uint16_t h;
    std::memcpy(&h, blk, 2);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), _mm512_set1_ps(_cvtsh_ss(h)));
  } else {
    return widen(attn_simd::load8(Q8Row<B>{}, row, i), attn_simd::load8(Q8Row<B>{}, row, i + 8));
  }
}
// 8 values from element i, the upper lanes zero (a head size's last half vector).
template <class R>
inline __m512 load8z(R, const void* row, int64_t i) {
  return widen(attn_simd::load8(R{}, row, i), _mm256_setzero_ps());
}
inline __m512 loadq8z(const float* q) { return widen(_mm256_loadu_ps(q), _mm256_setzero_ps()); }

// Lane 4m + r of the result is the sum of a[4m + r]'s lanes (16 sums in four shuffle levels).
inline __m512 sum_rows16(const __m512* a) {
  __m512 w[8], x[4];
  #pragma GCC unroll 8
  for (int m = 0; m < 8; ++m)  // per 128-bit block: (a0+a2, b0+b2, a1+a3, b1+b3)
    w[m] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * m], a[2 * m + 1]), _mm512_unpackhi_ps(a[2 * m], a[2 * m + 1]));
  #pragma GCC unroll 4
  for (int m = 0; m < 4; ++m)  // per block: one partial sum of each of four rows, in order
    x[m] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * m], w[2 * m + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(w[2 * m], w[2 * m + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 z0 = _mm512_add_ps(_mm512_shuffle_f32x4(x[0], x[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(x[0], x[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 z1 = _mm512_add_ps(_mm512_shuffle_f32x4(x[2], x[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(x[2], x[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(z0, z1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(z0, z1, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Scores of H query heads (rows q + h * hd) against the tile's keys, 16 / H keys a pass:
// e[h * kAttnTile + j] = (q_h . k_j) * scale, for j up to n rounded up to the pass (krow padded).
// Each pass fetches ahead (TileRows::prefetch_pass).
template <class R, int H>
void scores(const float* q, int64_t hd, const attn_simd::TileRows& t, float scale, float* e) {
  constexpr int K = kL / H;
  const int64_t hd16 = hd / kL * kL, n = t.n;
  const bool half = hd % kL != 0;
  const void* const* krow = t.krow;
  for (int64_t j0 = 0; j0 < n; j0 += K) {
    t.template prefetch_pass<K>(j0);
    __m512 a[kL];
    #pragma GCC unroll 16
    for (int r = 0; r < kL; ++r) a[r] = _mm512_setzero_ps();
    // Columns of the pass's K keys (load_k) times the H heads' (load_q) into the accumulators.
    auto add = [&](auto load_k, auto load_q) {
      __m512 kv[K];
      #pragma GCC unroll 16
      for (int k = 0; k < K; ++k) kv[k] = load_k(krow[j0 + k]);
      #pragma GCC unroll 4
      for (int h = 0; h < H; ++h) {
        const __m512 qv = load_q(q + h * hd);
        #pragma GCC unroll 16
        for (int k = 0; k < K; ++k) a[h * K + k] = _mm512_fmadd_ps(qv, kv[k], a[h * K + k]);
      }
    };
    for (int64_t i = 0; i < hd16; i += kL)
      add([&](const void* row) { return load16(R{}, row, i); }, [&](const float* qh) { return _mm512_loadu_ps(qh + i); });
    if (half)
      add([&](const void* row) { return load8z(R{}, row, hd16); }, [&](const float* qh) { return loadq8z(qh + hd16); });
    alignas(64) float s[kL];
    _mm512_store_ps(s, _mm512_mul_ps(sum_rows16(a), _mm512_set1_ps(scale)));
    #pragma GCC unroll 4
    for (int h = 0; h < H; ++h) std::memcpy(e + h * kAttnTile + j0, s + h * K, K * sizeof(float));
  }
}

// o_h += sum_j w_h[j] * v_j for H heads (o + h * hd, weights e + h * kAttnTile) over n value rows,
// CV vectors of columns from c a pass (H * CV accumulators in registers across the rows).
template <class R, int H, int CV>
inline void accumulate_cols(float* o, const float* e, const void* const* vrow, int64_t n, int64_t hd, int64_t c) {
  __m512 a[H * CV];
  #pragma GCC unroll 4
  for (int h = 0; h < H; ++h)
    #pragma GCC unroll 16
    for (int v = 0; v < CV; ++v) a[h * CV + v] = _mm512_loadu_ps(o + h * hd + c + v * kL);
  for (int64_t j = 0; j < n; ++j) {
    __m512 x[CV];
    #pragma GCC unroll 16
    for (int v = 0; v < CV; ++v) x[v] = load16(R{}, vrow[j], c + v * kL);
    #pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
      const __m512 w = _mm512_set1_ps(e[h * kAttnTile + j]);
      #pragma GCC unroll 16
      for (int v = 0; v < CV; ++v) a[h * CV + v] = _mm512_fmadd_ps(w, x[v], a[h * CV + v]);
    }
  }
  #pragma GCC unroll 4
  for (int h = 0; h < H; ++h)
    #pragma GCC unroll 16
    for (int v = 0; v < CV; ++v) _mm512_storeu_ps(o + h * hd + c + v * kL, a[h * CV + v]);
}

template <class R, int H>
void accumulate(float* o, const float* e, const void* const* vrow, int64_t n, int64_t hd) {
  constexpr int CV = kL / H;
  int64_t c = 0;
  for (; c + CV * kL <= hd; c += CV * kL) accumulate_cols<R, H, CV>(o, e, vrow, n, hd, c);
  if constexpr (CV >= 8) {
    if (c + 8 * kL <= hd) {
      accumulate_cols<R, H, 8>(o, e, vrow, n, hd, c);
      c += 8 * kL;
    }
  }
  if constexpr (CV >= 4) {
    if (c + 4 * kL <= hd) {
      accumulate_cols<R, H, 4>(o, e, vrow, n, hd, c);
      c += 4 * kL;
    }
  }
  if constexpr (CV >= 2) {
    if (c + 2 * kL <= hd) {
      accumulate_cols<R, H, 2>(o, e, vrow, n, hd, c);
      c += 2 * kL;
    }
  }
  if (c + kL <= hd) {
    accumulate_cols<R, H, 1>(o, e, vrow, n, hd, c);
    c += kL;
  }
  if (c < hd) {  // the last half vector (hd % 16 == 8)
    __m512 a[H];
    #pragma GCC unroll 4
    for (int h = 0; h < H; ++h) a[h] = _mm512_maskz_loadu_ps(0xFF, o + h * hd + c);
    for (int64_t j = 0; j < n; ++j) {
      const __m512 x = load8z(R{}, vrow[j], c);
      #pragma GCC unroll 4
      for (int h = 0; h < H; ++h) a[h] = _mm512_fmadd_ps(_mm512_set1_ps(e[h * kAttnTile + j]), x, a[h]);
    }
    #pragma GCC unroll 4
    for (int h = 0; h < H; ++h) _mm512_mask_storeu_ps(o + h * hd + c, 0xFF, a[h]);
  }
}

// attend_group_avx512 for keys and values read by R.
template <class R>
void attend_group(const float* q, int64_t pos, int64_t kvh, const KvView& kv, const AttentionShape& s, float* out,
                  float* sc, float* m, float* l) {
  const int64_t hd = s.head_dim;
  attn_simd::attend_group_tiles(q, pos, kvh, kv, s, out, m, l, kL, [&](const float* qg, float* og, const attn_simd::TileRows& rows) {
    const int64_t n = rows.n;
    // Heads in passes of 4, then 2, then 1: each key and value row is read once per pass.
    attn_simd::row_passes(s.n_heads / s.n_kv_heads, [&]<int H>(std::integral_constant<int, H>, int64_t g) {
      float* e = sc + g * kAttnTile;
      scores<R, H>(qg + g * hd, hd, rows, s.scale, e);
      for (int h = 0; h < H; ++h) {
        attn_simd::cap_scores(e + h * kAttnTile, n, s.softcap);
        attn_simd::softmax_tile(e + h * kAttnTile, n, og + (g + h) * hd, hd, m[g + h], l[g + h]);
      }
      accumulate<R, H>(og + g * hd, e, rows.vrow, n, hd);
    });
  });
}

}  // namespace

void attend_group_avx512(const float* q, int64_t pos, int64_t kvh, const KvView& kv, const AttentionShape& s,
                         float* out, float* sc, float* m, float* l) {
  if (s.head_dim % 8 != 0) {
    attend_group_avx2(q, pos, kvh, kv, s, out, sc, m, l);
    return;
  }
  with_row_reader(kv.type, s.head_dim, [&]<class R>(R) { attend_group<R>(q, pos, kvh, kv, s, out, sc, m, l); });
}

}  // namespace ember::kernels::detail
