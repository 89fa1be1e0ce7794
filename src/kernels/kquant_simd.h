#pragma once
// Internal: what both K-quant kernel files (matmul_kquant_avx2.cc, matmul_kquant_avx512.cc) share.
// Internal linkage on purpose: each file compiles its own copy with its own target flags, so the
// AVX-512 build of a helper can never be the one an AVX2 machine runs.
#include <cstdint>
#include <cstring>

#include "kernels/iq3s_grid.h"
#include "kernels/kquant.h"

namespace ember::kernels::detail {
namespace {

// A tile's geometry (kquant.h): sub-block width, 4-weight units per sub-block, sub-block pairs.
template <QType Q>
struct KqShape {
  static constexpr int kWidth = kq_sub_width(Q);
  static constexpr int kUnits = kWidth / 4;
  static constexpr int kPairs = static_cast<int>(kQK_K) / (2 * kWidth);
  static constexpr int64_t kNibbles = kq_nibbles(Q);
  static constexpr int64_t kScales = kq_scales(Q);
};

// Four activation quants as one int32 (a dot-product lane's operand).
inline int32_t kq_x4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The high bits of sub-block j, unit u (kquant.h) as its fields' byte-wise shift to bit 4 (positive:
// left) and the mask that keeps them there; Q2_K / Q3_K's low 2 bits go to bit 0 and Q3_K's bit 2
// to bit 2.
template <QType Q>
constexpr int kq_high_to_bit4(int j, int u) { return (kq_has_nibbles(Q) ? 4 : 0) - kq_high_shift(Q, j, u); }
template <QType Q>
constexpr char kq_high_mask() { return static_cast<char>(((1 << kq_high_bits(Q)) - 1) << (kq_has_nibbles(Q) ? 4 : 0)); }
constexpr int kq3_bit2_to_bit2(int j, int u) { return 2 - kq3_bit2_shift(j, u); }

// IQ4_XS's table as vpshufb takes it, in every 16-byte lane (Offset 128: unsigned).
template <int Offset>
struct Iq4Table {
  alignas(64) uint8_t b[64];
  constexpr Iq4Table() : b{} {
    for (int i = 0; i < 64; ++i) b[i] = static_cast<uint8_t>(kIq4Values[i % 16] + Offset);
  }
};
inline constexpr Iq4Table<128> kIq4Unsigned{};
inline constexpr Iq4Table<0> kIq4Signed{};

// The activation sums that sub-block pair p's mins (Q6_K: scales) multiply, of token block tb
// (KQuantActs::sum32, Q6_K: sum16), as the two 16-bit halves of one madd operand.
template <QType Q>
inline int32_t kq_act_sum_pair(const KQuantActs& a, int64_t tb, int p) {
  const int16_t* sums = kq_sub_width(Q) == 16 ? a.sum16.data() + tb * 16 : a.sum32.data() + tb * 8;
  int32_t v;
  std::memcpy(&v, sums + 2 * p, 4);
  return v;
}

}  // namespace
}  // namespace ember::kernels::detail
