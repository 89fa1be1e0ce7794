#pragma once
// The table of GGUF architectures (llama.cpp's general.architecture values) Ember reads: what each
// stores differently from a Hugging Face folder of the same model_type, as named data. What the
// model_type itself implies (biases, q/k norms, Gemma's scaling and soft-capping, local RoPE, partial
// rotary, experts) stays in the architecture table. Adding a GGUF architecture is a row here plus the
// metadata keys it alone has, never a branch in the readers.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "model/architecture.h"
#include "model/config.h"

namespace ember::model {

class GgufFile;

// Which layers attend within {arch}.attention.sliding_window (the window itself is that key).
enum class GgufWindows : uint8_t {
  kNone,        // no window: llama.cpp attends to every position for these archs, any window key aside
  // every layer, when the key is non-zero (phi3, as transformers runs it; llama.cpp has Phi-3's window
  // switched off, and the shared files have 0)
  kAllLayers,
  kEvenLayers,  // layer i slides iff i is even (gemma2: llama.cpp's fixed period 2)
  // {arch}.attention.sliding_window_pattern: an array of one bool per layer (true: sliding) or a
  // uint32 period (layer i slides iff (i + 1) % period != 0); absent: period `default_period`
  kPattern,
};

struct GgufArchitecture {
  std::string_view arch;        // general.architecture
  std::string_view model_type;  // the row of the architecture table (model/architecture.h) it runs as
  // The model_type when {arch}.expert_count > 0 (Mixtral files are arch llama); "": experts refused.
  std::string_view moe_model_type;
  // Names Ember binds. Stored tensors keep llama.cpp's names; the parts split from fused or stacked
  // tensors (below) take the names these give them (matrices, expert()).
  const TensorNames* names;
  // attn_q / attn_k rows interleaved per head so that RoPE rotates adjacent pairs (convert_hf_to_gguf's
  // permute, arch llama and its relatives); false: Hugging Face's row order (NEOX RoPE).
  bool permuted_qk;
  // Every RMSNorm weight is stored as (1 + w): multiplied as stored, never incremented again (gemma).
  bool norms_stored_plus_one;
  Activation activation;
  GgufWindows windows;
  // kPattern only: the period when no pattern key is present; 0: the key is required, as an array.
  int64_t default_period;
  // gemma: no key carries query_pre_attn_scalar; llama.cpp scales scores by 1/sqrt(key_length), and by
  // 1/sqrt(embedding_length / head_count) for files of exactly this many blocks (the 27B models); 0: never.
  int64_t wide_query_scale_blocks;
  // Layer i skips RoPE iff (i + 1) % interval == 0 (smollm3: llama.cpp hard-codes 4, no key); 0: none.
  int64_t no_rope_interval;
  // Stems of fused projections split by rows at load: [q; k; v] and [gate; up] (phi3); "": stored apart.
  std::string_view fused_qkv, fused_gate_up;
  // Experts stacked in 3-D tensors named names->expert_matrices (gate, up, down; expert e is the e-th
  // slab of the outermost dimension), split at load into names->expert(layer, e, which); the router
  // is names->router.
  bool stacked_experts;
  // The key of the expert width: "expert_feed_forward_length" (qwen3moe), or "feed_forward_length"
  // for Mixtral's llama files, which have no expert width key.
  std::string_view expert_width_key;
  // The hybrids (Gated DeltaNet beside gated attention): how the linear-attention projections are
  // stored (kNone: no such layers), the stem of b and a stored in one tensor with Hugging Face's
  // grouped rows [b (r), a (r)] per key head, gathered at load ("": apart), and whether the value
  // heads are stored tiled (value head j of key head g at j * key_heads + g; run as stored, see
  // LinearAttentionConfig::tiled_value_heads).
  LinearRule linear_layout = LinearRule::kNone;
  std::string_view fused_ba = "";
  bool tiled_value_heads = false;
  // Whether convert (model/gguf_convert.h) writes Hugging Face folders of model_type and
  // moe_model_type as this arch, and one further model_type it writes so ("": none; Mistral as llama).
  bool writable = false;
  std::string_view also_written_from = "";
};

// The row of `arch`, or nullptr.
const GgufArchitecture* find_gguf_architecture(std::string_view arch);
// The row of the file's general.architecture; throws ember::Error naming the file, the key and
// every supported arch.
const GgufArchitecture& gguf_architecture(const GgufFile& g);
std::string supported_gguf_architectures();  // every arch of the table, comma-separated
// The arch convert writes a Hugging Face folder of `model_type` as, or nullptr.
const GgufArchitecture* gguf_architecture_to_write(std::string_view model_type);
std::string writable_model_types();  // every model_type convert writes, comma-separated

}  // namespace ember::model
