#pragma once
// gpt-oss's published MXFP4 experts (safetensors *_blocks / *_scales) as ggml's MXFP4 blocks, the form
// Ember's kernels keep (kernels/quant.h).
#include <cstdint>

namespace ember::model {

// Bytes of a checkpoint block (32 weights, two a byte) and of a ggml MXFP4 block (its E8M0 scale first).
inline constexpr int64_t kMxfp4PairBytes = 16, kMxfp4GgmlBytes = 17;

// One row of n_blocks blocks: `blocks` (16 bytes each; byte j holds weight 2j in its low nibble and
// 2j + 1 in its high one, as transformers reads them) and `scales` (one E8M0 byte each) into ggml's
// blocks at out (17 bytes each: the scale, then byte j with weight j low and j + 16 high). Lossless.
void mxfp4_row_to_ggml(const uint8_t* blocks, const uint8_t* scales, int64_t n_blocks, uint8_t* out);

}  // namespace ember::model
