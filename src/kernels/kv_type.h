#pragma once
// How a KV cache stores keys and values: one row is one kv head's head_dim values at one position.
// F32, F16 and BF16 store elements; Q8_0 stores blocks of int8 values with an F16 scale each, as
// llama.cpp's q8_0 cache type does (about 1.06 bytes per value at head sizes that are multiples of 32).
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>

#include "base/dtype.h"

namespace ember::kernels {

enum class KvType : uint8_t { F32, F16, BF16, Q8_0 };

const char* kv_type_name(KvType t);                    // "f32", "f16", "bf16", "q8_0" (--kv-dtype)
std::optional<KvType> parse_kv_type(std::string_view name);
// Every KV type's name, in the table's order: what --kv-dtype accepts.
std::span<const char* const> kv_type_names();

// Values per Q8_0 block for a head size: 32, or 16 or 8 for small heads (each block needs whole
// SIMD loads); 0 when the head size is not a multiple of 8.
constexpr int64_t kv_q8_block(int64_t head_dim) {
  return head_dim % 32 == 0 ? 32 : head_dim % 16 == 0 ? 16 : head_dim % 8 == 0 ? 8 : 0;
}

// Bytes of one row; throws ember::Error when the type cannot store rows of this head size.
int64_t kv_row_bytes(KvType t, int64_t head_dim);

// dst = the n values of src as a row of type t (F16/BF16 round to nearest even; Q8_0 rounds each
// block to its absolute maximum / 127).
void store_kv_row(const float* src, int64_t n, KvType t, void* dst);

// Value i of a Q8_0 row of blocks of B values: each block is an F16 scale then B int8 values.
template <int64_t B>
inline float q8_row_value(const void* row, int64_t i) {
  const auto* blk = static_cast<const uint8_t*>(row) + (i / B) * (B + 2);
  uint16_t h;
  std::memcpy(&h, blk, 2);
  return f16_to_f32(h) * static_cast<float>(static_cast<int8_t>(blk[2 + i % B]));
}

}  // namespace ember::kernels
