#pragma once
// Internal: what matmul.cc (dispatch, scalar reference) shares with the per-instruction-set kernels
// (the matmul_*_avx2.cc and matmul_*_avx512.cc files). Each kernel computes one thread's share of
// rows.
#include <algorithm>
#include <cstdint>

#include "kernels/kquant.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace ember::kernels::detail {

constexpr int64_t kTokenBlock = 64;  // tokens whose activations stay in L2 while a weight tile is reused
constexpr int64_t kCacheLine = 64;
// How far ahead of its reads a quantized decode kernel (one or two tokens) prefetches the weights it
// streams: one core alone keeps too few reads in flight to reach the bandwidth while it computes
// (ember bench, 1B model, one thread: 4 KiB ahead beat 2 and 8).
constexpr int64_t kDecodePrefetchAhead = 4096;

// Up to this many tokens a product is decode: it streams the weights once, with kernels of its own.
constexpr int64_t kDecodeTokens = 2;

// Panel-packed plain weights: 16-row panels [g0, g1) for all n tokens. Both give the same bits. In
// prefill (more than kDecodeTokens) each reads the activations as pack_panel_acts lays them out for
// it (xp, n x cols floats); in decode the AVX2 kernel reads x, and the AVX-512 one runs it.
void panel_rows_avx2(const WeightMatrix& w, const float* x, const float* xp, int64_t n, float* y, int64_t g0,
                     int64_t g1);
void panel_rows_avx512(const WeightMatrix& w, const float* x, const float* xp, int64_t n, float* y, int64_t g0,
                       int64_t g1);
// Panels per register tile of the AVX-512 panel kernel: matmul_fused hands it whole tiles.
constexpr int64_t kPanelTile512 = 3;
// How a panel kernel's prefill reads the activations, transposed once per product for all threads'
// chunks: blocks of kTokenBlock tokens x col_block columns; in each block the register tiles of at
// most tile_tokens tokens (panel_tile_starts) one after another, each column by column (xp[k * s + t])
// so that every broadcast has a constant offset.
struct PanelActsLayout {
  int64_t tile_tokens, col_block;
};
// AVX2: 6 tokens x 2 vectors of one panel; a panel's block of 256 columns (16 KiB as float32) stays in L1.
constexpr PanelActsLayout kPanelActsAvx2{6, 256};
// AVX-512: 9 tokens x 3 panels (matmul_panel_avx512.cc); 3 panels' block of 128 columns, 24 KiB.
constexpr PanelActsLayout kPanelActsAvx512{9, 128};
// AVX512-BF16 (matmul_panel_bf16_avx512.cc): the float32 AVX-512 kernel's tiles and blocks, of column
// pairs.
constexpr PanelActsLayout kPanelActsBf16{9, 256};
// BF16 weights with BF16-rounded activations (WeightMatrix::bf16_activations, an even number of
// columns), prefill: panels [g0, g1) for all n tokens; xp: the rounded activations as
// pack_panel_acts_bf16 lays them out. The bits of panel_rows_avx2 / panel_rows_avx512 on the rounded
// activations.
void panel_rows_bf16_avx512(const WeightMatrix& w, const uint32_t* xp, int64_t n, float* y, int64_t g0, int64_t g1);
// The first token of each register tile of a block of nt tokens, as even as possible (tiles + 1
// entries); returns the number of tiles.
int64_t panel_tile_starts(int64_t nt, int64_t tile_tokens, int64_t* start);
// Pieces [p0, p1) of the panel_pack_pieces(l, n, cols) (token block x column block) of x into xp.
int64_t panel_pack_pieces(PanelActsLayout l, int64_t n, int64_t cols);
void pack_panel_acts(PanelActsLayout l, const float* x, int64_t n, int64_t cols, float* xp, int64_t p0, int64_t p1);
// The same for panel_rows_bf16_avx512, of activations x rounded to BF16 here (cols even): each column
// pair c, c + 1 one 32-bit word, column c's BF16 bits in the high half (the word vdpbf16ps multiplies
// first), so that each block and tile is half the floats' size at the same place.
void pack_panel_acts_bf16(PanelActsLayout l, const float* x, int64_t n, int64_t cols, uint32_t* xp, int64_t p0,
                          int64_t p1);

// Quantized weights: 16-row groups [g0, g1) for all tokens of a. The AVX-512 kernel reads the
// activations as pack_quant_acts lays them out for w's type (xp, quant_pack_size(a) int32s).
void quant_groups_avx2(const WeightMatrix& w, const QuantizedActs& a, float* y, int64_t g0, int64_t g1);
void quant_groups_avx512(const WeightMatrix& w, const QuantizedActs& a, const int32_t* xp, float* y, int64_t g0,
                         int64_t g1);
// The AVX-512 quantized kernel's activations (Q8_0 or Q4_0 weights: q), packed once per product:
// token tiles [i0, i1) of the quant_pack_tiles(a) into xp.
int64_t quant_pack_size(const QuantizedActs& a);
int64_t quant_pack_tiles(const QuantizedActs& a);
void pack_quant_acts(QType q, const QuantizedActs& a, int32_t* xp, int64_t i0, int64_t i1);

// K-quant weights (kquant.h): 16-row groups [g0, g1) for all tokens of a.
void kquant_groups_avx2(const WeightMatrix& w, const KQuantActs& a, float* y, int64_t g0, int64_t g1);
void kquant_groups_avx512(const WeightMatrix& w, const KQuantActs& a, float* y, int64_t g0, int64_t g1);

// Calls f.template operator()<Q>() with q (a K-quant) as a compile-time type.
template <class F>
void with_kquant_type(QType q, F&& f) {
  switch (q) {
    case QType::Q2_K: f.template operator()<QType::Q2_K>(); break;
    case QType::Q3_K: f.template operator()<QType::Q3_K>(); break;
    case QType::Q4_K: f.template operator()<QType::Q4_K>(); break;
    case QType::Q5_K: f.template operator()<QType::Q5_K>(); break;
    case QType::IQ4_XS: f.template operator()<QType::IQ4_XS>(); break;
    case QType::IQ3_S: f.template operator()<QType::IQ3_S>(); break;
    default: f.template operator()<QType::Q6_K>(); break;
  }
}

// Calls f.template operator()<NT>() with NT = nt (1 <= nt <= MaxNT) as a compile-time size: the
// kernels' register tiles.
template <int MaxNT, class F>
void with_tile_size(int64_t nt, F&& f) {
  if constexpr (MaxNT > 1)
    if (nt < MaxNT) return with_tile_size<MaxNT - 1>(nt, f);
  f.template operator()<MaxNT>();
}

// Calls f.template operator()<NT>(tiles, g, t) for each 16-row group g in [g0, g1) of K-quant weights
// (tiles: the group's first tile) and each tile [t, t + NT) of a's tokens, NT <= MaxNT a compile-time
// size (the kernels' register tiles). Blocks of kTokenBlock tokens are outermost, as in
// for_each_group, so a group's tiles stay in L2 while every token tile of a block reuses them.
template <int MaxNT, class F>
void for_each_kquant_tile(const WeightMatrix& w, const KQuantActs& a, int64_t g0, int64_t g1, F&& f) {
  const int64_t group_bytes = a.n_blocks * kq_tile_bytes(w.qtype);
  const auto* base = static_cast<const uint8_t*>(w.data);
  for (int64_t t0 = 0; t0 < a.n; t0 += kTokenBlock) {
    const int64_t t1 = std::min(a.n, t0 + kTokenBlock);
    for (int64_t g = g0; g < g1; ++g)
      for (int64_t t = t0; t < t1; t += MaxNT)
        with_tile_size<MaxNT>(std::min<int64_t>(MaxNT, t1 - t), [&]<int NT>() {
          f.template operator()<NT>(base + g * group_bytes, g, t);
        });
  }
}

// Calls f(t, nt) for each register tile [t, t + nt) of n tokens: tiles of max_nt within each block
// of kTokenBlock (as for_each_group and for_each_kquant_tile cut them), in token order.
template <class F>
void for_each_token_tile(int64_t n, int64_t max_nt, F&& f) {
  for (int64_t t0 = 0; t0 < n; t0 += kTokenBlock) {
    const int64_t t1 = std::min(n, t0 + kTokenBlock);
    for (int64_t t = t0; t < t1; t += max_nt) f(t, std::min(max_nt, t1 - t));
  }
}

// Calls f(quants, scales, g, t0, t1) for each 16-row group g in [g0, g1) and each block [t0, t1) of
// a's tokens; quants and scales point at the group's. Token blocks are outermost: a group's weights
// stay in L2 while a block of tokens reuses them.
template <class F>
void for_each_group(const WeightMatrix& w, const QuantizedActs& a, int64_t g0, int64_t g1, F&& f) {
  const int64_t nb = a.n_blocks, bb = qblock_bytes(w.qtype);
  const auto* base = static_cast<const uint8_t*>(w.data);
  for (int64_t t0 = 0; t0 < a.n; t0 += kTokenBlock) {
    const int64_t t1 = std::min(a.n, t0 + kTokenBlock);
    for (int64_t g = g0; g < g1; ++g) f(base + g * nb * bb, w.scales + g * nb * qscale_stride(w.qtype), g, t0, t1);
  }
}

// Offset subtracted from the unsigned form of a 32-weight block's value v (quant.h) that the
// unsigned-by-signed dot products take: Q8_0 values are stored signed and flipped to v + 128, Q4_0
// nibbles hold v + 8, Q5_0's 5 bits v + 16, IQ4_NL's and MXFP4's tables are looked up as v + 128;
// Q4_1 and Q5_1 hold v itself.
constexpr int32_t quant_offset(QType q) {
  switch (q) {
    case QType::Q8_0: case QType::IQ4_NL: case QType::MXFP4: return 128;
    case QType::Q4_0: return 8;
    case QType::Q5_0: return 16;
    default: return 0;
  }
}

// Calls f.template operator()<Q>() with q (a 32-weight block type) as a compile-time type.
template <class F>
void with_block32_type(QType q, F&& f) {
  switch (q) {
    case QType::Q8_0: f.template operator()<QType::Q8_0>(); break;
    case QType::Q4_1: f.template operator()<QType::Q4_1>(); break;
    case QType::Q5_0: f.template operator()<QType::Q5_0>(); break;
    case QType::Q5_1: f.template operator()<QType::Q5_1>(); break;
    case QType::IQ4_NL: f.template operator()<QType::IQ4_NL>(); break;
    case QType::MXFP4: f.template operator()<QType::MXFP4>(); break;
    default: f.template operator()<QType::Q4_0>(); break;
  }
}

}  // namespace ember::kernels::detail
