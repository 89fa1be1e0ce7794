#pragma once
// Internal: what both K-quant kernel files (matmul_kquant_avx2.cc, matmul_kquant_avx512.cc) share.
// Internal linkage on purpose: each file compiles its own copy with its own target flags, so the
// AVX-512 build of a helper can never be the one an AVX2 machine runs.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/iq3s_grid.h"
#include "kernels/kquant.h"
#include "kernels/matmul_impl.h"

namespace ember::kernels::detail {
namespace {

// A tile's geometry (kquant.h): sub-block width, 4-weight units per sub-block, sub-block pairs.
template <QType Q>
struct KqShape {
  static constexpr int kWidth = kq_sub_width(Q);
  static constexpr int kUnits = kWidth / 4;
  static constexpr int kPairs = static_cast<int>(kQK_K) / (2 * kWidth);
  static constexpr int64_t kNibbles = kq_nibbles(Q);
};

// Decode (1-2 tokens) streams the weights from memory: one core keeps too few reads in flight to
// reach the bandwidth while it computes, so the tile two ahead is fetched,
// pair p's share of its lines, spread over the pairs (prefetches past the end do not fault; a whole
// tile's lines at once, Q6_K's 53 in a row, decoded 20-30% slower on Zen 4). Two tiles rather than
// kDecodePrefetchAhead's 4 KiB (1.8 Q4_K tiles, 1.2 Q6_K ones): 256 MiB from memory at one thread,
// Zen 4, Q6_K 86-88% -> 94% of the read probe, Q4_K 82-84% -> 83-87%.
template <QType Q>
[[gnu::always_inline]] inline void kq_prefetch_ahead(const uint8_t* tile, int p) {
  constexpr int64_t kLines = (kq_tile_bytes(Q) + kCacheLine - 1) / kCacheLine + 1;  // +1: tiles need not be aligned
  constexpr int kPerPair = static_cast<int>((kLines + KqShape<Q>::kPairs - 1) / KqShape<Q>::kPairs);
  const uint8_t* at = tile + 2 * kq_tile_bytes(Q) + kCacheLine * kPerPair * p;
  #pragma GCC unroll 16
  for (int l = 0; l < kPerPair; ++l) _mm_prefetch(reinterpret_cast<const char*>(at + kCacheLine * l), _MM_HINT_T0);
}

// A tile's packed 6-bit fields (kquant.h: Q3_K, Q4_K, Q5_K, IQ4_XS) as the bytes the other types
// store: field pair p of the 16 rows at out + 32 p in kq_pair_byte order, less 32 where signed.
// Once per tile, so that the sums read their factors with one widening load as for any type.
template <QType Q>
inline void kq_unpack_fields(const uint8_t* tile, uint8_t* out) {
  constexpr int kFields = kq_fields(Q);
  const uint8_t* lo = tile + kq_scales(Q);
  const uint8_t* hi = lo + kq_field_hi(Q, 0, 0);
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(kq_signed_scales(Q) ? 32 : 0));
  // Two field pairs (2q, 2q + 1) at once, one per 128-bit lane: their high bits share 16 bytes, pair
  // 2q's at bits 0-3 of each byte and 2q + 1's at bits 4-7.
  #pragma GCC unroll 4
  for (int q = 0; q < kFields / 4; ++q) {
    const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo + 32 * q));
    const __m256i h = _mm256_srlv_epi64(
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(hi + 16 * q))),
        _mm256_setr_epi64x(0, 0, 4, 4));
    const __m256i a = _mm256_or_si256(_mm256_and_si256(l, m4), _mm256_slli_epi16(_mm256_and_si256(h, m2), 4));
    const __m256i b = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l, 4), m4),
                                      _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m2), 4));
    const __m256i sa = _mm256_sub_epi8(a, bias), sb = _mm256_sub_epi8(b, bias);
    const __m256i rows_lo = _mm256_unpacklo_epi8(sa, sb), rows_hi = _mm256_unpackhi_epi8(sa, sb);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * q), _mm256_permute2x128_si256(rows_lo, rows_hi, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * q + 32), _mm256_permute2x128_si256(rows_lo, rows_hi, 0x31));
  }
}

// A group's scale bytes, super-block b's at at(b, ...) (kq_pair_byte order): the tiles' own, or for
// the packed types (kq_packed_fields) their fields unpacked. A prompt unpacks a group's once for all
// its token tiles (set); a decode step, which reads each tile once, unpacks each as it streams it
// (a separate pass over the group's scales would read them ahead of the prefetches).
template <QType Q>
class KqGroupScales {
 public:
  explicit KqGroupScales(const KQuantActs& a) : n_blocks_(a.n_blocks) {
    if (kq_packed_fields(Q) && a.n > 2) unpacked_.resize(static_cast<size_t>(n_blocks_ * kStride));
  }
  // Makes the group whose first tile is `tiles` current.
  void set(const uint8_t* tiles) {
    if (unpacked_.empty() || tiles == tiles_) return;
    for (int64_t b = 0; b < n_blocks_; ++b) kq_unpack_fields<Q>(tiles + b * kq_tile_bytes(Q), unpacked_.data() + b * kStride);
    tiles_ = tiles;
  }
  // Super-block b's scale bytes, `tile` its tile; `buf` (kStride bytes) where it is unpacked now.
  const uint8_t* at(int64_t b, const uint8_t* tile, uint8_t* buf) const {
    if constexpr (!kq_packed_fields(Q)) return tile + kq_scales(Q);
    if (!unpacked_.empty()) return unpacked_.data() + b * kStride;
    kq_unpack_fields<Q>(tile, buf);
    return buf;
  }
  static constexpr int64_t kStride = kq_packed_fields(Q) ? kq_unpacked_fields_bytes(Q) : 1;

 private:
  int64_t n_blocks_;
  std::vector<uint8_t> unpacked_;  // a prompt's: the current group's, kStride per super-block
  const uint8_t* tiles_ = nullptr;
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
