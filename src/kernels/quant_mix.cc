#include "kernels/quant_mix.h"

#include "base/error.h"
#include "base/format.h"
#include "kernels/quant.h"

namespace ember::kernels {

const char* quant_mix_name(QuantMix m) {
  switch (m) {
    case QuantMix::Q4_K_M: return "q4_k_m";
    case QuantMix::Q5_K_M: return "q5_k_m";
    case QuantMix::None: break;
  }
  return "none";
}

std::string quantization_name(const Quantization& q) {
  return q.mix != QuantMix::None ? quant_mix_name(q.mix) : qtype_name(q.type);
}

Quantization parse_quantization(const std::string& s) {
  for (QuantMix m : {QuantMix::Q4_K_M, QuantMix::Q5_K_M})
    if (s == quant_mix_name(m)) return m;
  for (const char* name : quantize_names())
    if (s == name) return parse_qtype(s);
  fail("quantize", "unknown quantization '" + s + "' (supported: " + one_of(quantize_names()) + ")");
}

namespace {

// llama.cpp's tensor_type_fallback for the types a mix chooses.
GgmlType fallback(GgmlType t, int64_t cols) {
  if (cols % ggml_type_info(t).block_size == 0) return t;
  const GgmlType narrow = t == GgmlType::Q4_K ? GgmlType::Q5_0 : t == GgmlType::Q5_K ? GgmlType::Q5_1 : GgmlType::Q8_0;
  return cols % ggml_type_info(narrow).block_size == 0 ? narrow : GgmlType::F16;
}

}  // namespace

GgmlType mix_tensor_type(QuantMix mix, TensorRole role, int layer, int n_layers, int64_t cols, int n_experts) {
  const bool q4 = mix == QuantMix::Q4_K_M;
  using R = TensorRole;
  GgmlType t = q4 ? GgmlType::Q4_K : GgmlType::Q5_K;
  switch (role) {
    case R::kOutput:
      // The output's own rule: Q8_0 where its rows do not hold whole blocks of the base type.
      return cols % kQK_K != 0 ? fallback(GgmlType::Q8_0, cols) : GgmlType::Q6_K;
    case R::kAttnV:
    case R::kAttnQkv:  // llama.cpp counts attn_qkv as attn_v (category_is_attn_v)
      if (use_more_bits(layer, n_layers)) t = GgmlType::Q6_K;
      if (n_experts == 8) t = GgmlType::Q8_0;
      break;
    case R::kAttnK:
      if (n_experts == 8) t = GgmlType::Q8_0;
      break;
    case R::kAttnOutput:
      if (n_experts == 8 && q4) t = GgmlType::Q5_K;
      break;
    case R::kFfnDown:
      if (use_more_bits(layer, n_layers)) t = GgmlType::Q6_K;
      break;
    default: break;
  }
  return fallback(t, cols);
}

}  // namespace ember::kernels
