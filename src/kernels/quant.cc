#include "kernels/quant.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/format.h"
#include "kernels/kquant.h"
#include "kernels/simd_avx2.h"

namespace ember::kernels {

const char* qtype_name(QType q) {
  switch (q) {
    case QType::None: return "none";
    case QType::Q8_0: return "q8_0";
    case QType::Q4_0: return "q4_0";
    case QType::Q4_K: return "q4_k";
    case QType::Q5_K: return "q5_k";
    case QType::Q6_K: return "q6_k";
    case QType::Q4_1: return "q4_1";
    case QType::Q5_0: return "q5_0";
    case QType::Q5_1: return "q5_1";
    case QType::IQ4_NL: return "iq4_nl";
    case QType::Q2_K: return "q2_k";
    case QType::Q3_K: return "q3_k";
    case QType::IQ4_XS: return "iq4_xs";
    case QType::IQ3_S: return "iq3_s";
    case QType::MXFP4: return "mxfp4";
  }
  return "?";
}

namespace {
constexpr QType kQuantizeTo[] = {QType::None, QType::Q8_0, QType::Q4_0, QType::Q4_K};
constexpr const char* kQuantizeNames[] = {"none", "q8_0", "q4_0", "q4_k"};
static_assert(std::size(kQuantizeTo) == std::size(kQuantizeNames));
// The uniform types, then llama.cpp's mixes (kernels/quant_mix.h).
constexpr const char* kQuantizeAll[] = {"none", "q8_0", "q4_0", "q4_k", "q4_k_m", "q5_k_m"};
}  // namespace

std::span<const char* const> quantize_names() { return kQuantizeAll; }

QType parse_qtype(const std::string& s) {
  for (size_t i = 0; i < std::size(kQuantizeTo); ++i)
    if (s == kQuantizeNames[i]) return kQuantizeTo[i];
  fail("quantize", "unknown quantization '" + s + "' (supported: " + one_of(kQuantizeNames) + ")");
}

int64_t quantized_bytes(QType q, int64_t rows, int64_t cols) {
  if (is_kquant(q)) return kquant_bytes(q, rows, cols);
  const int64_t groups = (rows + kQGroupRows - 1) / kQGroupRows, blocks = cols / kQBlock;
  return groups * blocks * (qblock_bytes(q) + qscale_stride(q) * 2);
}

namespace {

// Byte offset of weight (i, k) of one (group, block) tile: 4-byte units of 16 rows per vector.
inline int64_t unit_offset(int64_t i, int64_t k) { return ((k / kQUnit) * kQGroupRows + i) * kQUnit + k % kQUnit; }

}  // namespace

QuantizedMatrix QuantizedMatrix::allocate(QType q, int64_t rows, int64_t cols, WeightArena* arena) {
  const int64_t nb = cols / kQBlock, ng = (rows + kQGroupRows - 1) / kQGroupRows;
  QuantizedMatrix m;
  m.n_quant_bytes_ = is_kquant(q) ? kquant_bytes(q, rows, cols) : ng * nb * qblock_bytes(q);
  m.n_scales_ = is_kquant(q) ? 0 : ng * nb * qscale_stride(q);
  m.scales_at_ = (m.n_quant_bytes_ + 63) / 64 * 64;
  const int64_t bytes = m.scales_at_ + m.n_scales_ * 2;
  m.memory_ = arena != nullptr ? arena->take(bytes) : WeightBuffer(bytes);
  m.view_ = WeightMatrix{m.memory_.data(), DType::F32, rows, cols, q, m.n_scales_ > 0 ? m.scales() : nullptr};
  return m;
}

QuantizedMatrix quantize(const WeightMatrix& w, QType q, ThreadPool& pool, WeightArena* arena) {
  if (q == QType::None || w.qtype != QType::None) fail("quantize", "needs a plain float matrix and a quantized type");
  if (!quantizable(w.cols, q))
    fail("quantize", "columns (" + std::to_string(w.cols) + ") must be a multiple of " + std::to_string(is_kquant(q) ? kQK_K : kQBlock));
  if (q == QType::Q4_K) {
    QuantizedMatrix m = QuantizedMatrix::allocate(q, w.rows, w.cols, arena);
    const int64_t group_bytes = w.cols / kQK_K * kq_tile_bytes(q);
    pool.parallel_for(kquant_groups(w.rows), 1, [&](int64_t g0, int64_t g1) {
      std::vector<float> row(static_cast<size_t>(w.cols));
      for (int64_t r = g0 * kKqRows; r < std::min(w.rows, g1 * kKqRows); ++r) {
        copy_row(w, r, row.data());
        quantize_q4_k_row(row.data(), w.cols, m.memory_.data() + (r / kKqRows) * group_bytes, r % kKqRows);
      }
    });
    return m;
  }
  if (q != QType::Q8_0 && q != QType::Q4_0)
    fail("quantize", std::string("Ember does not quantize to ") + qtype_name(q) + " (q8_0, q4_0, q4_k)");
  const int64_t nb = w.cols / kQBlock, ng = (w.rows + kQGroupRows - 1) / kQGroupRows, bb = qblock_bytes(q);
  QuantizedMatrix m = QuantizedMatrix::allocate(q, w.rows, w.cols, arena);
  uint8_t* quants = m.memory_.data();
  uint16_t* scales = m.scales();
  pool.parallel_for(ng, 1, [&](int64_t g0, int64_t g1) {
    std::vector<float> row(static_cast<size_t>(w.cols));
    for (int64_t g = g0; g < g1; ++g)
      for (int64_t i = 0; i < kQGroupRows; ++i) {
        const int64_t r = g * kQGroupRows + i;
        if (r >= w.rows) {
          if (q == QType::Q4_0)  // padding rows: value 0 is nibble 8
            for (int64_t b = 0; b < nb; ++b)
              for (int64_t k = 0; k < kQ4Half; ++k) quants[(g * nb + b) * bb + unit_offset(i, k)] = 0x88;
          continue;
        }
        copy_row(w, r, row.data());
        for (int64_t b = 0; b < nb; ++b) {
          const float* v = row.data() + b * kQBlock;
          uint8_t* tile = quants + (g * nb + b) * bb;
          float d;
          if (q == QType::Q8_0) {
            float amax = 0.0f;
            for (int64_t k = 0; k < kQBlock; ++k) amax = std::max(amax, std::fabs(v[k]));
            d = amax / 127.0f;
            const float id = d != 0.0f ? 1.0f / d : 0.0f;
            for (int64_t k = 0; k < kQBlock; ++k)
              tile[unit_offset(i, k)] = static_cast<uint8_t>(static_cast<int8_t>(std::nearbyint(v[k] * id)));
          } else {
            float amax = 0.0f, mx = 0.0f;
            for (int64_t k = 0; k < kQBlock; ++k)
              if (std::fabs(v[k]) > amax) amax = std::fabs(v[k]), mx = v[k];
            d = mx / -8.0f;
            const float id = d != 0.0f ? 1.0f / d : 0.0f;
            for (int64_t k = 0; k < kQ4Half; ++k) {
              const int lo = std::min(15, static_cast<int>(v[k] * id + 8.5f));
              const int hi = std::min(15, static_cast<int>(v[k + kQ4Half] * id + 8.5f));
              tile[unit_offset(i, k)] = static_cast<uint8_t>(lo | (hi << 4));
            }
          }
          scales[(g * nb + b) * kQGroupRows + i] = f32_to_f16(d);
        }
      }
  });
  return m;
}

QType stored_qtype(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0: return QType::Q8_0;
    case GgmlType::Q4_0: return QType::Q4_0;
    case GgmlType::Q4_1: return QType::Q4_1;
    case GgmlType::Q5_0: return QType::Q5_0;
    case GgmlType::Q5_1: return QType::Q5_1;
    case GgmlType::IQ4_NL: return QType::IQ4_NL;
    case GgmlType::MXFP4: return QType::MXFP4;
    default: return kquant_of(type);
  }
}

namespace {

// One ggml block of a 32-weight type (gguf_quants.cc's layouts) into row i of its tile (zeroed) and
// its scale (and min) slots.
void repack_block32(QType q, const uint8_t* blk, uint8_t* tile, uint16_t* scales, int64_t i) {
  if (qhas_e8m0_scale(q)) reinterpret_cast<uint8_t*>(scales)[i] = blk[0];
  else std::memcpy(&scales[i], blk, 2);
  if (qhas_min(q)) std::memcpy(&scales[kQGroupRows + i], blk + 2, 2);
  const int64_t head = qhas_e8m0_scale(q) ? 1 : qhas_min(q) ? 4 : 2;  // E8M0 e, or float16 d (and m)
  if (q == QType::Q8_0) {
    for (int64_t k = 0; k < kQBlock; ++k) tile[unit_offset(i, k)] = blk[head + k];
    return;
  }
  // ggml's byte k holds weights k (low nibble) and k + 16 (high), as this layout does.
  const uint8_t* qs = blk + head + (qhas_fifth_bits(q) ? 4 : 0);
  for (int64_t k = 0; k < kQ4Half; ++k) tile[unit_offset(i, k)] = qs[k];
  if (qhas_fifth_bits(q)) {  // bit e of the little-endian qh word: weight e's fifth bit
    uint32_t qh;
    std::memcpy(&qh, blk + head, 4);
    for (int64_t m = 0; m < kQUnit; ++m) {
      uint8_t bits = 0;
      for (int64_t j = 0; j < kQBlock / kQUnit; ++j) bits = static_cast<uint8_t>(bits | (((qh >> (kQUnit * j + m)) & 1u) << j));
      tile[kQNibbleBytes + unit_offset(i, m)] = bits;
    }
  }
}

}  // namespace

QuantizedMatrix from_ggml_blocks(GgmlType type, const void* data, int64_t rows, int64_t cols, ThreadPool& pool,
                                 WeightArena* arena) {
  if (const QType k = kquant_of(type); k != QType::None) {
    if (cols <= 0 || cols % kQK_K != 0)
      fail("from_ggml_blocks", std::string(ggml_type_name(type)) + " rows of " + std::to_string(cols) +
                                   " columns are not whole super-blocks of 256");
    QuantizedMatrix m = QuantizedMatrix::allocate(k, rows, cols, arena);
    repack_kquant(k, static_cast<const uint8_t*>(data), rows, cols, m.memory_.data(), pool);
    return m;
  }
  const QType q = stored_qtype(type);
  if (q == QType::None)
    fail("from_ggml_blocks", std::string("cannot repack ") + ggml_type_name(type) +
                                 " (supported: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, "
                                 "Q6_K, IQ4_XS, IQ3_S)");
  if (!quantizable(cols))
    fail("from_ggml_blocks", std::string(ggml_type_name(type)) + " rows of " + std::to_string(cols) +
                                 " columns are not whole blocks of 32");
  const int64_t nb = cols / kQBlock, ng = (rows + kQGroupRows - 1) / kQGroupRows, bb = qblock_bytes(q);
  const int64_t in_block = ggml_type_info(type).block_bytes, ss = qscale_stride(q);
  QuantizedMatrix m = QuantizedMatrix::allocate(q, rows, cols, arena);
  uint8_t* quants = m.memory_.data();
  uint16_t* scales = m.scales();
  const auto* src = static_cast<const uint8_t*>(data);
  pool.parallel_for(ng, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g)
      for (int64_t i = 0; i < kQGroupRows; ++i) {
        const int64_t r = g * kQGroupRows + i;
        for (int64_t b = 0; b < nb; ++b) {
          uint8_t* tile = quants + (g * nb + b) * bb;
          if (r >= rows) {  // padding rows: weight 0 (Q4_0 stores it as nibble 8)
            if (q == QType::Q4_0)
              for (int64_t k = 0; k < 16; ++k) tile[unit_offset(i, k)] = 0x88;
            continue;
          }
          repack_block32(q, src + (r * nb + b) * in_block, tile, scales + (g * nb + b) * ss, i);
        }
      }
  });
  return m;
}

QuantizedMatrix quantize_ggml(const WeightMatrix& w, GgmlType type, ThreadPool& pool, WeightArena* arena) {
  if (w.qtype != QType::None) fail("quantize", "needs a plain float matrix");
  const int64_t row_bytes = ggml_row_bytes(type, w.cols);
  std::vector<uint8_t> blocks(static_cast<size_t>(w.rows * row_bytes));
  pool.parallel_for(w.rows, 16, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(w.cols));
    for (int64_t r = r0; r < r1; ++r) {
      copy_row(w, r, row.data());
      quantize_row_ref(type, row.data(), w.cols, blocks.data() + r * row_bytes);
    }
  });
  return from_ggml_blocks(type, blocks.data(), w.rows, w.cols, pool, arena);
}

int quant_at(const WeightMatrix& w, int64_t r, int64_t c) {
  const int64_t nb = w.cols / kQBlock, g = r / kQGroupRows, i = r % kQGroupRows, b = c / kQBlock, k = c % kQBlock;
  const uint8_t* tile = static_cast<const uint8_t*>(w.data) + (g * nb + b) * qblock_bytes(w.qtype);
  if (w.qtype == QType::Q8_0) return static_cast<int8_t>(tile[unit_offset(i, k)]);
  const uint8_t byte = tile[unit_offset(i, k % kQ4Half)];
  int v = k < kQ4Half ? (byte & 0x0F) : (byte >> 4);
  if (qhas_fifth_bits(w.qtype)) v |= ((tile[kQNibbleBytes + unit_offset(i, k % kQUnit)] >> (k / kQUnit)) & 1) << 4;
  switch (w.qtype) {
    case QType::Q4_0: return v - 8;
    case QType::Q5_0: return v - 16;
    case QType::IQ4_NL: case QType::MXFP4: return qtable_value(w.qtype, v);
    default: return v;  // Q4_1, Q5_1: the min is added
  }
}

float scale_at(const WeightMatrix& w, int64_t r, int64_t block) {
  const int64_t nb = w.cols / kQBlock;
  const uint16_t* slots = w.scales + ((r / kQGroupRows) * nb + block) * qscale_stride(w.qtype);
  if (qhas_e8m0_scale(w.qtype)) return e8m0_half_to_f32(reinterpret_cast<const uint8_t*>(slots)[r % kQGroupRows]);
  return f16_to_f32(slots[r % kQGroupRows]);
}

float min_at(const WeightMatrix& w, int64_t r, int64_t block) {
  if (!qhas_min(w.qtype)) return 0.0f;
  const int64_t nb = w.cols / kQBlock;
  return f16_to_f32(w.scales[((r / kQGroupRows) * nb + block) * qscale_stride(w.qtype) + kQGroupRows + r % kQGroupRows]);
}

void quantize_acts(const float* x, int64_t n, int64_t cols, QuantizedActs& out, ThreadPool& pool) {
  static_assert(kQBlock == 32, "a block is four vectors of eight");
  const int64_t nb = cols / kQBlock;
  out.n = n;
  out.cols = cols;
  out.n_blocks = nb;
  out.q.resize(static_cast<size_t>(n * cols));
  out.d.resize(static_cast<size_t>(n * nb));
  out.s.resize(static_cast<size_t>(n * nb));
  // Tokens in parallel: the matmul waits for all of them. Vectors give the scalar form's exact
  // results: max and the product are exact operations, and the conversion rounds to nearest even
  // as nearbyint does.
  pool.parallel_for(n, 1, [&](int64_t t0, int64_t t1) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t b = 0; b < nb; ++b) {
        const float* v = x + t * cols + b * kQBlock;
        __m256 x4[4], m = _mm256_setzero_ps();
        for (int i = 0; i < 4; ++i) {
          x4[i] = _mm256_loadu_ps(v + 8 * i);
          m = _mm256_max_ps(m, _mm256_andnot_ps(sign, x4[i]));
        }
        const float amax = simd::hmax8(m);
        // As ggml's Q8_0 activations: quants from 127 / amax, the scale kept as float16.
        const float d = f16_to_f32(f32_to_f16(amax / 127.0f)), id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const __m256 vid = _mm256_set1_ps(id);
        __m256i q4[4];
        for (int i = 0; i < 4; ++i) q4[i] = _mm256_cvtps_epi32(_mm256_mul_ps(x4[i], vid));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.q.data() + t * cols + b * kQBlock), simd::pack_i8(q4));
        out.d[t * nb + b] = d;
        out.s[t * nb + b] = simd::hsum8(_mm256_add_epi32(_mm256_add_epi32(q4[0], q4[1]), _mm256_add_epi32(q4[2], q4[3])));
      }
  });
}

}  // namespace ember::kernels
