#include "model/mxfp4_checkpoint.h"

namespace ember::model {

void mxfp4_row_to_ggml(const uint8_t* blocks, const uint8_t* scales, int64_t n_blocks, uint8_t* out) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* src = blocks + b * kMxfp4PairBytes;
    uint8_t* dst = out + b * kMxfp4GgmlBytes;
    dst[0] = scales[b];
    auto nibble = [src](int64_t m) { return (src[m / 2] >> (4 * (m % 2))) & 0x0F; };
    for (int64_t j = 0; j < kMxfp4PairBytes; ++j) dst[1 + j] = static_cast<uint8_t>(nibble(j) | (nibble(j + 16) << 4));
  }
}

}  // namespace ember::model
