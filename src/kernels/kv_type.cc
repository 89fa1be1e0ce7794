#include "kernels/kv_type.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.h"
#include "kernels/ops.h"

namespace ember::kernels {

namespace {
constexpr KvType kKvTypes[] = {KvType::F32, KvType::F16, KvType::BF16, KvType::Q8_0};
constexpr const char* kKvTypeNames[] = {"f32", "f16", "bf16", "q8_0"};
static_assert(std::size(kKvTypes) == std::size(kKvTypeNames));
}  // namespace

const char* kv_type_name(KvType t) {
  for (size_t i = 0; i < std::size(kKvTypes); ++i)
    if (kKvTypes[i] == t) return kKvTypeNames[i];
  return "?";
}

std::span<const char* const> kv_type_names() { return kKvTypeNames; }

std::optional<KvType> parse_kv_type(std::string_view name) {
  for (size_t i = 0; i < std::size(kKvTypes); ++i)
    if (name == kKvTypeNames[i]) return kKvTypes[i];
  return std::nullopt;
}

int64_t kv_row_bytes(KvType t, int64_t head_dim) {
  switch (t) {
    case KvType::F32: return 4 * head_dim;
    case KvType::F16:
    case KvType::BF16: return 2 * head_dim;
    case KvType::Q8_0: {
      const int64_t b = kv_q8_block(head_dim);
      if (b == 0)
        fail("--kv-dtype q8_0", "needs a head size that is a multiple of 8 (this model's is " +
                                    std::to_string(head_dim) + "); use f16");
      return head_dim / b * (b + 2);
    }
  }
  return 0;
}

void store_kv_row(const float* src, int64_t n, KvType t, void* dst) {
  switch (t) {
    case KvType::F32: store_row(src, n, DType::F32, dst); return;
    case KvType::F16: store_row(src, n, DType::F16, dst); return;
    case KvType::BF16: store_row(src, n, DType::BF16, dst); return;
    case KvType::Q8_0: break;
  }
  const int64_t b = kv_q8_block(n);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t i0 = 0; i0 < n; i0 += b, out += b + 2) {
    float amax = 0.0f;
    for (int64_t i = i0; i < i0 + b; ++i) amax = std::max(amax, std::fabs(src[i]));
    const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = f32_to_f16(d);
    std::memcpy(out, &h, 2);
    for (int64_t i = 0; i < b; ++i) out[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::lrintf(src[i0 + i] * id)));
  }
}

}  // namespace ember::kernels
