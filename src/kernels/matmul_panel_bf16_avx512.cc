// AVX512-BF16 kernel of panel-packed BF16 weights (pack.h) whose activations are rounded to BF16
// (WeightMatrix::bf16_activations), for prefill: vdpbf16ps multiplies 16 rows x 2 columns per
// instruction, twice the float32 FMA's rate (bench/compute_peak). It gives the bits of the float32
// panel kernels fed the rounded activations: vdpbf16ps adds its odd word's exact product to the
// accumulator, rounds, then its even word's, and each lane here holds column c in the odd word and
// column c + 1 in the even one, so every output is the same fused multiply-add chain in column order.
// (Exact products and two round-to-nearest additions, as Intel specifies and Zen 4 does; inputs and
// results below float32's normal range are flushed to zero, which the FMA does not do: only outputs
// that pass through such tiny values differ.) Compiled with F, BW and BF16 (CMakeLists.txt); called
// only where cpu.cc found them. Decode streams the weights and runs the AVX2 kernel on the rounded
// activations: the same bits.
#include "kernels/avx512_intrinsics.h"

#include <algorithm>

#include "kernels/matmul_impl.h"
#include "kernels/pack.h"
#include "kernels/panel_tile_avx512.h"

namespace ember::kernels::detail {

namespace {

static_assert(kPanelRows == 16, "one zmm of float32 lanes holds a panel column");

// Register tile as the float32 AVX-512 kernel's (matmul_panel_avx512.cc): 3 panels x 9 tokens = 27
// accumulators, 3 weight vectors and the permutation of the 32 zmm registers. Column blocks of 256
// (kPanelActsBf16): 3 panels' block is 24 KiB of BF16, as the float32 kernel's 128 columns of float32
// (256 was 5% faster than 128 here, 512 no faster).
constexpr int kPanels = static_cast<int>(kPanelTile512);
constexpr int kTileTokens = static_cast<int>(kPanelActsBf16.tile_tokens);
constexpr int64_t kColBlock = kPanelActsBf16.col_block;
constexpr int64_t kTokens = kTokenBlock;
constexpr int64_t kPermuteTiles = 3;

// acc + the odd words' products, rounded, + the even words', rounded (lane by lane).
inline __m512 dot_pairs(__m512 acc, __m512i w, __m512i x) {
#if defined(EMBER_AVX512_EMULATED)
  return emulated::dpbf16_ps(acc, w, x);
#else
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh&>(w), reinterpret_cast<__m512bh&>(x));
#endif
}

// Lane r of a permuted pair of panel columns: row r of column c + 1 (even word) and of column c (odd
// word), from the two columns' 32 words as stored (rows interleaved r0 r8 r1 r9 ..., pack.h).
inline __m512i pair_permutation() {
  alignas(64) uint16_t idx[32];
  for (int r = 0; r < kPanelRows; ++r) {
    const auto slot = static_cast<uint16_t>(panel_slot(DType::BF16, r));
    idx[2 * r] = static_cast<uint16_t>(kPanelRows + slot);
    idx[2 * r + 1] = slot;
  }
  return _mm512_load_si512(idx);
}

// Where a tile's weight pairs come from: a block already permuted (wbuf), the panels permuted in the
// tile, or the panels permuted in the tile and kept in wbuf for the block's other tiles.
enum class Source { Permuted, Panels, PanelsKept };

// NP panels x NT tokens over `pairs` column pairs. w: panel 0 at the block's first column, panels
// pstride elements apart; xp: the tile's activation pairs pair by pair (xp[k * NT + t], as
// pack_panel_acts_bf16 lays them out); y and the masks as in the float32 kernel's tile. PanelsKept
// stores the permuted pairs at keep (panels kPanelRows * 2 * pairs apart).
template <Source S, int NP, int NT>
void tile(const uint16_t* w, int64_t pstride, const uint32_t* xp, int64_t pairs, float* y, int64_t ldy, bool add,
          __mmask16 last, __m512i perm, const BlockFetch& fetch, uint16_t* keep) {
  // Every loop over panels and tokens must unroll (GCC does not at -O2) or the accumulators live on the stack.
  __m512 acc[NP][NT];
  load_tile(acc, y, ldy, add, last);
  // (__attribute__: clang 14 reads [[gnu::always_inline]] in this place as a type's attribute.)
  auto step = [&](int64_t k) __attribute__((always_inline)) {
    __m512i wv[NP];
    #pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      wv[p] = _mm512_loadu_si512(w + p * pstride + 2 * k * kPanelRows);
      if constexpr (S != Source::Permuted) wv[p] = _mm512_permutexvar_epi16(perm, wv[p]);
      if constexpr (S == Source::PanelsKept) _mm512_store_si512(keep + (p * pairs + k) * 2 * kPanelRows, wv[p]);
    }
    #pragma GCC unroll 32
    for (int t = 0; t < NT; ++t) {
      const __m512i xb = _mm512_set1_epi32(static_cast<int>(xp[k * NT + t]));
      #pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) acc[p][t] = dot_pairs(acc[p][t], wv[p], xb);
    }
  };
  tile_steps<NP, NT>(pairs, fetch, y, ldy, step);
  store_tile(acc, y, ldy, last);
}

template <Source S, int NP, int NT>
void tile_n(int nt, const uint16_t* w, int64_t pstride, const uint32_t* xp, int64_t pairs, float* y, int64_t ldy,
            bool add, __mmask16 last, __m512i perm, const BlockFetch& fetch, uint16_t* keep) {
  if constexpr (NT > 1)
    if (nt < NT) return tile_n<S, NP, NT - 1>(nt, w, pstride, xp, pairs, y, ldy, add, last, perm, fetch, keep);
  tile<S, NP, NT>(w, pstride, xp, pairs, y, ldy, add, last, perm, fetch, keep);
}

template <Source S>
void panels_n(int np, int nt, const uint16_t* w, int64_t pstride, const uint32_t* xp, int64_t pairs, float* y,
              int64_t ldy, bool add, __mmask16 last, __m512i perm, const BlockFetch& fetch,
              uint16_t* keep = nullptr) {
  static_assert(kPanels == 3, "a case per panel count");
  if (np == 3) tile_n<S, 3, kTileTokens>(nt, w, pstride, xp, pairs, y, ldy, add, last, perm, fetch, keep);
  else if (np == 2) tile_n<S, 2, kTileTokens>(nt, w, pstride, xp, pairs, y, ldy, add, last, perm, fetch, keep);
  else tile_n<S, 1, kTileTokens>(nt, w, pstride, xp, pairs, y, ldy, add, last, perm, fetch, keep);
}

}  // namespace

void panel_rows_bf16_avx512(const WeightMatrix& w, const uint32_t* xp, int64_t n, float* y, int64_t g0, int64_t g1) {
  const int64_t K = w.cols, pstride = panel_stride(DType::BF16, K);
  const auto* base = static_cast<const uint16_t*>(w.data);
  const __m512i perm = pair_permutation();
  alignas(64) uint16_t wbuf[kPanels * kPanelRows * kColBlock];  // a block's panels permuted
  for (int64_t t0 = 0; t0 < n; t0 += kTokens) {
    const int64_t nt = std::min(kTokens, n - t0);
    int64_t start[kTokens + 1];
    const int64_t tiles = panel_tile_starts(nt, kTileTokens, start);
    // Column block k0 of the panels from g (up to kPanels of them) for every tile; returns how many.
    auto block = [&](int64_t k0, int64_t g) -> int64_t {
      const int64_t len = std::min(kColBlock, K - k0);
      const uint32_t* xb = xp + (t0 * K + nt * k0) / 2;  // this block's pairs (pack_panel_acts_bf16)
      const int np = static_cast<int>(std::min<int64_t>(kPanels, g1 - g));
      const __mmask16 last = last_panel_rows(w.rows, g, np);
      const uint16_t* wp = base + g * pstride + k0 * kPanelRows;
      // From kPermuteTiles tiles on, the first tile keeps the pairs it permutes for the others.
      const bool keep = tiles >= kPermuteTiles;
      // The next block, fetched by the tiles, as the float32 kernel does.
      const NextBlock next = tiles >= 2 ? next_panel_block(K, kColBlock, g0, g1, k0, g, np) : NextBlock{};
      for (int64_t i = 0; i < tiles; ++i) {
        const BlockFetch fetch = next_block_fetch(base, pstride, 2, next, i, tiles, len / 2);
        const int s = static_cast<int>(start[i + 1] - start[i]);
        float* yt = y + (t0 + start[i]) * w.rows + g * kPanelRows;
        const uint32_t* xt = xb + start[i] * len / 2;
        const bool add = k0 > 0;
        if (!keep) panels_n<Source::Panels>(np, s, wp, pstride, xt, len / 2, yt, w.rows, add, last, perm, fetch);
        else if (i == 0)
          panels_n<Source::PanelsKept>(np, s, wp, pstride, xt, len / 2, yt, w.rows, add, last, perm, fetch, wbuf);
        else panels_n<Source::Permuted>(np, s, wbuf, kPanelRows * len, xt, len / 2, yt, w.rows, add, last, perm, fetch);
      }
      return np;
    };
    for_each_panel_block(K, kColBlock, g0, g1, tiles, block);
  }
}

}  // namespace ember::kernels::detail
