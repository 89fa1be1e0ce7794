#pragma once
// llama.cpp's mixed quantizations (llama-quantize's Q4_K_M and Q5_K_M): a type per tensor from its
// role and layer, as src/llama-quant.cpp's llama_tensor_get_type chooses it, and what --quantize
// names (one type for every matrix, or a mix).
#include <cstdint>
#include <string>

#include "kernels/gguf_quants.h"
#include "kernels/matmul.h"

namespace ember::kernels {

enum class QuantMix : uint8_t { None, Q4_K_M, Q5_K_M };
const char* quant_mix_name(QuantMix m);  // "q4_k_m", "q5_k_m" ("none")

// What --quantize asks for: one type for every layer matrix (`type`), or a mix (`mix`, type None).
struct Quantization {
  QType type = QType::None;
  QuantMix mix = QuantMix::None;
  constexpr Quantization() = default;
  constexpr Quantization(QType t) : type(t) {}     // NOLINT(google-explicit-constructor): a type is a uniform quantization
  constexpr Quantization(QuantMix m) : mix(m) {}   // NOLINT(google-explicit-constructor)
  bool operator==(const Quantization&) const = default;
};
// Its --quantize name: qtype_name(type), or the mix's.
std::string quantization_name(const Quantization& q);
// A name of quantize_names() (kernels/quant.h); throws ember::Error naming them otherwise.
Quantization parse_quantization(const std::string& s);

// What a matrix is to llama.cpp's rule (GGUF names: attn_q, attn_k, attn_v, attn_qkv, attn_output,
// ffn_gate, ffn_up, ffn_down (experts' and shared experts' too), output, or the tied token_embd that
// serves as output), kOther for the rest (they take the mix's base type).
enum class TensorRole : uint8_t { kAttnQ, kAttnK, kAttnV, kAttnQkv, kAttnOutput, kFfnGate, kFfnUp, kFfnDown, kOutput, kOther };

// llama.cpp's use_more_bits: the first and last eighth of n layers and every third between.
constexpr bool use_more_bits(int layer, int n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

// The ggml type a matrix of `cols` columns takes under `mix` (not None), as llama.cpp's
// llama_tensor_get_type for LLAMA_FTYPE_MOSTLY_Q4_K_M / Q5_K_M without overrides or an importance
// matrix:
//   output (and a tied embedding): Q6_K, Q8_0 where cols is not whole super-blocks of 256;
//   attn_v (and a fused attn_qkv, which llama.cpp counts as attn_v) and ffn_down: Q6_K where
//     use_more_bits(layer, n_layers) (attn_v: `layer` counts layers with attention and n_layers is
//     their number; ffn_down: the layer of all n_layers);
//   with 8 experts: attn_v (attn_qkv) and attn_k Q8_0, attn_output Q5_K (Q4_K_M);
//   everything else the mix's base type: Q4_K (Q4_K_M), Q5_K (Q5_K_M).
// Rows not whole super-blocks fall back as llama.cpp's tensor_type_fallback does: Q4_K to Q5_0, Q5_K
// to Q5_1, Q6_K to Q8_0, and to F16 (kept as stored) where even 32 does not divide them.
GgmlType mix_tensor_type(QuantMix mix, TensorRole role, int layer, int n_layers, int64_t cols, int n_experts = 0);

}  // namespace ember::kernels
