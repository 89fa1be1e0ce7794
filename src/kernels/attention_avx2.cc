// AVX2 attention kernel of single query tokens (decode steps), with FMA and F16C, run on AVX2 and
// AVX-512 machines alike: each kv head's query heads in pairs share every key and value row read.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/attention_simd.h"
#include "kernels/exp.h"

namespace ember::kernels::detail {

namespace {

using attn_simd::cap_scores;
using attn_simd::load8;
using attn_simd::scale_row;
using attn_simd::softmax_tile;
using simd::ceil_lanes;
using simd::floor_lanes;
using simd::kLanes;

// Lane r of the result is the sum of a[r]'s eight lanes.
inline __m256 sum_rows8(const __m256* a) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);  // per 128-bit half
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// A score's columns [from, hd) (a head size that is not a multiple of 8) added to its vector part.
template <class R>
inline float score_rest(float sum, const float* q, const void* krow, int64_t from, int64_t hd) {
  for (int64_t i = from; i < hd; ++i) sum += q[i] * R::load1(krow, i);
  return sum;
}

// Scores of a tile's keys in passes of kKeys key rows: eight accumulators, `fma(a, j0, i)` adds
// columns [i, i + 8) of the pass starting at key j0, then one horizontal reduction serves all eight
// (one per score would cost more than the products); `emit(j0, s8, m)` takes the m valid sums. Each
// pass fetches ahead (TileRows::prefetch_pass).
template <int64_t kKeys, class Fma, class Emit>
inline void score_passes(const attn_simd::TileRows& t, int64_t hd8, Fma&& fma, Emit&& emit) {
  const int64_t n = t.n;
  for (int64_t j0 = 0; j0 < n; j0 += kKeys) {
    t.template prefetch_pass<kKeys>(j0);
    // The loops over the accumulators must unroll (GCC does not at -O2) or they live on the stack.
    __m256 a[kLanes];
    #pragma GCC unroll 8
    for (int r = 0; r < kLanes; ++r) a[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < hd8; i += kLanes) fma(a, j0, i);
    alignas(__m256) float s8[kLanes];
    _mm256_store_ps(s8, sum_rows8(a));
    emit(j0, s8, std::min<int64_t>(kKeys, n - j0));
  }
}

// out[j] = (q . k_j) * scale for the tile's key rows (padded to a multiple of 8), eight keys per
// pass.
template <class R>
void scores(const float* q, const attn_simd::TileRows& t, int64_t hd, float scale, float* out) {
  const int64_t hd8 = floor_lanes(hd);
  const void* const* krow = t.krow;
  score_passes<kLanes>(
      t, hd8,
      [&](__m256* a, int64_t j0, int64_t i) {
        const __m256 qv = _mm256_loadu_ps(q + i);
        #pragma GCC unroll 8
        for (int r = 0; r < kLanes; ++r) a[r] = _mm256_fmadd_ps(qv, load8(R{}, krow[j0 + r], i), a[r]);
      },
      [&](int64_t j0, const float* s8, int64_t m) {
        for (int64_t r = 0; r < m; ++r) out[j0 + r] = score_rest<R>(s8[r], q, krow[j0 + r], hd8, hd) * scale;
      });
}

// scores() for two query heads that share the key rows: each key vector is loaded once for both.
// Four keys x two heads per pass; lane 2r + h of the reduction is key r's score for head h.
template <class R>
void scores2(const float* q0, const float* q1, const attn_simd::TileRows& t, int64_t hd, float scale, float* out0,
             float* out1) {
  const int64_t hd8 = floor_lanes(hd);
  const void* const* krow = t.krow;
  score_passes<kLanes / 2>(
      t, hd8,
      [&](__m256* a, int64_t j0, int64_t i) {
        const __m256 qa = _mm256_loadu_ps(q0 + i), qb = _mm256_loadu_ps(q1 + i);
        #pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
          const __m256 kv = load8(R{}, krow[j0 + r], i);
          a[2 * r] = _mm256_fmadd_ps(qa, kv, a[2 * r]);
          a[2 * r + 1] = _mm256_fmadd_ps(qb, kv, a[2 * r + 1]);
        }
      },
      [&](int64_t j0, const float* s8, int64_t m) {
        for (int64_t r = 0; r < m; ++r) {
          out0[j0 + r] = score_rest<R>(s8[2 * r], q0, krow[j0 + r], hd8, hd) * scale;
          out1[j0 + r] = score_rest<R>(s8[2 * r + 1], q1, krow[j0 + r], hd8, hd) * scale;
        }
      });
}

// o += sum_j w[j] * v_j over the n value rows vrow[0..n) (columns from c0 on). The output stays in
// registers across the rows, 32 floats at a time, with even and odd rows in separate accumulators
// (eight independent chains keep both FMA units busy; four would wait on each other's latency).
template <class R>
void accumulate(float* o, const float* w, const void* const* vrow, int64_t n, int64_t hd, int64_t c0 = 0) {
  constexpr int64_t kChunk = 4 * kLanes;  // outputs held in registers
  int64_t i = 0;
  for (; i + kChunk <= hd; i += kChunk) {
    __m256 a0 = _mm256_loadu_ps(o + i), a1 = _mm256_loadu_ps(o + i + 8);
    __m256 a2 = _mm256_loadu_ps(o + i + 16), a3 = _mm256_loadu_ps(o + i + 24);
    __m256 b0 = _mm256_setzero_ps(), b1 = b0, b2 = b0, b3 = b0;
    int64_t j = 0;
    for (; j + 2 <= n; j += 2) {
      const __m256 wa = _mm256_set1_ps(w[j]), wb = _mm256_set1_ps(w[j + 1]);
      a0 = _mm256_fmadd_ps(wa, load8(R{}, vrow[j], c0 + i), a0);
      a1 = _mm256_fmadd_ps(wa, load8(R{}, vrow[j], c0 + i + 8), a1);
      a2 = _mm256_fmadd_ps(wa, load8(R{}, vrow[j], c0 + i + 16), a2);
      a3 = _mm256_fmadd_ps(wa, load8(R{}, vrow[j], c0 + i + 24), a3);
      b0 = _mm256_fmadd_ps(wb, load8(R{}, vrow[j + 1], c0 + i), b0);
      b1 = _mm256_fmadd_ps(wb, load8(R{}, vrow[j + 1], c0 + i + 8), b1);
      b2 = _mm256_fmadd_ps(wb, load8(R{}, vrow[j + 1], c0 + i + 16), b2);
      b3 = _mm256_fmadd_ps(wb, load8(R{}, vrow[j + 1], c0 + i + 24), b3);
    }
    if (j < n) {
      const __m256 wa = _mm256_set1_ps(w[j]);
      a0 = _mm256_fmadd_ps(wa, load8(R{}, vrow[j], c0 + i), a0);
      a1 = _mm256_fmadd_ps(wa, load8(R{}, vrow[j], c0 + i + 8), a1);
      a2 = _mm256_fmadd_ps(wa, load8(R{}, vrow[j], c0 + i + 16), a2);
      a3 = _mm256_fmadd_ps(wa, load8(R{}, vrow[j], c0 + i + 24), a3);
    }
    _mm256_storeu_ps(o + i, _mm256_add_ps(a0, b0));
    _mm256_storeu_ps(o + i + 8, _mm256_add_ps(a1, b1));
    _mm256_storeu_ps(o + i + 16, _mm256_add_ps(a2, b2));
    _mm256_storeu_ps(o + i + 24, _mm256_add_ps(a3, b3));
  }
  for (; i + kLanes <= hd; i += kLanes) {
    __m256 a = _mm256_loadu_ps(o + i);
    for (int64_t j = 0; j < n; ++j) a = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), load8(R{}, vrow[j], c0 + i), a);
    _mm256_storeu_ps(o + i, a);
  }
  for (; i < hd; ++i) {
    float a = o[i];
    for (int64_t j = 0; j < n; ++j) a += w[j] * R::load1(vrow[j], c0 + i);
    o[i] = a;
  }
}

// accumulate() for two heads sharing the value rows: o0 += sum_j w0[j] * v_j, o1 likewise with w1;
// each value vector is loaded once for both (16 floats of each output at a time: 4 chains per head).
template <class R>
void accumulate2(float* o0, float* o1, const float* w0, const float* w1, const void* const* vrow, int64_t n, int64_t hd) {
  constexpr int64_t kChunk = 2 * kLanes;  // outputs of each head held in registers
  int64_t i = 0;
  for (; i + kChunk <= hd; i += kChunk) {
    __m256 a0 = _mm256_loadu_ps(o0 + i), a1 = _mm256_loadu_ps(o0 + i + 8);
    __m256 b0 = _mm256_loadu_ps(o1 + i), b1 = _mm256_loadu_ps(o1 + i + 8);
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, d0 = c0, d1 = c0;
    // Row j into one set of chains: x for head 0, y for head 1.
    auto row = [&](int64_t j, __m256& x0, __m256& x1, __m256& y0, __m256& y1) {
      const __m256 wa = _mm256_set1_ps(w0[j]), wb = _mm256_set1_ps(w1[j]);
      const __m256 v0 = load8(R{}, vrow[j], i), v1 = load8(R{}, vrow[j], i + 8);
      x0 = _mm256_fmadd_ps(wa, v0, x0);
      x1 = _mm256_fmadd_ps(wa, v1, x1);
      y0 = _mm256_fmadd_ps(wb, v0, y0);
      y1 = _mm256_fmadd_ps(wb, v1, y1);
    };
    int64_t j = 0;
    for (; j + 2 <= n; j += 2) {  // even and odd rows in separate chains (latency)
      row(j, a0, a1, b0, b1);
      row(j + 1, c0, c1, d0, d1);
    }
    if (j < n) row(j, a0, a1, b0, b1);
    _mm256_storeu_ps(o0 + i, _mm256_add_ps(a0, c0));
    _mm256_storeu_ps(o0 + i + 8, _mm256_add_ps(a1, c1));
    _mm256_storeu_ps(o1 + i, _mm256_add_ps(b0, d0));
    _mm256_storeu_ps(o1 + i + 8, _mm256_add_ps(b1, d1));
  }
  if (i < hd) {  // the rest of the head, one output at a time
    accumulate<R>(o0 + i, w0, vrow, n, hd - i, i);
    accumulate<R>(o1 + i, w1, vrow, n, hd - i, i);
  }
}

// attend_group_avx2 for keys and values stored as T.
template <class R>
void attend_group(const float* q, int64_t pos, int64_t kvh, const KvView& kv, const AttentionShape& s, float* out,
                  float* sc, float* m, float* l) {
  const int64_t hd = s.head_dim, group = s.n_heads / s.n_kv_heads;
  attn_simd::attend_group_tiles(q, pos, kvh, kv, s, out, m, l, kLanes, [&](const float* qg, float* og,
                                                                        const attn_simd::TileRows& rows) {
    const int64_t n = rows.n;
    const void* const* vrow = rows.vrow;
    int64_t g = 0;
    for (; g + 2 <= group; g += 2) {  // heads in pairs: each key and value row is read once for both
      float *e0 = sc + g * kAttnTile, *e1 = e0 + kAttnTile;
      scores2<R>(qg + g * hd, qg + (g + 1) * hd, rows, hd, s.scale, e0, e1);
      cap_scores(e0, n, s.softcap);
      cap_scores(e1, n, s.softcap);
      softmax_tile(e0, n, og + g * hd, hd, m[g], l[g]);
      softmax_tile(e1, n, og + (g + 1) * hd, hd, m[g + 1], l[g + 1]);
      accumulate2<R>(og + g * hd, og + (g + 1) * hd, e0, e1, vrow, n, hd);
    }
    if (g < group) {
      float* e = sc + g * kAttnTile;
      scores<R>(qg + g * hd, rows, hd, s.scale, e);
      cap_scores(e, n, s.softcap);
      softmax_tile(e, n, og + g * hd, hd, m[g], l[g]);
      accumulate<R>(og + g * hd, e, vrow, n, hd);
    }
  });
}

}  // namespace

void attend_group_avx2(const float* q, int64_t pos, int64_t kvh, const KvView& kv, const AttentionShape& s, float* out,
                       float* sc, float* m, float* l) {
  with_row_reader(kv.type, s.head_dim, [&]<class R>(R) { attend_group<R>(q, pos, kvh, kv, s, out, sc, m, l); });
}

}  // namespace ember::kernels::detail
