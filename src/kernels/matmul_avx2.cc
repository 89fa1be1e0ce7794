// AVX2 kernels (with FMA and F16C): panel-packed plain weights (decode everywhere, prefill where
// AVX-512 is missing: matmul_panel_avx512.cc gives the same bits), and quantized weights where
// AVX-512 is missing.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>

#include "kernels/matmul_impl.h"
#include "kernels/pack.h"
#include "kernels/simd_avx2.h"

namespace ember::kernels::detail {

namespace {

using simd::kLanes;
using simd::load8;

constexpr int kPanelHalves = kPanelRows / kLanes;  // vectors per panel column
static_assert(kPanelHalves == 2, "the panel tiles below hold a panel column in two vectors");

// Units [g0, g1) (panels, quantized groups) as two streams half the range apart: pair(g0 + i,
// g0 + half + i) in order, then lone(g1 - 1) when the count is odd. One sequential stream per core
// does not reach the memory bandwidth (kernels_bench BM_DecodeStream, Zen 3).
template <class Pair, class Lone>
void in_two_streams(int64_t g0, int64_t g1, Pair&& pair, Lone&& lone) {
  const int64_t half = (g1 - g0) / 2;
  for (int64_t i = 0; i < half; ++i) pair(g0 + i, g0 + half + i);
  if ((g1 - g0) % 2) lone(g1 - 1);
}

// The panel column at element e as float32: rows 0-7 and 8-15 (BF16's interleaved halves, pack.h).
template <DType T>
inline void load_column(const void* w, int64_t e, __m256& lo, __m256& hi) {
  if constexpr (T == DType::BF16) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(w) + e));
    lo = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    hi = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
  } else {
    lo = load8<T>(w, e);
    hi = load8<T>(w, e + kLanes);
  }
}

// A few tokens' pass streams its panels from memory with little arithmetic per byte: the column at
// element e (as load_column reads it) fetches the line kPrefetchAhead bytes further along its panel
// into L1 (pages are 4 KiB, where the hardware prefetcher stops). 1 KiB measured best of 0.5-4 KiB (kernels_bench BM_DecodeStream, Zen 3,
// F16 at one thread: 3 tokens 18 -> 15.5 ms, 4 tokens 30 -> 22, 8 tokens 44 -> 33). A prefetch past
// the matrix's end does not fault.
constexpr int64_t kPrefetchAhead = 1024;

template <DType T>
inline void prefetch_ahead(const void* w, int64_t e) {
  _mm_prefetch(static_cast<const char*>(w) + e * static_cast<int64_t>(dtype_size(T)) + kPrefetchAhead, _MM_HINT_T0);
}

// Decode: NP panels x NT tokens (one or two) over all columns of panel-packed weights (pack.h).
// Each output is one fused multiply-add chain in column order from zero, as in prefill_tile, so the
// tile shape changes no result. y[t * ldy + i] is row i of the first panel.
template <DType T, int NP, int NT>
void decode_tile(const void* w, int64_t pstride, const float* x, int64_t ldx, int64_t K, float* y, int64_t ldy) {
  // The loops over NP, halves and NT must unroll (GCC does not at -O2) or the accumulators live on the stack.
  __m256 acc[NP][kPanelHalves][NT];
  #pragma GCC unroll 4
  for (int p = 0; p < NP; ++p)
    #pragma GCC unroll 2
    for (int h = 0; h < kPanelHalves; ++h)
      #pragma GCC unroll 2
      for (int t = 0; t < NT; ++t) acc[p][h][t] = _mm256_setzero_ps();
  // One token: no software prefetch (the NP panels are NP streams the hardware prefetchers follow,
  // and fetching 2 KiB ahead of each made decode 10-15% slower from memory). Two tokens (two panels):
  // each fetches 1 KiB ahead, as the few-token prefill tiles do (256 MiB of F16 at one thread 18.2 ->
  // 16.1 ms, two threads 11.4 -> 10.6; kernels_bench BM_DecodeStream tokens:2, Zen 3).
  #pragma GCC unroll 4
  for (int64_t k = 0, e = 0; k < K; ++k, e += kPanelRows) {
    __m256 xb[NT];
    if constexpr (NT == 2)
      #pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) prefetch_ahead<T>(w, p * pstride + e);
    #pragma GCC unroll 2
    for (int t = 0; t < NT; ++t) xb[t] = _mm256_broadcast_ss(x + t * ldx + k);
    #pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      __m256 wv[kPanelHalves];
      load_column<T>(w, p * pstride + e, wv[0], wv[1]);
      #pragma GCC unroll 2
      for (int h = 0; h < kPanelHalves; ++h)
        #pragma GCC unroll 2
        for (int t = 0; t < NT; ++t) acc[p][h][t] = _mm256_fmadd_ps(wv[h], xb[t], acc[p][h][t]);
    }
  }
  #pragma GCC unroll 4
  for (int p = 0; p < NP; ++p)
    #pragma GCC unroll 2
    for (int h = 0; h < kPanelHalves; ++h)
      #pragma GCC unroll 2
      for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + t * ldy + p * kPanelRows + h * kLanes, acc[p][h][t]);
}

// Panels streamed together in decode: enough independent chains (panels x halves x tokens = 8) to
// hide the FMA latency.
constexpr int kDecodePanels1 = 4;  // one token
constexpr int kDecodePanels2 = 2;  // two tokens
static_assert(kDecodeTokens == 2, "decode_rows has a case for one token and one for two");

// Decode (one or two tokens): panels [g0, g1), several at once so that enough independent chains
// hide the FMA latency; a partial last panel goes through a 16-wide buffer.
template <DType T>
void decode_rows(const WeightMatrix& w, const float* x, int64_t n, float* y, int64_t g0, int64_t g1) {
  const int64_t K = w.cols, pstride = panel_stride(T, K), es = static_cast<int64_t>(dtype_size(T));
  const auto* base = static_cast<const uint8_t*>(w.data);
  const int64_t full = std::min(g1, w.rows / kPanelRows);  // panels whose 16 rows all exist
  auto panels = [&]<int NP, int NT>(int64_t g) {
    const void* wp = base + g * pstride * es;
    if (g < full) {
      decode_tile<T, NP, NT>(wp, pstride, x, K, K, y + g * kPanelRows, w.rows);
      return;
    }
    alignas(__m256) float buf[NT * kPanelRows];
    decode_tile<T, 1, NT>(wp, pstride, x, K, K, buf, kPanelRows);
    for (int64_t t = 0; t < NT; ++t) std::copy_n(buf + t * kPanelRows, w.rows - g * kPanelRows, y + t * w.rows + g * kPanelRows);
  };
  int64_t g = g0;
  if (n == 1) {
    for (; g + kDecodePanels1 <= full; g += kDecodePanels1) panels.template operator()<kDecodePanels1, 1>(g);
    for (; g < g1; ++g) panels.template operator()<1, 1>(g);
  } else {
    for (; g + kDecodePanels2 <= full; g += kDecodePanels2) panels.template operator()<kDecodePanels2, 2>(g);
    for (; g < g1; ++g) panels.template operator()<1, 2>(g);
  }
}

constexpr int kTileTokens = static_cast<int>(kPanelActsAvx2.tile_tokens);  // 2 x 6 accumulators of 16 registers
constexpr int64_t kColBlock = kPanelActsAvx2.col_block;

// Prefill: one panel x NT tokens over `len` columns of a block. w: the panel at the block's first
// column; xp: the tile's activations column by column (xp[k * NT + t], pack_panel_acts). Each output
// is one fused multiply-add chain in column order, from zero or (add) from the exact float y holds,
// so neither the tile shape nor the blocking changes any result (and the AVX-512 kernel's are the same).
template <DType T, int NT, bool Ahead = false>
void prefill_tile(const void* w, const float* xp, int64_t len, float* y, int64_t ldy, bool add) {
  __m256 acc[kPanelHalves][NT];
  #pragma GCC unroll 2
  for (int h = 0; h < kPanelHalves; ++h)
    #pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) acc[h][t] = add ? _mm256_loadu_ps(y + t * ldy + h * kLanes) : _mm256_setzero_ps();
  #pragma GCC unroll 4
  for (int64_t k = 0; k < len; ++k, xp += NT) {
    // One broadcast at a time: 12 accumulators + 6 broadcasts would spill registers.
    __m256 w0, w1;
    if constexpr (Ahead) prefetch_ahead<T>(w, k * kPanelRows);
    load_column<T>(w, k * kPanelRows, w0, w1);
    #pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const __m256 xb = _mm256_broadcast_ss(xp + t);
      acc[0][t] = _mm256_fmadd_ps(w0, xb, acc[0][t]);
      acc[1][t] = _mm256_fmadd_ps(w1, xb, acc[1][t]);
    }
  }
  #pragma GCC unroll 2
  for (int h = 0; h < kPanelHalves; ++h)
    #pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + t * ldy + h * kLanes, acc[h][t]);
}

// Half h of the panel column at element e as float32 (load_column's lo or hi), in one register: a
// BF16 half is loaded on its own (the empty asm hides that both halves read one address; GCC would
// load once and hold the vector in a register the tile does not have) and its high half masked by
// two shifts, not by an and with a mask that would take a register too.
template <DType T>
inline __m256 load_half(const void* w, int64_t e, int h) {
  if constexpr (T == DType::BF16) {
    const uint16_t* at = static_cast<const uint16_t*>(w) + e;
    asm volatile("" : "+r"(at));
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at));
    return _mm256_castsi256_ps(h == 0 ? _mm256_slli_epi32(v, 16) : _mm256_slli_epi32(_mm256_srli_epi32(v, 16), 16));
  } else {
    return load8<T>(w, e + h * kLanes);
  }
}

// Prefill of 1-3 tokens: two panels x NT tokens, as prefill_tile for each panel (the same chains,
// the same bits). One panel's 2 x NT chains are too few to hide the FMA latency (3 tokens: 6, where
// 8 keep both units busy); two panels give 4 x NT, and with the NT broadcasts held across the four
// weight vectors, loaded one at a time, they fit the 16 registers.
constexpr int kPairTileTokens = 3;

template <DType T, int NT>
void prefill_tile_pair(const void* wa, const void* wb, const float* xp, int64_t len, float* ya, float* yb,
                       int64_t ldy, bool add) {
  static_assert(NT <= kPairTileTokens, "4 x NT accumulators, NT broadcasts and a weight vector in 16 registers");
  __m256 acc[2][kPanelHalves][NT];
  #pragma GCC unroll 2
  for (int p = 0; p < 2; ++p)
    #pragma GCC unroll 2
    for (int h = 0; h < kPanelHalves; ++h)
      #pragma GCC unroll 3
      for (int t = 0; t < NT; ++t)
        acc[p][h][t] = add ? _mm256_loadu_ps((p ? yb : ya) + t * ldy + h * kLanes) : _mm256_setzero_ps();
  #pragma GCC unroll 2
  for (int64_t k = 0; k < len; ++k, xp += NT) {
    __m256 xb[NT];
    prefetch_ahead<T>(wa, k * kPanelRows);
    prefetch_ahead<T>(wb, k * kPanelRows);
    #pragma GCC unroll 3
    for (int t = 0; t < NT; ++t) xb[t] = _mm256_broadcast_ss(xp + t);
    #pragma GCC unroll 2
    for (int p = 0; p < 2; ++p)
      #pragma GCC unroll 2
      for (int h = 0; h < kPanelHalves; ++h) {
        const __m256 w = load_half<T>(p ? wb : wa, k * kPanelRows, h);
        #pragma GCC unroll 3
        for (int t = 0; t < NT; ++t) acc[p][h][t] = _mm256_fmadd_ps(w, xb[t], acc[p][h][t]);
      }
  }
  #pragma GCC unroll 2
  for (int p = 0; p < 2; ++p)
    #pragma GCC unroll 2
    for (int h = 0; h < kPanelHalves; ++h)
      #pragma GCC unroll 3
      for (int t = 0; t < NT; ++t) _mm256_storeu_ps((p ? yb : ya) + t * ldy + h * kLanes, acc[p][h][t]);
}

// Slice i of `slices` of the `lines` cache lines from p, into L2.
inline void prefetch_slice(const char* p, int64_t lines, int64_t i, int64_t slices) {
  for (int64_t l = i * lines / slices, e = (i + 1) * lines / slices; l < e; ++l) _mm_prefetch(p + l * kCacheLine, _MM_HINT_T1);
}

// One panel's outputs (16 floats, one line or two) for each of `tokens` rows ldy apart, into L1.
inline void prefetch_panel_outputs(const float* y, int64_t ldy, int64_t tokens) {
  for (int64_t t = 0; t < tokens; ++t) {
    _mm_prefetch(reinterpret_cast<const char*>(y + t * ldy), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(y + t * ldy + kPanelRows - 1), _MM_HINT_T0);
  }
}

// Prefill: panels [g0, g1) x all n tokens, in blocks of kTokenBlock tokens. A block whose packed
// activations fit in L2 (kPanelOuterActBytes: a verification pass, a batched step of a few
// sequences) streams each panel once from start to end, two panels half the range apart in lockstep
// (two streams per thread, as in quantized decode; one does not reach the memory bandwidth), each
// column block of a panel reused by every token tile from L1, fetched 1 KiB ahead (prefetch_ahead);
// 1-3 tokens take both panels in one tile (prefill_tile_pair). A larger block (a prompt) goes column
// block by column block over all panels, so that its activations' block stays in L2; there, while a
// tile computes, a slice of the next panel's block is fetched (it starts a page of its own, where the
// hardware prefetcher does not follow), and the next tile's outputs (last touched a column block
// ago, a whole pass over the panels, out of L2 since). 16-bit weights are converted in the tiles:
// converting a block once into a float32 buffer was no faster at 64 tokens and slower at 16
// (kernels_bench, Zen 3), unlike the AVX-512 kernel's. Either order gives every output the same
// chain of multiply-adds (column order), so neither changes a result.
constexpr int64_t kPanelOuterActBytes = int64_t{256} << 10;

template <DType T>
void prefill_rows(const WeightMatrix& w, const float* xp, int64_t n, float* y, int64_t g0, int64_t g1) {
  const int64_t K = w.cols, pstride = panel_stride(T, K), es = static_cast<int64_t>(dtype_size(T));
  const auto* base = static_cast<const uint8_t*>(w.data);
  const int64_t full = std::min(g1, w.rows / kPanelRows);  // panels whose 16 rows all exist
  alignas(__m256) float buf[kTileTokens * kPanelRows];  // a partial last panel's outputs
  for (int64_t t0 = 0; t0 < n; t0 += kTokenBlock) {
    const int64_t nt = std::min(kTokenBlock, n - t0);
    int64_t start[kTokenBlock + 1];
    const int64_t tiles = panel_tile_starts(nt, kTileTokens, start);
    // Row t of the token block's outputs at panel g, and tile i's count of tokens.
    auto out_at = [&](int64_t t, int64_t g) { return y + (t0 + t) * w.rows + g * kPanelRows; };
    auto tokens = [&](int64_t i) { return start[i + 1] - start[i]; };
    auto weights_at = [&](int64_t g, int64_t k0) { return base + (g * pstride + k0 * kPanelRows) * es; };
    // Tile i's packed activations in the column block from k0 of len columns (pack_panel_acts).
    auto acts_at = [&](int64_t k0, int64_t len, int64_t i) { return xp + t0 * K + nt * k0 + start[i] * len; };
    // Token tile i of panel g over the column block from k0 (len columns).
    auto tile = [&](int64_t g, int64_t k0, int64_t i, bool ahead = false) {
      const int64_t len = std::min(kColBlock, K - k0), s = tokens(i);
      const bool add = k0 > 0;
      const int64_t valid = std::min(kPanelRows, w.rows - g * kPanelRows);
      float* yt = out_at(start[i], g);
      if (g >= full)
        for (int64_t t = 0; t < s; ++t)
          for (int64_t r = 0; r < kPanelRows; ++r) buf[t * kPanelRows + r] = add && r < valid ? yt[t * w.rows + r] : 0.0f;
      const float* xb = acts_at(k0, len, i);
      with_tile_size<kTileTokens>(s, [&]<int NT>() {
        float* yo = g < full ? yt : buf;
        const int64_t ld = g < full ? w.rows : kPanelRows;
        if (ahead) prefill_tile<T, NT, true>(weights_at(g, k0), xb, len, yo, ld, add);
        else prefill_tile<T, NT>(weights_at(g, k0), xb, len, yo, ld, add);
      });
      if (g >= full)
        for (int64_t t = 0; t < s; ++t) std::copy_n(buf + t * kPanelRows, valid, yt + t * w.rows);
    };
    if (nt * K * static_cast<int64_t>(sizeof(float)) <= kPanelOuterActBytes) {
      auto panels = [&](std::initializer_list<int64_t> gs) {
        for (int64_t k0 = 0; k0 < K; k0 += kColBlock)
          for (const int64_t g : gs)
            for (int64_t i = 0; i < tiles; ++i) tile(g, k0, i, i == 0);  // the first tile fetches ahead
      };
      // A block of at most kPairTileTokens tokens (one tile) on two whole panels (prefill_tile_pair).
      auto pair = [&](int64_t a, int64_t b) {
        for (int64_t k0 = 0; k0 < K; k0 += kColBlock) {
          const int64_t len = std::min(kColBlock, K - k0);
          with_tile_size<kPairTileTokens>(nt, [&]<int NT>() {
            prefill_tile_pair<T, NT>(weights_at(a, k0), weights_at(b, k0), acts_at(k0, len, 0), len, out_at(0, a),
                                     out_at(0, b), w.rows, k0 > 0);
          });
        }
      };
      static_assert(kPairTileTokens <= kTileTokens, "a pair tile's block is one tile");
      const bool few = nt <= kPairTileTokens;
      in_two_streams(
          g0, g1, [&](int64_t a, int64_t b) { few && b < full ? pair(a, b) : panels({a, b}); },
          [&](int64_t g) { panels({g}); });
      continue;
    }
    for (int64_t k0 = 0; k0 < K; k0 += kColBlock) {
      const int64_t len = std::min(kColBlock, K - k0);
      for (int64_t g = g0; g < g1; ++g) {
        const int64_t next_lines = g + 1 < g1 ? len * kPanelRows * es / kCacheLine : 0;
        for (int64_t i = 0; i < tiles; ++i) {
          prefetch_slice(reinterpret_cast<const char*>(weights_at(g + 1, k0)), next_lines, i, tiles);
          if (i + 1 < tiles) prefetch_panel_outputs(out_at(start[i + 1], g), w.rows, tokens(i + 1));
          else if (g + 1 < g1) prefetch_panel_outputs(out_at(0, g + 1), w.rows, tokens(0));
          tile(g, k0, i);
        }
      }
    }
  }
}

// Tokens per quantized tile: 2 x 2 float and integer accumulators.
constexpr int kQuantTileTokens = 2;

// Rows 8h..8h+7's scales of a block as float32: float16, or MXFP4's E8M0 bytes as e8m0_half_to_f32
// computes them (2^(e - 128): exponent e - 1, or a subnormal for e < 2).
template <QType Q>
inline __m256 block_scales(const uint16_t* sc, int h) {
  if constexpr (qhas_e8m0_scale(Q)) {
    int64_t bytes;
    std::memcpy(&bytes, reinterpret_cast<const uint8_t*>(sc) + h * kLanes, sizeof bytes);
    const __m256i e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i tiny = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, tiny, small));
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + h * kLanes)));
  }
}

// A 16-row group of quantized weights as a tile reads it: its blocks, their scales, its outputs.
struct QuantGroup {
  const uint8_t* blocks;
  const uint16_t* scales;
  float* y;
  int64_t valid_rows;
};

// NG 16-row groups x NT tokens over all blocks, the groups' blocks read in lockstep: decode (one
// token) takes two groups half a thread's rows apart, two streams, because one sequential stream
// per core does not reach the memory bandwidth (kernels_bench BM_DecodeStream, Zen 3: Q8_0 at 16 GB/s
// where its arithmetic runs at 39 from the caches). Each 64-byte unit row holds 4 weights of all 16
// rows: its two 32-byte halves (rows 0-7, 8-15) feed two accumulators, so a group streams through
// once. maddubs needs an unsigned operand: Q8_0, IQ4_NL and MXFP4 (their table looked up, signed: unsigned it
// would saturate maddubs's 16-bit pairs) use the sign trick (|w| times x with w's sign); the other
// nibble types multiply their unsigned nibbles (with Q5's fifth bits) and correct by -offset * (sum of
// the block's activation quants); Q4_1 / Q5_1 add min * that sum, scaled, after the block. Each
// output's sums are in block order whatever NG and NT are, so neither changes a result.
// Out of line: GCC would otherwise inline every tile shape into quant_groups (through
// for_each_group's lambda); so they compile exactly as before that helper (timings were within noise).
template <QType Q, int NT, int NG>
[[gnu::noinline]] void quant_tile(const QuantGroup (&groups)[NG], const QuantizedActs& a, int64_t t0, int64_t ldy) {
  constexpr int64_t bb = qblock_bytes(Q), half = kQUnitRowBytes / 2;
  const int64_t nb = a.n_blocks;
  const __m256i ones = _mm256_set1_epi16(1), low4 = _mm256_set1_epi8(0x0F);
  // Every loop over halves and tokens must unroll (GCC does not at -O2), or the sums live on the stack
  // and each add waits for a store to forward.
  __m256 accs[NG][2][NT];
  #pragma GCC unroll 2
  for (int g = 0; g < NG; ++g)
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h)
      #pragma GCC unroll 2
      for (int t = 0; t < NT; ++t) accs[g][h][t] = _mm256_setzero_ps();
  // One loop over (block, group): the groups' lines interleave in the order the tile reads them.
  for (int64_t b = 0; b < nb; ++b) {
    #pragma GCC unroll 2
    for (int g = 0; g < NG; ++g) {
      const uint8_t* tile = groups[g].blocks + b * bb;
      auto& acc = accs[g];
      // The lines a few blocks ahead (past the group's end is harmless: prefetches do not fault).
      for (int64_t l = 0; l < bb; l += kCacheLine)
        _mm_prefetch(reinterpret_cast<const char*>(tile + kDecodePrefetchAhead + l), _MM_HINT_T0);
      __m256i isum[2][NT];
      #pragma GCC unroll 2
      for (int h = 0; h < 2; ++h)
        #pragma GCC unroll 2
        for (int t = 0; t < NT; ++t) isum[h][t] = _mm256_setzero_si256();
      auto x4 = [&](int t, int64_t k) {
        int32_t v;
        std::memcpy(&v, a.q.data() + (t0 + t) * a.cols + b * kQBlock + k, kQUnit);
        return _mm256_set1_epi32(v);
      };
      auto unit = [&](int64_t j, int h) {  // rows 8h..8h+7 of unit row j
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + j * kQUnitRowBytes + h * half));
      };
      // Signed weights w of unit (lo/hi) for the sign trick, with x4 of token t: 4 products per lane.
      auto signed_dot = [&](__m256i w, __m256i xv) {
        return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xv, w)), ones);
      };
      if constexpr (qhas_table(Q)) {
        const __m256i table = _mm256_broadcastsi128_si256(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(Q == QType::MXFP4 ? kMxfp4Values : kIq4Values)));
        #pragma GCC unroll 8
        for (int64_t j = 0; j < kQ4Half / kQUnit; ++j) {
          const __m256i v0 = unit(j, 0), v1 = unit(j, 1);
          const __m256i lo0 = _mm256_shuffle_epi8(table, _mm256_and_si256(v0, low4));
          const __m256i hi0 = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v0, 4), low4));
          const __m256i lo1 = _mm256_shuffle_epi8(table, _mm256_and_si256(v1, low4));
          const __m256i hi1 = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v1, 4), low4));
          #pragma GCC unroll 2
          for (int t = 0; t < NT; ++t) {
            const __m256i xl = x4(t, kQUnit * j), xh = x4(t, kQ4Half + kQUnit * j);
            isum[0][t] = _mm256_add_epi32(isum[0][t], _mm256_add_epi32(signed_dot(lo0, xl), signed_dot(hi0, xh)));
            isum[1][t] = _mm256_add_epi32(isum[1][t], _mm256_add_epi32(signed_dot(lo1, xl), signed_dot(hi1, xh)));
          }
        }
      } else if constexpr (Q == QType::Q8_0) {
        #pragma GCC unroll 8
        for (int64_t j = 0; j < kQBlock / kQUnit; ++j) {
          const __m256i w0 = unit(j, 0), w1 = unit(j, 1);
          const __m256i u0 = _mm256_sign_epi8(w0, w0), u1 = _mm256_sign_epi8(w1, w1);
          #pragma GCC unroll 2
          for (int t = 0; t < NT; ++t) {
            const __m256i xv = x4(t, kQUnit * j);
            isum[0][t] = _mm256_add_epi32(isum[0][t], _mm256_madd_epi16(_mm256_maddubs_epi16(u0, _mm256_sign_epi8(xv, w0)), ones));
            isum[1][t] = _mm256_add_epi32(isum[1][t], _mm256_madd_epi16(_mm256_maddubs_epi16(u1, _mm256_sign_epi8(xv, w1)), ones));
          }
        }
      } else {
        #pragma GCC unroll 8
        for (int64_t j = 0; j < kQ4Half / kQUnit; ++j) {
          const __m256i v0 = unit(j, 0), v1 = unit(j, 1);
          __m256i lo0 = _mm256_and_si256(v0, low4), hi0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), low4);
          __m256i lo1 = _mm256_and_si256(v1, low4), hi1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), low4);
          if constexpr (qhas_fifth_bits(Q)) {  // bit j (low nibbles' unit) and j + 4 (high) to bit 4
            const __m256i bit4 = _mm256_set1_epi8(0x10);
            const __m256i h0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + kQNibbleBytes));
            const __m256i h1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + kQNibbleBytes + half));
            const int s = static_cast<int>(4 - j);  // 1..4: unit j's bits left, unit j + 4's right by j
            lo0 = _mm256_or_si256(lo0, _mm256_and_si256(_mm256_slli_epi16(h0, s), bit4));
            lo1 = _mm256_or_si256(lo1, _mm256_and_si256(_mm256_slli_epi16(h1, s), bit4));
            hi0 = _mm256_or_si256(hi0, _mm256_and_si256(_mm256_srli_epi16(h0, static_cast<int>(j)), bit4));
            hi1 = _mm256_or_si256(hi1, _mm256_and_si256(_mm256_srli_epi16(h1, static_cast<int>(j)), bit4));
          }
          #pragma GCC unroll 2
          for (int t = 0; t < NT; ++t) {
            const __m256i xl = x4(t, kQUnit * j), xh = x4(t, kQ4Half + kQUnit * j);
            const __m256i p0 = _mm256_add_epi16(_mm256_maddubs_epi16(lo0, xl), _mm256_maddubs_epi16(hi0, xh));
            const __m256i p1 = _mm256_add_epi16(_mm256_maddubs_epi16(lo1, xl), _mm256_maddubs_epi16(hi1, xh));
            isum[0][t] = _mm256_add_epi32(isum[0][t], _mm256_madd_epi16(p0, ones));
            isum[1][t] = _mm256_add_epi32(isum[1][t], _mm256_madd_epi16(p1, ones));
          }
        }
      }
      const uint16_t* sc = groups[g].scales + b * qscale_stride(Q);
      const __m256 sw0 = block_scales<Q>(sc, 0), sw1 = block_scales<Q>(sc, 1);
      #pragma GCC unroll 2
      for (int t = 0; t < NT; ++t) {
        const int64_t tb = (t0 + t) * nb + b;
        if constexpr (Q != QType::Q8_0 && !qhas_table(Q) && quant_offset(Q) != 0) {
          const __m256i corr = _mm256_set1_epi32(quant_offset(Q) * a.s[tb]);
          isum[0][t] = _mm256_sub_epi32(isum[0][t], corr);
          isum[1][t] = _mm256_sub_epi32(isum[1][t], corr);
        }
        const __m256 dx = _mm256_set1_ps(a.d[tb]);
        acc[0][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[0][t]), _mm256_mul_ps(sw0, dx), acc[0][t]);
        acc[1][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[1][t]), _mm256_mul_ps(sw1, dx), acc[1][t]);
        if constexpr (qhas_min(Q)) {
          const __m256 xs = _mm256_set1_ps(static_cast<float>(a.s[tb]));
          const __m256 m0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + kQGroupRows)));
          const __m256 m1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + kQGroupRows + kLanes)));
          acc[0][t] = _mm256_fmadd_ps(xs, _mm256_mul_ps(m0, dx), acc[0][t]);
          acc[1][t] = _mm256_fmadd_ps(xs, _mm256_mul_ps(m1, dx), acc[1][t]);
        }
      }
    }
  }
  #pragma GCC unroll 2
  for (int g = 0; g < NG; ++g)
    #pragma GCC unroll 2
    for (int t = 0; t < NT; ++t) {
      alignas(__m256) float out[kQGroupRows];
      _mm256_store_ps(out, accs[g][0][t]);
      _mm256_store_ps(out + kLanes, accs[g][1][t]);
      std::copy_n(out, groups[g].valid_rows, groups[g].y + (t0 + t) * ldy);
    }
}

template <QType Q>
void quant_groups(const WeightMatrix& w, const QuantizedActs& a, float* y, int64_t g0, int64_t g1) {
  const int64_t nb = a.n_blocks, bb = qblock_bytes(Q);
  auto group = [&](int64_t g) {
    return QuantGroup{static_cast<const uint8_t*>(w.data) + g * nb * bb, w.scales + g * nb * qscale_stride(Q),
                      y + g * kQGroupRows, std::min(kQGroupRows, w.rows - g * kQGroupRows)};
  };
  if (a.n == 1) {  // decode: groups i and i + half of the range side by side
    in_two_streams(
        g0, g1,
        [&](int64_t i, int64_t j) {
          const QuantGroup pair[2] = {group(i), group(j)};
          quant_tile<Q, 1, 2>(pair, a, 0, w.rows);
        },
        [&](int64_t g) {
          const QuantGroup last[1] = {group(g)};
          quant_tile<Q, 1, 1>(last, a, 0, w.rows);
        });
    return;
  }
  for_each_group(w, a, g0, g1, [&](const uint8_t*, const uint16_t*, int64_t g, int64_t t0, int64_t t1) {
    const QuantGroup one[1] = {group(g)};
    int64_t t = t0;
    for (; t + kQuantTileTokens <= t1; t += kQuantTileTokens) quant_tile<Q, kQuantTileTokens, 1>(one, a, t, w.rows);
    for (; t < t1; ++t) quant_tile<Q, 1, 1>(one, a, t, w.rows);
  });
}

}  // namespace

void panel_rows_avx2(const WeightMatrix& w, const float* x, const float* xp, int64_t n, float* y, int64_t g0,
                     int64_t g1) {
  auto run = [&]<DType T>() {
    if (n <= kDecodeTokens) decode_rows<T>(w, x, n, y, g0, g1);
    else prefill_rows<T>(w, xp, n, y, g0, g1);
  };
  switch (w.dtype) {
    case DType::F32: run.template operator()<DType::F32>(); break;
    case DType::F16: run.template operator()<DType::F16>(); break;
    case DType::BF16: run.template operator()<DType::BF16>(); break;
  }
}

void quant_groups_avx2(const WeightMatrix& w, const QuantizedActs& a, float* y, int64_t g0, int64_t g1) {
  with_block32_type(w.qtype, [&]<QType Q>() { quant_groups<Q>(w, a, y, g0, g1); });
}

}  // namespace ember::kernels::detail
