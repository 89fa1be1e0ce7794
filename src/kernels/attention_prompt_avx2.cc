// AVX2 attention kernel of prompts, run on AVX2 and AVX-512 machines alike: a work unit is a few
// consecutive tokens' query heads of one kv head, eight query rows to a vector, so every tile of
// keys and values is read (and converted to float32) once for all of them and the scores come out
// as a small matrix product (rows in lanes, keys broadcast) rather than one reduction per score.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/attention_simd.h"
#include "kernels/exp.h"

namespace ember::kernels::detail {

namespace {

using attn_simd::cap_scores;
using attn_simd::load8;
using attn_simd::scale_row;
using simd::floor_lanes;
using simd::kLanes;

// Key and value rows of one tile as float32, `ld` floats apart: converted once per work unit and
// tile, then read by every query row of the unit.
template <class R>
void to_f32(const void* const* rows, int64_t n, int64_t hd, int64_t ld, float* dst) {
  const int64_t hd8 = floor_lanes(hd);
  for (int64_t j = 0; j < n; ++j) {
    float* d = dst + j * ld;
    int64_t i = 0;
    for (; i < hd8; i += kLanes) _mm256_storeu_ps(d + i, load8(R{}, rows[j], i));
    for (; i < hd; ++i) d[i] = R::load1(rows[j], i);
  }
}

// o_r += sum_j w_r[j * kLanes] * v_j for RB query rows over the tile's n value rows: the outputs
// stay in registers across the rows, 64 / RB columns at a time (eight independent chains). Each
// output is one chain over the rows in order, whatever RB is, so a query's result does not depend
// on which rows share its pass.
template <int RB>
inline void accumulate_rows(float* const* orow, const float* const* wr, const float* vf, int64_t ld, int64_t n,
                            int64_t hd) {
  constexpr int CV = kLanes / RB;  // vectors of columns per pass
  int64_t c = 0;
  for (; c + CV * kLanes <= hd; c += CV * kLanes) {
    __m256 a[kLanes];
    #pragma GCC unroll 4
    for (int r = 0; r < RB; ++r)
      #pragma GCC unroll 8
      for (int v = 0; v < CV; ++v) a[r * CV + v] = _mm256_loadu_ps(orow[r] + c + v * kLanes);
    for (int64_t j = 0; j < n; ++j) {
      __m256 x[CV];
      #pragma GCC unroll 8
      for (int v = 0; v < CV; ++v) x[v] = _mm256_loadu_ps(vf + j * ld + c + v * kLanes);
      #pragma GCC unroll 4
      for (int r = 0; r < RB; ++r) {
        const __m256 w = _mm256_broadcast_ss(wr[r] + j * kLanes);
        #pragma GCC unroll 8
        for (int v = 0; v < CV; ++v) a[r * CV + v] = _mm256_fmadd_ps(w, x[v], a[r * CV + v]);
      }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < RB; ++r)
      #pragma GCC unroll 8
      for (int v = 0; v < CV; ++v) _mm256_storeu_ps(orow[r] + c + v * kLanes, a[r * CV + v]);
  }
  for (; c + kLanes <= hd; c += kLanes)
    for (int r = 0; r < RB; ++r) {
      __m256 a = _mm256_loadu_ps(orow[r] + c);
      for (int64_t j = 0; j < n; ++j) a = _mm256_fmadd_ps(_mm256_broadcast_ss(wr[r] + j * kLanes), _mm256_loadu_ps(vf + j * ld + c), a);
      _mm256_storeu_ps(orow[r] + c, a);
    }
  for (; c < hd; ++c)
    for (int r = 0; r < RB; ++r) {
      float a = orow[r][c];
      for (int64_t j = 0; j < n; ++j) a = std::fma(wr[r][j * kLanes], vf[j * ld + c], a);
      orow[r][c] = a;
    }
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

// Scores of the 8 query rows in lanes (qt: their columns, 8 floats per column) against keys
// j0.. of the tile (keys past nk repeat the last; their scores are not read): st[j] gets key j's 8 scores. Each
// score is one chain over the columns in order, whatever shares its pass.
inline void score_lanes(const float* qt, const float* kf, int64_t ld, int64_t j0, int64_t nk, int64_t hd, float* st) {
  const float* kp[kLanes];
  #pragma GCC unroll 8
  for (int k = 0; k < kLanes; ++k) kp[k] = kf + std::min<int64_t>(j0 + k, nk - 1) * ld;
  __m256 a[kLanes];
  #pragma GCC unroll 8
  for (int k = 0; k < kLanes; ++k) a[k] = _mm256_setzero_ps();
  for (int64_t i = 0; i < hd; ++i) {
    const __m256 qv = _mm256_loadu_ps(qt + i * kLanes);
    #pragma GCC unroll 8
    for (int k = 0; k < kLanes; ++k) a[k] = _mm256_fmadd_ps(qv, _mm256_broadcast_ss(kp[k] + i), a[k]);
  }
  // All eight, also past nk (st has room up to the tile's next multiple of 8): a conditional store
  // would keep the accumulators in memory.
  #pragma GCC unroll 8
  for (int k = 0; k < kLanes; ++k) _mm256_storeu_ps(st + (j0 + k) * kLanes, a[k]);
}

// attend_block_avx2 for keys and values read by R. Rows r = t * group + g of the unit are query
// head g of kv head kvh at token t, eight to a lane group (lanes past the last row repeat it and are
// dropped). Tiles are aligned to multiples of kAttnTile positions and span what the unit's last
// token sees; a row's scores of keys it must not see are -inf (weight 0), and a row that sees none
// of a tile keeps its state. Each lane's operations are those of its row alone, so a row's result
// is the same whichever tokens share its unit (a prompt's, or a decode step's one).
template <class R>
void attend_block(const AttentionItem& it, int64_t t0, int64_t nt, int64_t kvh, const AttentionShape& s,
                  AttnScratch& w) {
  const int64_t hd = s.head_dim, group = s.n_heads / s.n_kv_heads, rows = nt * group, stride = s.n_heads * hd;
  const int64_t row_bytes = kv_row_bytes(it.kv.type, hd), first = it.first_pos + t0, last = first + nt - 1;
  const int64_t n_groups = (rows + kLanes - 1) / kLanes;
  float** orow = w.out_rows.data();
  alignas(__m256) int32_t pos[kLanes], lo[kLanes];
  for (int64_t r = 0; r < n_groups * kLanes; ++r) {
    const int64_t rr = std::min(r, rows - 1);
    const int64_t off = (t0 + rr / group) * stride + (kvh * group + rr % group) * hd;
    const float* q = it.q + off;
    float* qt = w.qt.data() + (r / kLanes) * hd * kLanes + r % kLanes;
    for (int64_t i = 0; i < hd; ++i) qt[i * kLanes] = q[i];
    if (r < rows) {
      orow[r] = it.out + off;
      std::fill(orow[r], orow[r] + hd, 0.0f);
    }
    w.m[static_cast<size_t>(r)] = -INFINITY;
    w.l[static_cast<size_t>(r)] = 0.0f;
  }
  const void* krow[kAttnTile];
  const void* vrow[kAttnTile];
  const __m256 minus_inf = _mm256_set1_ps(-INFINITY), scale = _mm256_set1_ps(s.scale);
  for (int64_t p0 = first_visible(first, s.sliding_window) / kAttnTile * kAttnTile; p0 <= last; p0 += kAttnTile) {
    const int64_t n = std::min(kAttnTile, last + 1 - p0);
    kv_rows(it.kv, kvh, row_bytes, p0, n, krow, vrow);
    to_f32<R>(krow, n, hd, hd, w.k.data());
    to_f32<R>(vrow, n, hd, hd, w.v.data());
    for (int64_t g = 0; g < n_groups; ++g) {
      float* st = w.scores.data();
      const float* qt = w.qt.data() + g * hd * kLanes;
      for (int64_t j0 = 0; j0 < n; j0 += kLanes) score_lanes(qt, w.k.data(), hd, j0, n, hd, st);
      for (int64_t lane = 0; lane < kLanes; ++lane) {
        const int64_t rr = std::min(g * kLanes + lane, rows - 1), p = first + rr / group;
        pos[lane] = static_cast<int32_t>(p - p0);
        lo[lane] = static_cast<int32_t>(first_visible(p, s.sliding_window) - p0);
      }
      const __m256i posv = _mm256_load_si256(reinterpret_cast<const __m256i*>(pos));
      const __m256i lov = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo));
      __m256 tmax = minus_inf;
      for (int64_t j = 0; j < n; ++j) {
        __m256 x = _mm256_mul_ps(_mm256_loadu_ps(st + j * kLanes), scale);
        if (s.softcap > 0) {
          alignas(__m256) float e[kLanes];
          _mm256_store_ps(e, x);
          cap_scores(e, kLanes, s.softcap);
          x = _mm256_load_ps(e);
        }
        const __m256i key = _mm256_set1_epi32(static_cast<int32_t>(j));
        const __m256i hidden = _mm256_or_si256(_mm256_cmpgt_epi32(key, posv), _mm256_cmpgt_epi32(lov, key));
        x = _mm256_blendv_ps(x, minus_inf, _mm256_castsi256_ps(hidden));
        _mm256_storeu_ps(st + j * kLanes, x);
        tmax = _mm256_max_ps(tmax, x);
      }
      // Online softmax, per lane: a higher maximum rescales what was accumulated under the old one.
      float* mg = w.m.data() + g * kLanes;
      float* lg = w.l.data() + g * kLanes;
      const __m256 m_old = _mm256_loadu_ps(mg);
      const __m256 grow = _mm256_cmp_ps(tmax, m_old, _CMP_GT_OQ);
      const __m256 m_new = _mm256_blendv_ps(m_old, tmax, grow);
      const __m256 rescale = _mm256_blendv_ps(_mm256_set1_ps(1.0f), exp8(_mm256_sub_ps(m_old, m_new)), grow);
      alignas(__m256) float rs[kLanes];
      _mm256_store_ps(rs, rescale);
      const int grew = _mm256_movemask_ps(grow);
      for (int64_t lane = 0; lane < kLanes && g * kLanes + lane < rows; ++lane)
        if (grew >> lane & 1) scale_row(orow[g * kLanes + lane], rs[lane], hd);
      __m256 sum = _mm256_setzero_ps();
      for (int64_t j = 0; j < n; ++j) {  // exp(-inf - m) and exp(NaN) (no key seen yet) are 0
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(st + j * kLanes), m_new));
        _mm256_storeu_ps(st + j * kLanes, e);
        sum = _mm256_add_ps(sum, e);
      }
      _mm256_storeu_ps(mg, m_new);
      _mm256_storeu_ps(lg, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(lg), rescale), sum));
      const float* wr[kLanes];
      for (int64_t lane = 0; lane < kLanes; ++lane) wr[lane] = st + lane;
      const int64_t real = std::min(kLanes, rows - g * kLanes);
      row_passes(real, [&]<int RB>(std::integral_constant<int, RB>, int64_t r0) {
        accumulate_rows<RB>(orow + g * kLanes + r0, wr + r0, w.v.data(), hd, n, hd);
      });
    }
  }
  for (int64_t r = 0; r < rows; ++r) scale_row(orow[r], 1.0f / w.l[static_cast<size_t>(r)], hd);
}

}  // namespace

void attend_block_avx2(const AttentionItem& it, int64_t t0, int64_t nt, int64_t kvh, const AttentionShape& s,
                       AttnScratch& w) {
  with_row_reader(it.kv.type, s.head_dim, [&]<class R>(R) { attend_block<R>(it, t0, nt, kvh, s, w); });
}

}  // namespace ember::kernels::detail
