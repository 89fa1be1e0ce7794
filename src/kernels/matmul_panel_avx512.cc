// AVX-512 kernels of panel-packed plain weights (F32/F16/BF16, pack.h): a panel column of 16 rows is
// one zmm of floats. In prefill a register tile holds more tokens than the AVX2 kernel's and the two
// 512-bit FMA ports stay busy; the activations come transposed (pack_panel_acts, kPanelActsAvx512)
// once per product: every chunk of panels reuses them. Decode of one token streams more panels at
// once than the AVX2 kernel can hold; two tokens run the AVX2 kernel. All give the same bits. Only
// AVX512F is used (CMakeLists.txt); it is called only where cpu.cc found the Avx512 set.
#include "kernels/avx512_intrinsics.h"

#include <algorithm>

#include "kernels/matmul_impl.h"
#include "kernels/pack.h"
#include "kernels/panel_tile_avx512.h"

namespace ember::kernels::detail {

namespace {

static_assert(kPanelRows == 16, "one zmm of float32 lanes holds a panel column");

// Register tile: 3 panels x 9 tokens = 27 accumulators, 3 weight vectors and a broadcast of the 32
// zmm registers. Measured on a 2-core Xeon (kernels_bench, 16 and 64 tokens): 2 x 14, 4 x 6 and 5 x 5
// were within noise at 64 tokens and slower at 16; 6 x 4 was much slower.
constexpr int kPanels = static_cast<int>(kPanelTile512);
constexpr int kTileTokens = 9;
// Columns per block: 3 panels' block as float32 (24 KiB) and a tile's activations stay in L1 while
// every token tile of a block reuses them (256 was no faster, 64 slower).
constexpr int64_t kColBlock = 128;
constexpr int64_t kTokens = kTokenBlock;  // tokens per block: their activations stay in L2
// From this many token tiles on, 16-bit weights are converted once per block into a float32 buffer,
// by the first tile, rather than by every tile (at 2 tiles, 16 tokens, converting in the tiles was
// faster).
constexpr int64_t kExpandTiles = 3;

// 16 weights (one panel column) from element i, as float32 in row order (BF16's halves are
// interleaved, pack.h: shifted, the words give rows 0-7; cleared low halves, rows 8-15).
template <DType T>
inline __m512 load16(const void* base, int64_t i) {
  if constexpr (T == DType::F32) return _mm512_loadu_ps(static_cast<const float*>(base) + i);
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + i));
  if constexpr (T == DType::F16) return _mm512_cvtph_ps(h);
  const __m256i lo = _mm256_slli_epi32(h, 16), hi = _mm256_and_si256(h, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u)));
  return _mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
}

// NP panels x NT tokens over `len` columns. w: panel 0 at the block's first column, panels pstride
// elements apart; xp: the tile's activations column by column (xp[k * NT + t]), so every broadcast
// has a constant offset; y[t * ldy + p * 16 + r], rows of the last panel outside `last` neither read
// nor written. The sum order is prefill_tile's in matmul_avx2.cc: one fused multiply-add chain per
// output in column order, from zero or (add) from the exact float y holds, so the bits are the AVX2
// kernel's whatever the tile shape or blocking.
template <DType T, int NP, int NT, bool Keep = false>
void tile(const void* w, int64_t pstride, const float* xp, int64_t len, float* y, int64_t ldy, bool add,
          __mmask16 last, const BlockFetch& fetch = {}, float* keep = nullptr) {
  // Every loop over panels and tokens must unroll (GCC does not at -O2) or the accumulators live on the stack.
  __m512 acc[NP][NT];
  load_tile(acc, y, ldy, add, last);
  // (__attribute__: clang 14 reads [[gnu::always_inline]] in this place as a type's attribute.)
  auto step = [&](int64_t k) __attribute__((always_inline)) {
    __m512 wv[NP];
    #pragma GCC unroll 16
    for (int p = 0; p < NP; ++p) {
      wv[p] = load16<T>(w, p * pstride + k * kPanelRows);
      if constexpr (Keep) _mm512_store_ps(keep + (p * len + k) * kPanelRows, wv[p]);
    }
    #pragma GCC unroll 32
    for (int t = 0; t < NT; ++t) {
      const __m512 xb = _mm512_set1_ps(xp[k * NT + t]);
      #pragma GCC unroll 16
      for (int p = 0; p < NP; ++p) acc[p][t] = _mm512_fmadd_ps(wv[p], xb, acc[p][t]);
    }
  };
  tile_steps<NP, NT>(len, fetch, y, ldy, step);
  store_tile(acc, y, ldy, last);
}

// tile<T, NP, nt, Keep> with nt <= NT chosen at run time.
template <DType T, int NP, int NT, bool Keep>
void tile_n(int nt, const void* w, int64_t pstride, const float* xp, int64_t len, float* y, int64_t ldy, bool add,
            __mmask16 last, const BlockFetch& fetch, float* keep) {
  if constexpr (NT > 1)
    if (nt < NT) return tile_n<T, NP, NT - 1, Keep>(nt, w, pstride, xp, len, y, ldy, add, last, fetch, keep);
  tile<T, NP, NT, Keep>(w, pstride, xp, len, y, ldy, add, last, fetch, keep);
}

// tile_n<T, np, kTileTokens, Keep> with np <= kPanels chosen at run time (a chunk's last 1 or 2
// panels). Keep: the tile also stores its weights as float32 at keep (panels kPanelRows * len apart)
// for the block's other tiles.
template <DType T, bool Keep = false>
void panels_n(int np, int nt, const void* w, int64_t pstride, const float* xp, int64_t len, float* y, int64_t ldy,
              bool add, __mmask16 last, const BlockFetch& fetch, float* keep = nullptr) {
  static_assert(kPanels == 3, "a case per panel count");
  if (np == 3) tile_n<T, 3, kTileTokens, Keep>(nt, w, pstride, xp, len, y, ldy, add, last, fetch, keep);
  else if (np == 2) tile_n<T, 2, kTileTokens, Keep>(nt, w, pstride, xp, len, y, ldy, add, last, fetch, keep);
  else tile_n<T, 1, kTileTokens, Keep>(nt, w, pstride, xp, len, y, ldy, add, last, fetch, keep);
}

template <DType T>
void panel_rows(const WeightMatrix& w, const float* xp, int64_t n, float* y, int64_t g0, int64_t g1) {
  const int64_t K = w.cols, pstride = panel_stride(T, K), es = static_cast<int64_t>(dtype_size(T));
  const auto* base = static_cast<const uint8_t*>(w.data);
  // NP panels' weights of a column block as float32.
  alignas(64) float wbuf[kPanels * kPanelRows * kColBlock];
  for (int64_t t0 = 0; t0 < n; t0 += kTokens) {
    const int64_t nt = std::min(kTokens, n - t0);
    int64_t start[kTokens + 1];
    const int64_t tiles = panel_tile_starts(nt, kTileTokens, start);
    // The first tile converts 16-bit weights for the others (kExpandTiles).
    const bool expand = T != DType::F32 && tiles >= kExpandTiles;
    // Column block k0 of the panels from g (up to kPanels of them) for every tile; returns how many.
    auto block = [&](int64_t k0, int64_t g) -> int64_t {
      const int64_t len = std::min(kColBlock, K - k0);
      const float* xb = xp + t0 * K + nt * k0;  // this block's packed activations (pack_panel_acts)
      const int np = static_cast<int>(std::min<int64_t>(kPanels, g1 - g));
      const __mmask16 last = last_panel_rows(w.rows, g, np);
      const void* wp = base + (g * pstride + k0 * kPanelRows) * es;
      // The next block, fetched by the tiles.
      const NextBlock next = tiles >= 2 ? next_panel_block(K, kColBlock, g0, g1, k0, g, np) : NextBlock{};
      for (int64_t i = 0; i < tiles; ++i) {
        const BlockFetch fetch = next_block_fetch(base, pstride, es, next, i, tiles, len);
        const int s = static_cast<int>(start[i + 1] - start[i]);
        float* yt = y + (t0 + start[i]) * w.rows + g * kPanelRows;
        const float* xt = xb + start[i] * len;
        const bool add = k0 > 0;
        if (!expand) panels_n<T>(np, s, wp, pstride, xt, len, yt, w.rows, add, last, fetch);
        else if (i == 0) panels_n<T, true>(np, s, wp, pstride, xt, len, yt, w.rows, add, last, fetch, wbuf);
        else panels_n<DType::F32>(np, s, wbuf, kPanelRows * len, xt, len, yt, w.rows, add, last, fetch);
      }
      return np;
    };
    for_each_panel_block(K, kColBlock, g0, g1, tiles, block);
  }
}

// Decode of one token: up to kDecodePanels panels read side by side, each one stream of its 16 rows'
// columns (same bits as every tile). One core reaches the memory bandwidth only with enough streams
// in flight: 12 panels read what the bandwidth probe does, where the AVX2 kernel's 4 read 84-88% of it
// (Zen 4, one thread, 256 MiB of bf16 as 2048 or 8192 columns; 8 and 16 panels, a power of two, read
// less, as panels a power of two apart do: pack.h's gap).
constexpr int kDecodePanels = 12;

// The prefill tile of NP <= N panels (chosen at run time: a range's last ones) x one token over all
// columns: one token's packed activations are x itself.
template <DType T, int N>
void decode_tile_n(int np, const void* w, int64_t pstride, const float* x, int64_t K, float* y, __mmask16 last) {
  if constexpr (N > 1)
    if (np < N) return decode_tile_n<T, N - 1>(np, w, pstride, x, K, y, last);
  tile<T, N, 1>(w, pstride, x, K, y, 0, false, last);
}

template <DType T>
void decode_rows(const WeightMatrix& w, const float* x, float* y, int64_t g0, int64_t g1) {
  const int64_t K = w.cols, pstride = panel_stride(T, K), es = static_cast<int64_t>(dtype_size(T));
  const auto* base = static_cast<const uint8_t*>(w.data);
  for (int64_t g = g0; g < g1; g += kDecodePanels) {
    const int np = static_cast<int>(std::min<int64_t>(kDecodePanels, g1 - g));
    decode_tile_n<T, kDecodePanels>(np, base + g * pstride * es, pstride, x, K, y + g * kPanelRows,
                                    last_panel_rows(w.rows, g, np));
  }
}

}  // namespace

void panel_rows_avx512(const WeightMatrix& w, const float* x, const float* xp, int64_t n, float* y, int64_t g0,
                       int64_t g1) {
  if (n == 1) {
    switch (w.dtype) {
      case DType::F32: decode_rows<DType::F32>(w, x, y, g0, g1); break;
      case DType::F16: decode_rows<DType::F16>(w, x, y, g0, g1); break;
      case DType::BF16: decode_rows<DType::BF16>(w, x, y, g0, g1); break;
    }
    return;
  }
  if (n <= kDecodeTokens) {
    panel_rows_avx2(w, x, nullptr, n, y, g0, g1);
    return;
  }
  switch (w.dtype) {
    case DType::F32: panel_rows<DType::F32>(w, xp, n, y, g0, g1); break;
    case DType::F16: panel_rows<DType::F16>(w, xp, n, y, g0, g1); break;
    case DType::BF16: panel_rows<DType::BF16>(w, xp, n, y, g0, g1); break;
  }
}

}  // namespace ember::kernels::detail
