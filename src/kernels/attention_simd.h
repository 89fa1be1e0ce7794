#pragma once
// Internal: what the attention kernels (attention_avx2.cc and attention_decode_avx512.cc for single
// tokens, attention_prompt.h for prompts) share: row readers' vector loads and per-row helpers.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/attention_impl.h"
#include "kernels/exp.h"
#include "kernels/simd_avx2.h"

namespace ember::kernels::detail::attn_simd {
// Internal linkage: the AVX2 and AVX-512 files compile these with different instruction sets, and one
// weak copy of an inline function would serve both (an AVX-512 one on an AVX2 machine).
namespace {

// 8 values from element i of a row, as float32.
template <DType T>
inline __m256 load8(ElemRow<T>, const void* row, int64_t i) {
  return simd::load8<T>(row, i);
}
template <int64_t B>
inline __m256 load8(Q8Row<B>, const void* row, int64_t i) {
  const auto* blk = static_cast<const uint8_t*>(row) + (i / B) * (B + 2);
  const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2 + i % B));
  const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
  uint16_t h;
  std::memcpy(&h, blk, 2);
  return _mm256_mul_ps(v, _mm256_set1_ps(_cvtsh_ss(h)));
}

// Keys ahead whose rows a decode kernel fetches while scoring: a kv head's rows of one 16-position
// cache block lie apart from the next block's, where the hardware prefetcher does not follow.
constexpr int64_t kPrefetchKeys = 16;

// (An asm statement, not _mm_prefetch: GCC 12 deletes a loop of _mm_prefetch inside another loop as
// if it did nothing.)
inline void prefetch_row(const void* row, int64_t bytes) {
  const char* p = static_cast<const char*>(row);
  for (int64_t b = 0; b < bytes; b += 64) asm volatile("prefetcht0 %0" : : "m"(p[b]));
}

// The rows of one tile of a decode step's positions: n keys and values, and the next tile's first
// keys (nn of them).
struct TileRows {
  const void* const* krow;
  const void* const* vrow;
  int64_t n;
  const void* const* knext;
  int64_t nn;
  int64_t row_bytes;

  // For a scoring pass over keys [j0, j0 + K): fetches the keys kPrefetchKeys ahead (into the next
  // tile) and the pass's value rows, which the weighted sum reads after the tile's scores.
  template <int K>
  void prefetch_pass(int64_t j0) const {
    #pragma GCC unroll 16
    for (int k = 0; k < K; ++k) {
      const int64_t j = j0 + kPrefetchKeys + k;
      if (j < n) prefetch_row(krow[j], row_bytes);
      else if (j - n < nn) prefetch_row(knext[j - n], row_bytes);
      if (j0 + k < n) prefetch_row(vrow[j0 + k], row_bytes);
    }
  }
};

// f(rows) for each tile of kAttnTile positions of kv head kvh from lo to pos, its key rows padded
// with the last to a multiple of pad (scored, then dropped); each tile's row pointers are found while
// the previous tile is processed, so that scoring can fetch across.
template <class F>
void for_each_tile(const KvView& kv, int64_t kvh, int64_t row_bytes, int64_t lo, int64_t pos, int64_t pad, F&& f) {
  const void* kbuf[2][kAttnTile];
  const void* vbuf[2][kAttnTile];
  int cur = 0;
  kv_rows(kv, kvh, row_bytes, lo, std::min(kAttnTile, pos + 1 - lo), kbuf[0], vbuf[0]);
  for (int64_t p0 = lo; p0 <= pos; p0 += kAttnTile, cur = 1 - cur) {
    const int64_t n = std::min(kAttnTile, pos + 1 - p0);
    const int64_t nn = std::clamp<int64_t>(pos + 1 - (p0 + kAttnTile), 0, kAttnTile);
    if (nn > 0) kv_rows(kv, kvh, row_bytes, p0 + kAttnTile, nn, kbuf[1 - cur], vbuf[1 - cur]);
    for (int64_t j = n; j < (n + pad - 1) / pad * pad; ++j) kbuf[cur][j] = kbuf[cur][n - 1];
    f(TileRows{kbuf[cur], vbuf[cur], n, kbuf[1 - cur], nn, row_bytes});
  }
}

inline void scale_row(float* x, float r, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= r;
}

// f(RB, first row) over `rows` rows in passes of 4, then 2, then 1.
template <class F>
inline void row_passes(int64_t rows, F&& f) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) f(std::integral_constant<int, 4>{}, r);
  if (r + 2 <= rows) {
    f(std::integral_constant<int, 2>{}, r);
    r += 2;
  }
  if (r < rows) f(std::integral_constant<int, 1>{}, r);
}

// A decode step's query heads of kv head kvh, what both decode kernels share: the group's query rows
// qg and output rows og (zeroed), running maxima m and sums l reset, tile(qg, og, rows) per tile of
// positions (key rows padded to a multiple of pad), then each head's row normalised.
template <class Tile>
void attend_group_tiles(const float* q, int64_t pos, int64_t kvh, const KvView& kv, const AttentionShape& s,
                        float* out, float* m, float* l, int64_t pad, Tile&& tile) {
  const int64_t hd = s.head_dim, group = s.n_heads / s.n_kv_heads;
  const float* qg = q + kvh * group * hd;
  float* og = out + kvh * group * hd;
  std::fill(og, og + group * hd, 0.0f);
  std::fill(m, m + group, -INFINITY);
  std::fill(l, l + group, 0.0f);
  for_each_tile(kv, kvh, kv_row_bytes(kv.type, hd), first_visible(pos, s.sliding_window), pos, pad,
                [&](const TileRows& rows) { tile(qg, og, rows); });
  for (int64_t g = 0; g < group; ++g) scale_row(og + g * hd, row_normaliser(s, kvh * group + g, m[g], l[g]), hd);
}

// Soft-capping of a tile's scores (the scalar kernel does the same per score).
inline void cap_scores(float* e, int64_t n, float cap) {
  if (cap > 0)
    for (int64_t j = 0; j < n; ++j) e[j] = std::tanh(e[j] / cap) * cap;
}


// Online softmax over one tile of scores e[0..n) (e has room for n rounded up to 8): raises the
// running maximum m (rescaling o and the running sum l), then turns e into weights and adds them
// to l.
inline void softmax_tile(float* e, int64_t n, float* o, int64_t hd, float& m, float& l) {
  const int64_t n8 = simd::ceil_lanes(n);
  std::fill(e + n, e + n8, -INFINITY);  // exp(-inf) is 0
  __m256 mx = _mm256_set1_ps(-INFINITY);
  for (int64_t j = 0; j < n8; j += simd::kLanes) mx = _mm256_max_ps(mx, _mm256_loadu_ps(e + j));
  alignas(__m256) float lanes[simd::kLanes];
  _mm256_store_ps(lanes, mx);
  const float tmax = *std::max_element(lanes, lanes + simd::kLanes);
  if (tmax > m) {  // rescale what was accumulated under the old maximum
    const float r = exp_det(m - tmax);
    scale_row(o, r, hd);
    l *= r;
    m = tmax;
  }
  const __m256 mv = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();
  for (int64_t j = 0; j < n8; j += simd::kLanes) {
    const __m256 w = exp8(_mm256_sub_ps(_mm256_loadu_ps(e + j), mv));
    _mm256_storeu_ps(e + j, w);
    sum = _mm256_add_ps(sum, w);
  }
  _mm256_store_ps(lanes, sum);
  l += ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

}  // namespace
}  // namespace ember::kernels::detail::attn_simd
