#pragma once
// A GGUF file's tensors as Ember binds them: each stored tensor as it is, except that fused projections
// (phi3's attn_qkv, ffn_up) are split by rows and stacked experts (ffn_*_exps) by slab, and the hybrids'
// tensors take Hugging Face's shapes (ssm_conv1d [C][1][K], the shared expert's gate [1][hidden]). Every
// part is a view of the file's bytes (a GgufTensor whose data points into the mapping), named as the
// architecture's TensorNames name it, so the bind path needs no GGUF-only branch. Two hybrid parts
// cannot be views: Qwen3-Next's ssm_ba rows gathered into b and a, and A_log = log(-ssm_a); their
// bytes go to `owned` under the part's name (small: 2 x value heads rows, and value heads floats).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/gguf.h"
#include "model/gguf_architecture.h"

namespace ember::model {

// Throws ember::Error naming the file and tensor when a fused or stacked tensor is missing or has
// another shape than the metadata gives.
std::vector<GgufTensor> gguf_bound_tensors(const GgufFile& g, const GgufArchitecture& arch, const ModelConfig& c,
                                           std::map<std::string, std::vector<uint8_t>>& owned);

}  // namespace ember::model
