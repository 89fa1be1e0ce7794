#pragma once
// A loaded decoder-only transformer (the families of model/architecture.h) and its forward pass.
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kv_type.h"
#include "kernels/matmul.h"
#include "kernels/pack.h"
#include "kernels/quant.h"
#include "kernels/quant_mix.h"
#include "kernels/thread_pool.h"
#include "kernels/width_tuner.h"
#include "model/architecture.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/kv_cache.h"
#include "model/per_layer_embeddings.h"
#include "model/rope.h"
#include "model/safetensors.h"

namespace ember::model {

class GatedDeltaNet;
struct DeltaNetItem;

// What the commands and the public library store keys and values as unless told (--kv-dtype): F16,
// as llama.cpp does, half of F32's memory.
constexpr kernels::KvType kKvTypeDefault = kernels::KvType::F16;
// What model::LoadOptions itself defaults to: the reference precision the float32 goldens are
// compared at (F16 moves tiny-model logits by about 1e-2, beyond them).
constexpr kernels::KvType kKvTypeReference = kernels::KvType::F32;

// "f32", "f16", "bf16" or "q8_0" (the --kv-dtype flag); throws ember::Error otherwise.
kernels::KvType parse_kv_dtype(const std::string& name);

struct LoadOptions {
  int threads = 0;  // 0: all hardware threads
  // Called with a short description of each loading stage (for progress display).
  std::function<void(const std::string&)> progress;
  // Quantize weight matrices at load time (Q8_0, Q4_0 or Q4_K blocks held by the Model; matrices
  // whose width is not a multiple of 32 stay as stored; under Q4_K those not whole super-blocks of
  // 256 take Q8_0). The output projection gets Q8_0 whatever the type, as llama.cpp keeps it at
  // higher precision; the router and the embedding table stay as stored. A mix (Q4_K_M, Q5_K_M)
  // takes each matrix's type from kernels::mix_tensor_type, quantized by ggml's reference quantizers,
  // the token embedding too as llama-quantize's file holds it (tied: the output's blocks; untied: the
  // base type), its lookups dequantizing rows of those blocks.
  kernels::Quantization quantize = kernels::QType::None;
  // How KV caches made by make_cache store keys and values. F16 halves the cache's memory and the
  // bytes attention reads per token (attention still computes in float32); see kKvTypeDefault.
  kernels::KvType kv_dtype = kKvTypeReference;
  // Plain (float) weight matrices converted at load to this type (F32, F16 or BF16, rounding to
  // nearest even), e.g. a BF16 folder run in F16 as a llama.cpp F16 file is; unset: as stored.
  // Quantized matrices, the embedding table (unless tied to the output) and norms are not converted.
  std::optional<DType> weight_dtype = std::nullopt;
  // BF16 matrices (as stored or after weight_dtype) multiply activations rounded to BF16, llama.cpp's
  // precision for BF16 models: prefill and batched steps then run at the BF16 dot product's rate on
  // AVX512-BF16 CPUs (kernels::WeightMatrix::bf16_activations). A model with no BF16 matrix is an error.
  bool bf16_activations = false;
  // The output projection (lm_head): kRequired; kIfStored, loaded where the checkpoint has it (a
  // server of an embedding folder, which may not); kNone, never read (hidden states only, as `ember
  // embed`). Without it a forward pass that asks for logits is an error.
  enum class LmHead : uint8_t { kRequired, kIfStored, kNone } lm_head = LmHead::kRequired;
};

// Weights held in memory rather than mapped from files (e.g. a synthetic random model): tensors by
// Hugging Face name, their bytes in `data` under the same name.
struct InMemoryWeights {
  std::map<std::string, TensorInfo> tensors;
  std::map<std::string, std::vector<uint8_t>> data;
};

// One sequence's share of a forward pass: `tokens` are appended at positions seq->length() onwards.
struct ForwardItem {
  KvSequence* seq = nullptr;
  std::span<const int32_t> tokens;
  // Output: logits for the last token ([vocab]), or for every token ([tokens.size()][vocab]) if all_logits.
  float* logits = nullptr;
  bool all_logits = false;
  // The last `single_tail` tokens (speculative guesses) computed as passes of one token each would
  // compute them, the others as a pass of those alone would: every row has the bits of those passes
  // (the prompt attention kernel may differ from the one-token kernel in the last bits). Ignored by a
  // pass that recomputes the sequence.
  int64_t single_tail = 0;
  // Output: the final-normed hidden states of every token ([tokens.size()][hidden_size]), the
  // lm_head's input (what embeddings pool); null: not wanted.
  float* hidden = nullptr;
};

class Model {
 public:
  // `path`: a Hugging Face folder, or a GGUF file (*.gguf, see load_gguf).
  static std::unique_ptr<Model> load(const std::string& path, const LoadOptions& options = {});
  // A model from a config and in-memory weights (moved in; quantized sources are freed).
  static std::unique_ptr<Model> from_memory(ModelConfig config, InMemoryWeights weights, const LoadOptions& options = {});
  ~Model();

  const ModelConfig& config() const { return config_; }
  const std::string& dir() const { return dir_; }
  size_t weight_bytes() const { return gguf_ ? gguf_->file_size() : checkpoint_.total_bytes(); }
  // How the weights were converted at load when that is worth a line (e.g. a GGUF's K-quants), else "".
  const std::string& load_note() const { return load_note_; }
  // Bytes of weights one decode step reads (every layer matrix and the output projection, as held
  // in memory after any quantization): what bounds decode speed.
  int64_t decode_weight_bytes() const;
  // The type of the layer weight matrices as held in memory ("f32", "bf16", "f16", "q8_0", "q4_0"),
  // several joined by "+" when they differ.
  std::string weight_type() const;
  kernels::ThreadPool& pool() { return pool_; }
  // The type matrix m of `layer` is held in (QType::None: a plain float matrix; also where the layer
  // has no such matrix), the output projection's and the token embedding's.
  kernels::QType matrix_qtype(int64_t layer, LayerMatrix m) const;
  kernels::QType lm_head_qtype() const;
  kernels::QType embedding_qtype() const;  // the token embedding table the lookups read
  // False when loaded without lm_head (LoadOptions::lm_head): hidden states only.
  bool has_logits() const { return lm_head_.rows > 0; }

  // A KV cache of blocks of `block_size` positions, `max_tokens` positions in total (over all
  // sequences that will share it), stored in the LoadOptions' kv_dtype.
  std::unique_ptr<KvCache> make_cache(int64_t max_tokens, int64_t block_size = KvCache::kDefaultBlock) const;
  kernels::KvType kv_dtype() const { return kv_dtype_; }

  // Runs all items as one batch: matrix products over every token of every item, attention per
  // sequence over its cache. A LongRoPE sequence whose length crosses the original context in this
  // pass is computed again from its first token (recompute_length). Calls from several threads (a
  // server's scheduler and its embeddings) take turns: the passes share the model's scratch buffers.
  // Throws ember::Error, with every sequence unchanged, for a token outside the vocabulary, a cache
  // out of blocks, or logits asked of a model loaded without them.
  void forward(std::span<ForwardItem> batch);

  // Convenience: one sequence, logits of the last token.
  std::vector<float> forward(KvSequence& seq, std::span<const int32_t> tokens);

  // The positions of `seq` that a pass of `new_tokens` more computes again (all it holds, where its
  // length then crosses LongRoPE's original context either way; else 0): what a scheduler reserves
  // blocks and time for.
  int64_t recompute_length(const KvSequence& seq, int64_t new_tokens) const;

  // Called, where set, with each mixture-of-experts layer's choice in every forward pass: the layer,
  // and per expert the (token row of the pass, weight) pairs that chose it (what tests and tools
  // compare with a reference's routing). Not thread-safe against a running forward pass.
  using RouteObserver =
      std::function<void(int64_t layer, const std::vector<std::vector<std::pair<int64_t, float>>>& routed)>;
  void observe_routes(RouteObserver observer) { route_observer_ = std::move(observer); }

 private:
  struct Layer;
  struct Scratch;
  // Where bind_weights finds tensors: a mapped checkpoint, in-memory weights or a GGUF file's.
  struct Source {
    std::function<const TensorInfo*(const std::string&)> find;
    std::function<const TensorInfo&(const std::string&, const std::vector<int64_t>&)> require;
    // The matrix a tensor is bound as when it is not its plain bytes (a GGUF's block-quantized
    // tensors); null for the others.
    std::function<const kernels::WeightMatrix*(const std::string& name)> converted;
    // The matrix `t` is bound as: its converted form, else a view of its bytes.
    kernels::WeightMatrix bind(const TensorInfo& t) const;
  };
  struct Batch;
  Model(std::string dir, ModelConfig config, Checkpoint checkpoint, const LoadOptions& options);
  // A GGUF file (model/gguf_loader.cc): its tensors bound through kGgufNames by the same path as a folder's.
  static std::unique_ptr<Model> load_gguf(const std::string& path, const LoadOptions& options);
  // Binding, optional quantization and packing: what every loader ends with.
  void finish_load(const Source& src, const TensorNames& names, const LoadOptions& options);
  // The tensors of memory_ (from_memory, a converted GGUF); errors name `where`, and `why_absent`
  // (if set) says why a tensor is not there.
  Source memory_source(const std::string& where, std::function<std::string(const std::string&)> why_absent = {}) const;
  void bind_weights(const Source& src, const TensorNames& names, LoadOptions::LmHead lm_head);
  void bind_layer_matrices(const Source& src, const TensorNames& names, int64_t layer, Layer& L);
  void bind_fused_experts(const Source& src, const TensorNames& names, int64_t layer, Layer& L);
  void bind_mxfp4_experts(const Source& src, const std::string& gate_up, const std::string& down, Layer& L);
  void bind_gemma4_parts(const Source& src, const TensorNames& names, int64_t layer, Layer& L);
  // The forward pass proper, for a batch whose positions are reserved.
  void compute(std::span<ForwardItem> items, const Batch& b);
  void attention(const Batch& b, int64_t layer, const float* q, float* out);
  void project(const Layer& L, std::initializer_list<std::pair<LayerMatrix, float*>> outs, const float* x, int64_t n);
  // The MLP of x ([n][hidden]) into out: the dense one, or the layer's mixture of experts.
  void mlp(const Layer& L, const float* x, int64_t n, float* out);
  // route_in: what the router reads where it differs from x (Gemma 4); null: x.
  void experts(const Layer& L, const float* x, int64_t n, float* out, const float* route_in = nullptr);
  // Gemma 4's experts beside the dense MLP: out (the dense MLP's output) becomes the normed sum of
  // both, the experts reading the residual stream r ([n][hidden]).
  void experts_beside_dense(const Layer& L, const float* r, int64_t n, float* out);
  void activate(float* gate, const float* up, int64_t n) const;
  void logits(std::span<ForwardItem> items, const Batch& b);
  void final_hidden(std::span<ForwardItem> items, const Batch& b);
  // Rope::factor_set of the model's rotations for a sequence of length seq_len, as one number.
  int factor_set(int64_t seq_len) const;
  void quantize_weights(kernels::QType q);
  // A mix: each matrix's type by its role (`fused_qkv`: q, k and v are parts of one attn_qkv).
  void quantize_mix(kernels::QuantMix mix, bool fused_qkv);
  // w (a plain matrix) replaced by its quantized copy q, which the model keeps; its source released.
  void hold_quantized(kernels::WeightMatrix& w, kernels::QuantizedMatrix q);
  void pack_weights(std::optional<DType> to, bool bf16_activations);
  void release_source(const kernels::WeightMatrix& source);

  std::string dir_;
  ModelConfig config_;
  Checkpoint checkpoint_;
  std::shared_ptr<const GgufFile> gguf_;                // GGUF models: the mapped file
  std::string load_note_;
  bool qkv_fused_in_file_ = false;  // a GGUF file's attn_qkv, split at load (what a mix's rule reads)
  InMemoryWeights memory_;                              // weights of from_memory models
  kernels::WeightArena arena_;                       // memory of the repacked matrices below
  std::vector<kernels::QuantizedMatrix> quantized_;  // storage of quantized matrices
  std::vector<kernels::PackedMatrix> packed_;        // storage of panel-packed plain matrices
  // gpt-oss's experts split and transposed from their fused tensors, until packing copies them.
  std::vector<std::vector<uint8_t>> split_;
  kernels::ThreadPool pool_;
  // Whether a step of a given size runs faster on all threads or on one (see WidthTuner).
  kernels::WidthTuner tuner_;
  kernels::KvType kv_dtype_;
  kernels::WeightMatrix embed_, lm_head_;
  std::vector<float> final_norm_;
  std::vector<Layer> layers_;
  std::unique_ptr<Scratch> scratch_;
  Rope rope_, rope_local_;  // rope_local_: Gemma 3's sliding layers
  PerLayerEmbeddings ple_;  // Gemma 4's; width 0: none
  std::vector<float> unit_;  // ones: the weight of a weightless norm (Gemma 4's values and router)
  RouteObserver route_observer_;
  KvBatchView kv_view_;
  std::vector<kernels::AttentionItem> attention_items_;
  std::mutex forward_mu_;  // one forward pass at a time
  std::unique_ptr<GatedDeltaNet> deltanet_;  // the hybrids' linear-attention layers; null: none
  std::vector<DeltaNetItem> deltanet_items_;
};

}  // namespace ember::model
