#pragma once
// Internal: the prompt attention kernel over a vector type V (attention_prompt_avx2.cc: 8 lanes of
// __m256; attention_prompt_avx512.cc: 16 lanes of __m512). A work unit is a few consecutive tokens'
// query heads of one kv head, one query row per lane, so every tile of keys and values is read (and
// converted to float32) once for all of them and the scores come out as a small matrix product
// (rows in lanes, keys broadcast) rather than one reduction per score. Every lane's operations are
// those of its row alone and the same for either V, so both give the same bits.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/attention_simd.h"
#include "kernels/exp.h"

namespace ember::kernels::detail::prompt {
// Internal linkage, as attention_simd.h's (the two kernel files compile this with different sets).
namespace {

using attn_simd::cap_scores;
using attn_simd::row_passes;
using attn_simd::load8;
using attn_simd::scale_row;

// Key and value rows of one tile as float32, `ld` floats apart: converted once per work unit and
// tile, then read by every query row of the unit.
template <class R>
void to_f32(const void* const* rows, int64_t n, int64_t hd, int64_t ld, float* dst) {
  const int64_t hd8 = simd::floor_lanes(hd);
  for (int64_t j = 0; j < n; ++j) {
    float* d = dst + j * ld;
    int64_t i = 0;
    for (; i < hd8; i += simd::kLanes) _mm256_storeu_ps(d + i, load8(R{}, rows[j], i));
    for (; i < hd; ++i) d[i] = R::load1(rows[j], i);
  }
}

// o_r += sum_j w_r[j * V::kLanes] * v_j for RB query rows over the tile's n value rows: the outputs
// stay in registers across the rows, V::kAcc / RB vectors of columns at a time. Each output is one
// chain over the rows in order, whatever RB or V is.
template <class V, int RB>
inline void accumulate_rows(float* const* orow, const float* const* wr, const float* vf, int64_t ld, int64_t n,
                            int64_t hd) {
  using F = typename V::F;
  constexpr int64_t L = V::kLanes;
  constexpr int CV = V::kAcc / RB;  // vectors of columns per pass
  int64_t c = 0;
  for (; c + CV * L <= hd; c += CV * L) {
    F a[V::kAcc];
    #pragma GCC unroll 4
    for (int r = 0; r < RB; ++r)
      #pragma GCC unroll 16
      for (int v = 0; v < CV; ++v) a[r * CV + v] = V::load(orow[r] + c + v * L);
    for (int64_t j = 0; j < n; ++j) {
      F x[CV];
      #pragma GCC unroll 16
      for (int v = 0; v < CV; ++v) x[v] = V::load(vf + j * ld + c + v * L);
      #pragma GCC unroll 4
      for (int r = 0; r < RB; ++r) {
        const F w = V::bcast(wr[r] + j * L);
        #pragma GCC unroll 16
        for (int v = 0; v < CV; ++v) a[r * CV + v] = V::fma(w, x[v], a[r * CV + v]);
      }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < RB; ++r)
      #pragma GCC unroll 16
      for (int v = 0; v < CV; ++v) V::store(orow[r] + c + v * L, a[r * CV + v]);
  }
  for (; c + L <= hd; c += L)
    for (int r = 0; r < RB; ++r) {
      F a = V::load(orow[r] + c);
      for (int64_t j = 0; j < n; ++j) a = V::fma(V::bcast(wr[r] + j * L), V::load(vf + j * ld + c), a);
      V::store(orow[r] + c, a);
    }
  for (; c < hd; ++c)
    for (int r = 0; r < RB; ++r) {
      float a = orow[r][c];
      for (int64_t j = 0; j < n; ++j) a = std::fma(wr[r][j * L], vf[j * ld + c], a);
      orow[r][c] = a;
    }
}

// Scores of the V::kLanes query rows in lanes (qt: their columns, one vector per column) against
// keys j0 .. j0 + kKeys of the tile (keys past nk repeat the last; their scores are not read):
// st[j] gets key j's scores. Each score is one chain over the columns in order.
template <class V>
inline void score_lanes(const float* qt, const float* kf, int64_t ld, int64_t j0, int64_t nk, int64_t hd, float* st) {
  using F = typename V::F;
  constexpr int K = V::kKeys;
  const float* kp[K];
  #pragma GCC unroll 16
  for (int k = 0; k < K; ++k) kp[k] = kf + std::min<int64_t>(j0 + k, nk - 1) * ld;
  F a[K];
  #pragma GCC unroll 16
  for (int k = 0; k < K; ++k) a[k] = V::zero();
  for (int64_t i = 0; i < hd; ++i) {
    const F qv = V::load(qt + i * V::kLanes);
    #pragma GCC unroll 16
    for (int k = 0; k < K; ++k) a[k] = V::fma(qv, V::bcast(kp[k] + i), a[k]);
  }
  // All K, also past nk (st has room up to the tile's next multiple of K): a conditional store
  // would keep the accumulators in memory.
  #pragma GCC unroll 16
  for (int k = 0; k < K; ++k) V::store(st + (j0 + k) * V::kLanes, a[k]);
}

// Tokens [t0, t0 + nt) of `it` for kv head kvh, keys and values read by R. Rows r = t * group + g
// of the unit are query head g of kv head kvh at token t, V::kLanes to a lane group (lanes past the
// last row repeat it and are dropped). Tiles are aligned to multiples of kAttnTile positions and
// span what the unit's last token sees; a row's scores of keys it must not see are -inf (weight 0),
// and a row that sees none of a tile keeps its state. So a row's result is the same whichever
// tokens share its unit.
template <class V, class R>
void attend_block(const AttentionItem& it, int64_t t0, int64_t nt, int64_t kvh, const AttentionShape& s,
                  AttnScratch& w) {
  using F = typename V::F;
  constexpr int64_t L = V::kLanes;
  const int64_t hd = s.head_dim, group = s.n_heads / s.n_kv_heads, rows = nt * group, stride = s.n_heads * hd;
  const int64_t row_bytes = kv_row_bytes(it.kv.type, hd), first = it.first_pos + t0, last = first + nt - 1;
  const int64_t n_groups = (rows + L - 1) / L;
  float** orow = w.out_rows.data();
  alignas(64) int32_t pos[L], lo[L];
  for (int64_t r = 0; r < n_groups * L; ++r) {
    const int64_t rr = std::min(r, rows - 1);
    const int64_t off = (t0 + rr / group) * stride + (kvh * group + rr % group) * hd;
    const float* q = it.q + off;
    float* qt = w.qt.data() + (r / L) * hd * L + r % L;
    for (int64_t i = 0; i < hd; ++i) qt[i * L] = q[i];
    if (r < rows) {
      orow[r] = it.out + off;
      std::fill(orow[r], orow[r] + hd, 0.0f);
    }
    w.m[static_cast<size_t>(r)] = -INFINITY;
    w.l[static_cast<size_t>(r)] = 0.0f;
  }
  const void* krow[kAttnTile];
  const void* vrow[kAttnTile];
  const F minus_inf = V::set1(-INFINITY), scale = V::set1(s.scale);
  for (int64_t p0 = first_visible(first, s.sliding_window) / kAttnTile * kAttnTile; p0 <= last; p0 += kAttnTile) {
    const int64_t n = std::min(kAttnTile, last + 1 - p0);
    kv_rows(it.kv, kvh, row_bytes, p0, n, krow, vrow);
    to_f32<R>(krow, n, hd, hd, w.k.data());
    to_f32<R>(vrow, n, hd, hd, w.v.data());
    for (int64_t g = 0; g < n_groups; ++g) {
      float* st = w.scores.data();
      const float* qt = w.qt.data() + g * hd * L;
      for (int64_t j0 = 0; j0 < n; j0 += V::kKeys) score_lanes<V>(qt, w.k.data(), hd, j0, n, hd, st);
      for (int64_t lane = 0; lane < L; ++lane) {
        const int64_t rr = std::min(g * L + lane, rows - 1), p = first + rr / group;
        pos[lane] = static_cast<int32_t>(p - p0);
        lo[lane] = static_cast<int32_t>(first_visible(p, s.sliding_window) - p0);
      }
      const typename V::I posv = V::load_i(pos), lov = V::load_i(lo);
      F tmax = minus_inf;
      for (int64_t j = 0; j < n; ++j) {
        F x = V::mul(V::load(st + j * L), scale);
        if (s.softcap > 0) {
          alignas(64) float e[L];
          V::store(e, x);
          cap_scores(e, L, s.softcap);
          x = V::load(e);
        }
        x = V::hide(x, minus_inf, static_cast<int32_t>(j), posv, lov);
        V::store(st + j * L, x);
        tmax = V::max(tmax, x);
      }
      // Online softmax, per lane: a higher maximum rescales what was accumulated under the old one.
      float* mg = w.m.data() + g * L;
      float* lg = w.l.data() + g * L;
      const F m_old = V::load(mg);
      const auto grow = V::gt(tmax, m_old);
      const F m_new = V::select(grow, tmax, m_old);
      const F rescale = V::select(grow, V::exp(V::sub(m_old, m_new)), V::set1(1.0f));
      alignas(64) float rs[L];
      V::store(rs, rescale);
      const uint32_t grew = V::bits(grow);
      for (int64_t lane = 0; lane < L && g * L + lane < rows; ++lane)
        if (grew >> lane & 1) scale_row(orow[g * L + lane], rs[lane], hd);
      F sum = V::zero();
      for (int64_t j = 0; j < n; ++j) {  // exp(-inf - m) and exp(NaN) (no key seen yet) are 0
        const F e = V::exp(V::sub(V::load(st + j * L), m_new));
        V::store(st + j * L, e);
        sum = V::add(sum, e);
      }
      V::store(mg, m_new);
      V::store(lg, V::add(V::mul(V::load(lg), rescale), sum));
      const float* wr[L];
      for (int64_t lane = 0; lane < L; ++lane) wr[lane] = st + lane;
      const int64_t real = std::min(L, rows - g * L);
      row_passes(real, [&]<int RB>(std::integral_constant<int, RB>, int64_t r0) {
        accumulate_rows<V, RB>(orow + g * L + r0, wr + r0, w.v.data(), hd, n, hd);
      });
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    scale_row(orow[r], row_normaliser(s, kvh * group + r % group, w.m[static_cast<size_t>(r)], w.l[static_cast<size_t>(r)]), hd);
}

}  // namespace
}  // namespace ember::kernels::detail::prompt
