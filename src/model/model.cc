#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/format.h"
#include "kernels/attention.h"
#include "kernels/cpu.h"
#include "kernels/ops.h"
#include "model/gated_attention.h"
#include "model/gated_deltanet.h"
#include "model/gguf_config.h"
#include "model/model_path.h"
#include "model/mxfp4_checkpoint.h"
#include "model/router.h"

namespace ember::model {

using kernels::WeightMatrix;

struct Model::Layer {
  // Indexed by LayerMatrix; a sparse layer has no gate, up and down (rows 0) but experts.
  std::array<WeightMatrix, kLayerMatrices> w;
  std::array<std::vector<float>, kLayerMatrices> bias;  // empty where the layer has none
  std::vector<float> attn_norm, mlp_norm, q_norm, k_norm;
  std::vector<float> post_attn_norm, post_mlp_norm;  // empty unless the config has post_norms
  kernels::AttentionShape attention;  // heads, scale and this layer's window
  const Rope* rope = nullptr;         // null: the layer does not rotate q and k
  WeightMatrix router;                // [num_experts][hidden]; rows 0 in a dense layer
  std::vector<std::array<WeightMatrix, 3>> experts;  // gate, up, down of each expert
  std::vector<float> router_bias;                    // empty unless MoeConfig::biases
  std::vector<std::array<std::vector<float>, 3>> expert_bias;  // the same
  std::vector<float> sinks;  // per query head (ModelConfig::attention_sinks); attention.sinks points here
  // Gemma 4: the router's input scale (router.scale / sqrt(hidden)) and per-expert scale, the
  // experts' input norm and the norms of the dense and expert outputs; empty elsewhere.
  std::vector<float> router_scale, expert_scale, expert_norm, dense_out_norm, experts_out_norm;
  PerLayerGate ple;     // Gemma 4's per-layer embedding input; gate.rows 0: none
  float scalar = 1.0f;  // the residual stream's scale after the layer (Gemma 4's layer_scalar)
  DeltaNetWeights delta;     // a LayerKind::kLinear layer's (its w[kQ..kO] then have rows 0)
  std::array<WeightMatrix, 3> shared_expert;  // gate, up, down (MoeConfig::shared_intermediate_size)
  WeightMatrix shared_gate;                   // [1][hidden]

  const WeightMatrix& operator[](LayerMatrix m) const { return w[static_cast<size_t>(m)]; }
};

namespace {
// Every matrix a layer holds (not the router when `with_router` is false), for the conversions.
template <class LayerT, class F>
void for_each_layer_matrix(LayerT& L, F&& f, bool with_router = true) {
  for (auto& m : L.w)
    if (m.rows > 0) f(m);
  if (with_router && L.router.rows > 0) f(L.router);
  for (auto& e : L.experts)
    for (auto& m : e) f(m);
  for (auto* m : {&L.ple.gate, &L.ple.projection})
    if (m->rows > 0) f(*m);
  for (auto& m : L.delta.in)
    if (m.rows > 0) f(m);
  if (L.delta.out.rows > 0) f(L.delta.out);
  for (auto& m : L.shared_expert)
    if (m.rows > 0) f(m);
  if (with_router && L.shared_gate.rows > 0) f(L.shared_gate);
}
}  // namespace

// Activations of one batch, reused across calls.
// Tokens a dense MLP computes at once (Model::mlp).
constexpr int64_t kMlpChunk = 64;

struct Model::Scratch {
  std::vector<float> x, xb, q, k, v, att, gate, up, last, logits;
  std::vector<float> router, moe_in, moe_out;                   // mixture-of-experts layers
  std::vector<std::vector<std::pair<int64_t, float>>> routed;  // per expert: (token, weight)
  std::vector<float> route_in, residual;                       // experts beside the dense MLP
  std::vector<float> pli, ple_gate;                            // per-layer embeddings
  std::vector<float> qg, attn_gate, shared_gate;               // gated attention; the shared expert's gate
  void resize(const ModelConfig& c, int64_t n) {
    x.resize(n * c.hidden_size);
    xb.resize(n * c.hidden_size);
    q.resize(n * c.max_q_dim());
    k.resize(n * c.max_kv_dim());
    v.resize(n * c.max_kv_dim());
    att.resize(n * c.max_q_dim());
    const int64_t width = std::max({c.max_mlp_width(), c.moe.intermediate_size, c.moe.shared_intermediate_size});
    // A dense MLP runs its tokens in chunks (Model::mlp); experts take all of a batch's tokens at once.
    const int64_t mlp_rows = c.moe.num_experts > 0 ? n : std::min(n, kMlpChunk);
    gate.resize(mlp_rows * width);
    up.resize(mlp_rows * width);
    last.resize(n * c.hidden_size);
    if (c.moe.num_experts > 0) {
      router.resize(n * c.moe.num_experts);
      moe_in.resize(n * c.hidden_size);
      moe_out.resize(n * c.hidden_size);
      routed.resize(static_cast<size_t>(c.moe.num_experts));
      shared_gate.resize(n);
    }
    if (c.attn_output_gate) {
      qg.resize(n * 2 * c.q_dim());
      attn_gate.resize(n * c.q_dim());
    }
    if (c.moe.beside_dense) {
      route_in.resize(n * c.hidden_size);
      residual.resize(n * c.hidden_size);
    }
    if (c.per_layer_input > 0) {
      pli.resize(n * c.num_hidden_layers * c.per_layer_input);
      ple_gate.resize(n * c.per_layer_input);
    }
  }
};

// Where each token of a batch goes: its sequence, its position, and its sequence's length after the
// pass (which dynamic RoPE scaling and LongRoPE depend on).
struct Model::Batch {
  int64_t n = 0;                           // tokens
  std::vector<const KvSequence*> seqs;     // per item
  std::vector<int64_t> first_pos;          // per item: where its computed tokens start
  std::vector<int64_t> held;               // per item: its sequence's length before the pass
  std::vector<std::span<const int32_t>> ids;  // per item: the tokens computed (from first_pos on)
  std::vector<std::vector<int32_t>> rerun;    // per item recomputed from position 0: its ids
  std::vector<int64_t> logit_rows;         // per item: the last rows whose logits it wants
  std::vector<int64_t> single_tail;        // per item: ForwardItem::single_tail (0 when recomputed)
  std::vector<size_t> item;                // per token
  std::vector<int64_t> pos;                // per token
  std::vector<int64_t> seq_len;            // per token: its sequence's length after the pass
};

namespace {

// How the linear-attention layers are stored: as the file says where it differs from the table (GGUF).
LinearRule linear_rule(const ModelConfig& c) {
  if (c.linear.layout != LinearRule::kNone) return c.linear.layout;
  const Architecture* a = find_architecture(c.model_type);
  return a == nullptr ? LinearRule::kNone : a->linear;
}

// A U8 tensor holds blocks of a format only its own reader knows (MXFP4): never numbers.
void require_numbers(const TensorInfo& t) {
  if (t.u8) fail(t.file, "tensor \"" + t.name + "\" is U8 (quantized blocks), where F32, F16 or BF16 values are expected");
}

WeightMatrix matrix(const TensorInfo& t) {
  require_numbers(t);
  return WeightMatrix{t.data, t.dtype, t.shape[0], t.shape.size() > 1 ? t.shape[1] : 1};
}

// Small vectors (norm weights, biases) are converted to float32 once; matrices stay as stored.
std::vector<float> vec(const TensorInfo& t) {
  require_numbers(t);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  kernels::copy_row(WeightMatrix{t.data, t.dtype, 1, t.numel()}, 0, out.data());
  return out;
}

// A norm's weights; Gemma's RMSNorm scales by (1 + weight), which is folded in here once.
std::vector<float> norm_vec(const TensorInfo& t, bool plus_one) {
  std::vector<float> out = vec(t);
  if (plus_one)
    for (float& v : out) v += 1.0f;
  return out;
}

// The Gemma 4 tensor names of a config that uses its pieces; a format that has none is an error.
const Gemma4Names& g4(const TensorNames& names) {
  if (names.gemma4 == nullptr) fail("model", "the config uses Gemma 4's per-layer pieces, but this format names none of their tensors");
  return *names.gemma4;
}

// Rows [first, first + rows) of a plain row-major matrix, as a matrix of its own (a fused
// projection's parts: they are then packed or quantized like any other matrix).
WeightMatrix row_block(const WeightMatrix& w, int64_t first, int64_t rows) {
  if (w.qtype != kernels::QType::None || w.layout != kernels::Layout::Rows)
    fail("fused projection", "a fused matrix must be stored plain to be split");
  const auto* base = static_cast<const uint8_t*>(w.data);
  return WeightMatrix{base + static_cast<size_t>(first * w.cols) * dtype_size(w.dtype), w.dtype, rows, w.cols};
}

// out[r][c] = src[r * row_step + c * col_step] for elements of `elem` (2 or 4) bytes: one expert's
// matrix gathered out of gpt-oss's fused, input-major tensors into the row-major [out][in] the matmul
// reads. Rows in parallel: gpt-oss-20b's experts are some 20 billion values.
std::vector<uint8_t> gather(const uint8_t* src, size_t elem, int64_t rows, int64_t cols, int64_t row_step,
                            int64_t col_step, kernels::ThreadPool& pool) {
  std::vector<uint8_t> out(static_cast<size_t>(rows * cols) * elem);
  auto copy = [&]<class T>(T) {
    pool.parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          T v;
          std::memcpy(&v, src + static_cast<size_t>(r * row_step + c * col_step) * sizeof(T), sizeof(T));
          std::memcpy(out.data() + static_cast<size_t>(r * cols + c) * sizeof(T), &v, sizeof(T));
        }
    });
  };
  if (elem == 2) copy(uint16_t{});
  else copy(uint32_t{});
  return out;
}

}  // namespace

kernels::KvType parse_kv_dtype(const std::string& name) {
  if (const auto t = kernels::parse_kv_type(name)) return *t;
  fail("--kv-dtype", "must be " + one_of(kernels::kv_type_names()) + " (got '" + name + "')");
}

Model::Model(std::string dir, ModelConfig config, Checkpoint checkpoint, const LoadOptions& options)
    : dir_(std::move(dir)), config_(std::move(config)), checkpoint_(std::move(checkpoint)), pool_(options.threads),
      tuner_(pool_.size()),
      kv_dtype_(options.kv_dtype), scratch_(std::make_unique<Scratch>()), rope_(config_),
      rope_local_(config_, config_.rope_local) {
  if (const LinearRule rule = linear_rule(config_); rule != LinearRule::kNone)
    deltanet_ = std::make_unique<GatedDeltaNet>(config_, rule);
  kernels::kv_row_bytes(kv_dtype_, config_.head_dim);  // refuses a KV type this head size cannot use
}

Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& dir, const LoadOptions& options) {
  check_model_path(dir);
  if (is_gguf_path(dir)) return load_gguf(dir, options);
  if (options.progress) options.progress("reading config.json");
  ModelConfig config = load_config(dir);
  if (options.progress) options.progress("mapping safetensors weights");
  Checkpoint cp = Checkpoint::open(dir);
  std::unique_ptr<Model> m(new Model(dir, std::move(config), std::move(cp), options));
  const Checkpoint& ck = m->checkpoint_;
  const TensorNames& names = *find_architecture(m->config_.model_type)->names;
  // A checkpoint of the base model alone names its tensors without the CausalLM wrapper's prefix.
  const bool base_only =
      ck.find(std::string(names.embed)) == nullptr && ck.find(std::string(names.without_base_prefix(names.embed))) != nullptr;
  auto stored = [&names, base_only](const std::string& n) {
    return base_only ? std::string(names.without_base_prefix(n)) : n;
  };
  m->finish_load(Source{[&](const std::string& n) { return ck.find(stored(n)); },
                        [&](const std::string& n, const std::vector<int64_t>& shape) -> const TensorInfo& {
                          return ck.require(stored(n), shape);
                        },
                        nullptr},
                 names, options);
  // Every matrix now lives in its packed or quantized copy: the mapped pages read to make them need
  // not stay resident (the embedding rows fault back in on use).
  m->checkpoint_.release_pages();
  return m;
}

void Model::finish_load(const Source& src, const TensorNames& names, const LoadOptions& options) {
  if (options.progress) options.progress("checking tensors");
  bind_weights(src, names, options.lm_head);
  if (options.quantize.mix != kernels::QuantMix::None) {
    if (options.progress)
      options.progress(std::string("quantizing weights to llama.cpp's ") + kernels::quant_mix_name(options.quantize.mix) +
                       " mix");
    quantize_mix(options.quantize.mix, qkv_fused_in_file_ || !names.fused_qkv.empty());
  } else if (options.quantize.type != kernels::QType::None) {
    if (options.progress) options.progress(std::string("quantizing weights to ") + kernels::qtype_name(options.quantize.type));
    quantize_weights(options.quantize.type);
  }
  if (options.progress)
    options.progress(options.weight_dtype ? std::string("converting weights to ") + dtype_name(*options.weight_dtype) +
                                                " and packing them for the matmul"
                                          : std::string("packing weights for the matmul"));
  pack_weights(options.weight_dtype, options.bf16_activations);
  split_.clear();  // every matrix split from them now has its packed copy
}

std::unique_ptr<Model> Model::from_memory(ModelConfig config, InMemoryWeights weights, const LoadOptions& options) {
  std::unique_ptr<Model> m(new Model("", std::move(config), Checkpoint{}, options));
  m->memory_ = std::move(weights);
  const Architecture* arch = find_architecture(m->config_.model_type);
  m->finish_load(m->memory_source("in-memory weights"), arch != nullptr ? *arch->names : kHuggingFaceNames, options);
  return m;
}

Model::Source Model::memory_source(const std::string& where,
                                   std::function<std::string(const std::string&)> why_absent) const {
  const auto* tensors = &memory_.tensors;
  auto find = [tensors](const std::string& n) -> const TensorInfo* {
    auto it = tensors->find(n);
    return it == tensors->end() ? nullptr : &it->second;
  };
  auto require = [find, where, why_absent](const std::string& n, const std::vector<int64_t>& shape) -> const TensorInfo& {
    const TensorInfo* t = find(n);
    if (t == nullptr)
      fail(where, why_absent ? why_absent(n) : "missing tensor \"" + n + "\" with shape " + shape_string(shape));
    if (t->shape != shape)
      fail(where, "tensor \"" + n + "\" has shape " + shape_string(t->shape) + ", expected " + shape_string(shape));
    return *t;
  };
  return Source{find, require, nullptr};
}

WeightMatrix Model::Source::bind(const TensorInfo& t) const {
  const WeightMatrix* w = converted ? converted(t.name) : nullptr;
  return w != nullptr ? *w : matrix(t);
}

// A matrix copied into packed or quantized form: its source is freed (in-memory weights) or its
// mapped pages dropped (a checkpoint, or a GGUF tensor used in place), so that loading never holds
// both copies of every matrix. Dropped pages fault back in when read: a tied embedding's are dropped
// too, and its lookup reads back only the rows it uses; heap memory it still reads is kept.
void Model::release_source(const WeightMatrix& source) {
  const size_t bytes = static_cast<size_t>(source.rows * source.cols) * dtype_size(source.dtype);
  // (Never madvise heap memory: it would zero it.)
  if (memory_.tensors.empty() || (gguf_ && gguf_->maps(source.data, bytes))) {
    release_pages(source.data, bytes);
    return;
  }
  if (source.data == embed_.data) return;
  // Only a whole tensor: the first block of a fused one is not the end of its other blocks.
  for (auto& [name, t] : memory_.tensors)
    if (t.data == source.data && t.size_bytes == bytes) memory_.data.erase(name);
}

void Model::hold_quantized(WeightMatrix& w, kernels::QuantizedMatrix q) {
  const WeightMatrix source = w;
  quantized_.push_back(std::move(q));
  w = quantized_.back().view();
  release_source(source);
}

void Model::quantize_weights(kernels::QType q) {
  auto convert = [&](WeightMatrix& w, kernels::QType type) {
    if (w.rows == 0 || !kernels::quantizable(w.cols) || w.qtype != kernels::QType::None) return;  // rows 0: no lm_head
    // Rows that are not whole K-quant super-blocks take Q8_0 (as llama.cpp falls back to a wider type).
    if (!kernels::quantizable(w.cols, type)) type = kernels::QType::Q8_0;
    hold_quantized(w, kernels::quantize(w, type, pool_, &arena_));
  };
  size_t count = 1;
  for (Layer& L : layers_) for_each_layer_matrix(L, [&](WeightMatrix&) { ++count; });
  quantized_.reserve(count);
  // The router stays as stored: its choice of experts is a hard decision that rounding can flip.
  for (Layer& L : layers_) for_each_layer_matrix(L, [&](WeightMatrix& w) { convert(w, q); }, false);
  convert(lm_head_, kernels::QType::Q8_0);
}

void Model::quantize_mix(kernels::QuantMix mix, bool fused_qkv) {
  using kernels::TensorRole;
  const int n_layers = static_cast<int>(layers_.size()), n_experts = static_cast<int>(config_.moe.num_experts);
  int n_attention = 0;
  for (const Layer& L : layers_) n_attention += L[LayerMatrix::kV].rows > 0 ? 1 : 0;
  auto convert = [&](WeightMatrix& w, TensorRole role, int layer, int n) {
    if (w.rows == 0 || w.qtype != kernels::QType::None) return;
    const kernels::GgmlType type = kernels::mix_tensor_type(mix, role, layer, n, w.cols, n_experts);
    if (!kernels::can_quantize_ref(type)) return;  // F16: rows not whole blocks of 32 stay as stored
    hold_quantized(w, kernels::quantize_ggml(w, type, pool_, &arena_));
  };
  size_t count = 1;
  for (Layer& L : layers_) for_each_layer_matrix(L, [&](WeightMatrix&) { ++count; });
  quantized_.reserve(count);
  constexpr std::array<TensorRole, kLayerMatrices> kRoles = {TensorRole::kAttnQ,      TensorRole::kAttnK, TensorRole::kAttnV,
                                                             TensorRole::kAttnOutput, TensorRole::kFfnGate,
                                                             TensorRole::kFfnUp,      TensorRole::kFfnDown};
  constexpr TensorRole kMlpRoles[] = {TensorRole::kFfnGate, TensorRole::kFfnUp, TensorRole::kFfnDown};
  int attention = 0;  // attn_v's index counts the layers with attention, as llama.cpp's i_attention_wv
  for (int l = 0; l < n_layers; ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    for (size_t m = 0; m < kLayerMatrices; ++m) {
      TensorRole role = kRoles[m];
      if (fused_qkv && m <= static_cast<size_t>(LayerMatrix::kV)) role = TensorRole::kAttnQkv;
      if (role == TensorRole::kAttnV) convert(L.w[m], role, attention, n_attention);
      else convert(L.w[m], role, l, n_layers);
    }
    attention += L[LayerMatrix::kV].rows > 0 ? 1 : 0;
    for (auto& e : L.experts)
      for (size_t i = 0; i < 3; ++i) convert(e[i], kMlpRoles[i], l, n_layers);
    for (size_t i = 0; i < 3; ++i) convert(L.shared_expert[i], kMlpRoles[i], l, n_layers);
    // The router stays as stored (see quantize_weights); the rest take the base type.
    for_each_layer_matrix(L, [&](WeightMatrix& w) { convert(w, TensorRole::kOther, l, n_layers); }, false);
  }
  // The token embedding as llama.cpp's file holds it, its lookups reading the blocks: tied, the output's
  // rows; untied, in the base type.
  const bool tied = embed_.data == lm_head_.data;
  const WeightMatrix embedding = embed_;
  convert(lm_head_, TensorRole::kOutput, 0, n_layers);
  if (!tied) {
    convert(embed_, TensorRole::kOther, 0, n_layers);
  } else if (lm_head_.qtype != kernels::QType::None) {
    embed_ = lm_head_;
    release_source(embedding);
  }
}

kernels::QType Model::matrix_qtype(int64_t layer, LayerMatrix m) const {
  return layers_.at(static_cast<size_t>(layer))[m].qtype;
}

kernels::QType Model::lm_head_qtype() const { return lm_head_.qtype; }

kernels::QType Model::embedding_qtype() const { return embed_.qtype; }

// Plain matrices the matmul reads are repacked into panels (kernels/pack.h), converted to `to` if
// given. A tied embedding then reads its rows from the packed head, so that matrix is held once.
void Model::pack_weights(std::optional<DType> to, bool bf16_activations) {
  const bool tied = embed_.data == lm_head_.data;
  int64_t rounded = 0;  // matrices that take BF16-rounded activations
  auto convert = [&](WeightMatrix& w) {
    if (w.rows == 0 || w.qtype != kernels::QType::None || w.layout == kernels::Layout::Panels) return;
    const WeightMatrix source = w;
    packed_.push_back(kernels::pack(w, to.value_or(w.dtype), pool_, &arena_));
    w = packed_.back().view();
    if (bf16_activations && w.dtype == DType::BF16) {
      w.bf16_activations = true;
      ++rounded;
    }
    release_source(source);
  };
  size_t count = 2;  // the output and the per-layer embeddings' projection besides the layers'
  for (Layer& L : layers_) for_each_layer_matrix(L, [&](WeightMatrix&) { ++count; });
  packed_.reserve(count);
  for (Layer& L : layers_) for_each_layer_matrix(L, convert);
  convert(lm_head_);
  convert(ple_.projection);
  if (tied && lm_head_.layout == kernels::Layout::Panels) {
    const WeightMatrix source = embed_;
    embed_ = lm_head_;
    release_source(source);
  }
  if (!bf16_activations) return;
  if (rounded == 0)
    fail("weights", "BF16 activations are for BF16 weight matrices, and this model has none (its matrices: " +
                        weight_type() + "; --dtype bf16 converts plain ones)");
  load_note_ += std::string(load_note_.empty() ? "" : "; ") + "activations rounded to BF16 for " +
                std::to_string(rounded) + " BF16 matrices" +
                (kernels::bf16_dot_product_used() ? " (the CPU's BF16 dot product)"
                     : " (float32 kernels: no AVX512-BF16 here)");
}

int64_t Model::decode_weight_bytes() const {
  int64_t total = kernels::weight_bytes(lm_head_);
  if (!ple_.empty())  // the projection, and one row of the per-layer table per token (in its blocks, a GGUF's Q8_0)
    total += kernels::weight_bytes(ple_.projection) + kernels::weight_bytes(ple_.table) / ple_.table.rows;
  for (const Layer& L : layers_) {
    for (const WeightMatrix& w : L.w) total += kernels::weight_bytes(w);
    total += kernels::weight_bytes(L.router);
    for (const WeightMatrix* w : {&L.ple.gate, &L.ple.projection}) total += kernels::weight_bytes(*w);
    for (const WeightMatrix& w : L.delta.in) total += kernels::weight_bytes(w);
    total += kernels::weight_bytes(L.delta.out) + kernels::weight_bytes(L.shared_gate);
    for (const WeightMatrix& w : L.shared_expert) total += kernels::weight_bytes(w);
    // A token reads experts_per_tok of the experts (all of one size).
    if (!L.experts.empty()) {
      int64_t one = 0;
      for (const WeightMatrix& w : L.experts[0]) one += kernels::weight_bytes(w);
      total += one * config_.moe.experts_per_tok;
    }
  }
  return total;
}

std::string Model::weight_type() const {
  std::vector<std::string> types;
  for (const Layer& L : layers_)
    for_each_layer_matrix(L, [&](const WeightMatrix& w) {
      const std::string t = w.qtype != kernels::QType::None ? kernels::qtype_name(w.qtype) : dtype_lower_name(w.dtype);
      if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
    }, false);
  std::string out;
  for (const std::string& t : types) out += (out.empty() ? "" : "+") + t;
  return out;
}

void Model::bind_weights(const Source& cp, const TensorNames& names, LoadOptions::LmHead lm_head) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, V = c.vocab_size;
  if (static_cast<int64_t>(c.layers.size()) != c.num_hidden_layers)
    fail("model config", "describes " + std::to_string(c.layers.size()) + " layers but num_hidden_layers is " +
                             std::to_string(c.num_hidden_layers));
  // Tied checkpoints store the shared matrix under either name.
  const std::string embed_name(names.embed), head_name(names.lm_head);
  const TensorInfo* embed = cp.find(embed_name);
  const TensorInfo* head = cp.find(head_name);
  if (embed == nullptr && c.tie_word_embeddings) embed = head;
  if (embed == nullptr) embed = &cp.require(embed_name, {V, H});
  const bool stored = c.tie_word_embeddings || head != nullptr;
  if (!stored && lm_head == LoadOptions::LmHead::kRequired) cp.require(head_name, {V, H});
  const bool with_logits = lm_head != LoadOptions::LmHead::kNone && stored;
  if (c.tie_word_embeddings || head == nullptr) head = embed;
  auto bind = [&](const TensorInfo& t) { return cp.bind(t); };
  embed_ = bind(cp.require(embed->name, {V, H}));
  if (with_logits) lm_head_ = bind(cp.require(head->name, {V, H}));
  const bool plus = c.norm_plus_one;
  final_norm_ = norm_vec(cp.require(std::string(names.final_norm), {H}), plus);
  unit_.assign(static_cast<size_t>(std::max(H, c.max_q_dim())), 1.0f);
  if (c.per_layer_input > 0) {
    const int64_t P = c.per_layer_input, LP = c.num_hidden_layers * P;
    ple_.layers = c.num_hidden_layers;
    ple_.width = P;
    ple_.table = bind(cp.require(std::string(g4(names).ple_table), {c.per_layer_vocab, LP}));
    ple_.projection = bind(cp.require(std::string(g4(names).ple_projection), {LP, H}));
    ple_.norm = norm_vec(cp.require(std::string(g4(names).ple_norm), {P}), plus);
  }

  layers_.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    const LayerSpec& spec = c.layers[static_cast<size_t>(l)];
    L.attn_norm = norm_vec(cp.require(names.layer(l, names.attn_norm), {H}), plus);
    L.mlp_norm = norm_vec(cp.require(names.layer(l, names.mlp_norm), {H}), plus);
    if (c.post_norms) {
      L.post_attn_norm = norm_vec(cp.require(names.layer(l, names.post_attn_norm), {H}), plus);
      L.post_mlp_norm = norm_vec(cp.require(names.layer(l, names.post_mlp_norm), {H}), plus);
    }
    bind_layer_matrices(cp, names, l, L);
    if (spec.kind == LayerKind::kLinear) {
      L.delta = bind_deltanet(c, linear_rule(c), names, l, cp.require, bind);
      continue;  // no attention: no q/k norms, no KV
    }
    const int64_t D = c.head_dim_of(static_cast<size_t>(l));
    if (c.qk_norm) {
      L.q_norm = norm_vec(cp.require(names.layer(l, names.q_norm), {D}), plus);
      // A layer reading another's keys has no k_norm of its own (any stored is not used).
      if (spec.kv_source < 0) L.k_norm = norm_vec(cp.require(names.layer(l, names.k_norm), {D}), plus);
    }
    L.attention = kernels::AttentionShape{c.num_attention_heads, c.kv_heads_of(static_cast<size_t>(l)), D,
                                          spec.sliding_window, c.attention_scale(),
                                          static_cast<float>(c.attn_softcap)};
    bind_gemma4_parts(cp, names, l, L);
    if (c.attention_sinks) {
      L.sinks = vec(cp.require(names.layer(l, names.sinks, ""), {c.num_attention_heads}));
      L.attention.sinks = L.sinks.data();
    }
    L.rope = spec.rope == LayerRope::kNone ? nullptr : spec.rope == LayerRope::kLocal ? &rope_local_ : &rope_;
  }
}

// Gemma 4's per-layer pieces, where the config has them: the per-layer embedding's gate, the
// layer_scalar, and the scaled router with the norms around experts that run beside the dense MLP.
void Model::bind_gemma4_parts(const Source& cp, const TensorNames& names, int64_t l, Layer& L) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size;
  const bool plus = c.norm_plus_one;
  if (c.per_layer_input > 0) {
    const int64_t P = c.per_layer_input;
    L.ple.gate = cp.bind(cp.require(names.layer(l, g4(names).ple_gate), {P, H}));
    L.ple.projection = cp.bind(cp.require(names.layer(l, g4(names).ple_layer_projection), {H, P}));
    L.ple.norm = norm_vec(cp.require(names.layer(l, g4(names).ple_post_norm), {H}), plus);
  }
  if (c.layer_scalar) L.scalar = vec(cp.require(names.layer(l, g4(names).layer_scalar, ""), {1}))[0];
  if (!c.moe.beside_dense || !c.layers[static_cast<size_t>(l)].sparse_mlp) return;
  const int64_t E = c.moe.num_experts;
  L.router_scale = vec(cp.require(names.layer(l, g4(names).router_scale, ""), {H}));
  // The router reads norm0(r) * scale / sqrt(hidden): the constant is folded into the scale once.
  const auto root = static_cast<float>(1.0 / std::sqrt(static_cast<double>(H)));
  for (float& v : L.router_scale) v *= root;
  L.expert_scale = vec(cp.require(names.layer(l, g4(names).expert_scale, ""), {E}));
  L.expert_norm = norm_vec(cp.require(names.layer(l, g4(names).expert_norm), {H}), plus);
  L.dense_out_norm = norm_vec(cp.require(names.layer(l, g4(names).dense_out_norm), {H}), plus);
  L.experts_out_norm = norm_vec(cp.require(names.layer(l, g4(names).experts_out_norm), {H}), plus);
}

// A layer's matrices: as stored, split from fused projections, or a sparse layer's router and experts.
void Model::bind_layer_matrices(const Source& cp, const TensorNames& names, int64_t l, Layer& L) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size;
  auto bind = [&](const TensorInfo& t) { return cp.bind(t); };
  auto set = [&](LayerMatrix m, const WeightMatrix& w) { L.w[static_cast<size_t>(m)] = w; };
  const LayerSpec& spec = c.layers[static_cast<size_t>(l)];
  const bool sparse = spec.sparse_mlp;
  const bool linear = spec.kind == LayerKind::kLinear;
  for (LayerMatrix m : kAllLayerMatrices) {
    const bool mlp = m == LayerMatrix::kGate || m == LayerMatrix::kUp || m == LayerMatrix::kDown;
    // A layer reading another's keys computes none (k_proj / v_proj stored there are not used), one
    // using its keys as values has no v_proj, and a linear-attention layer has none of q/k/v/o.
    const bool no_kv = (m == LayerMatrix::kK || m == LayerMatrix::kV) && spec.kv_source >= 0;
    if ((mlp && sparse && !c.moe.beside_dense) || (!mlp && linear) || (c.fused_qkv && m <= LayerMatrix::kV) || no_kv ||
        (m == LayerMatrix::kV && spec.k_eq_v) || (c.fused_gate_up && (m == LayerMatrix::kGate || m == LayerMatrix::kUp)))
      continue;
    const auto [rows, cols] = c.shape(m, static_cast<size_t>(l));
    set(m, bind(cp.require(names.matrix(l, m), {rows, cols})));
    if (c.has_bias(m)) L.bias[static_cast<size_t>(m)] = vec(cp.require(names.matrix(l, m, ".bias"), {rows}));
  }
  if (c.fused_qkv) {  // rows q, then k, then v
    const int64_t Q = c.q_dim(), KV = c.kv_dim();
    const WeightMatrix qkv = bind(cp.require(names.layer(l, names.fused_qkv), {Q + 2 * KV, H}));
    set(LayerMatrix::kQ, row_block(qkv, 0, Q));
    set(LayerMatrix::kK, row_block(qkv, Q, KV));
    set(LayerMatrix::kV, row_block(qkv, Q + KV, KV));
  }
  if (c.fused_gate_up && !sparse) {  // rows gate, then up
    const int64_t I = c.intermediate_size;
    const WeightMatrix gu = bind(cp.require(names.layer(l, names.fused_gate_up), {2 * I, H}));
    set(LayerMatrix::kGate, row_block(gu, 0, I));
    set(LayerMatrix::kUp, row_block(gu, I, I));
  }
  if (!sparse) return;
  const int64_t E = c.moe.num_experts, I = c.moe.intermediate_size;
  L.router = bind(cp.require(names.layer(l, names.router), {E, H}));
  L.experts.resize(static_cast<size_t>(E));
  if (c.moe.biases) {
    L.router_bias = vec(cp.require(names.layer(l, names.router, ".bias"), {E}));
    L.expert_bias.resize(static_cast<size_t>(E));
  }
  if (c.moe.shared_intermediate_size > 0) {
    const int64_t SI = c.moe.shared_intermediate_size;
    for (size_t which = 0; which < 3; ++which) {
      const std::vector<int64_t> shape = which == 2 ? std::vector<int64_t>{H, SI} : std::vector<int64_t>{SI, H};
      const std::string stem = std::string(names.shared_expert) + "." + std::string(names.expert_matrices[which]);
      L.shared_expert[which] = bind(cp.require(names.layer(l, stem), shape));
    }
    L.shared_gate = bind(cp.require(names.layer(l, names.shared_expert_gate), {1, H}));
  }
  if (names.fused_experts) return bind_fused_experts(cp, names, l, L);
  // Each expert's rows of the stacked matrices (TensorNames::stacked_experts).
  const std::string prefix(names.expert_prefix);
  const std::string stacked_gate_up = names.layer(l, prefix + std::string(names.stacked_experts[0]), "");
  if (!names.stacked_experts[0].empty() && (names.expert_matrices[0].empty() || cp.find(stacked_gate_up) != nullptr)) {
    const TensorInfo& gu = cp.require(stacked_gate_up, {E, 2 * I, H});
    const TensorInfo& dn = cp.require(names.layer(l, prefix + std::string(names.stacked_experts[1]), ""), {E, H, I});
    const WeightMatrix gate_up{gu.data, gu.dtype, E * 2 * I, H}, down{dn.data, dn.dtype, E * H, I};
    for (int64_t e = 0; e < E; ++e) {
      auto& w = L.experts[static_cast<size_t>(e)];
      w[0] = row_block(gate_up, e * 2 * I, I);
      w[1] = row_block(gate_up, e * 2 * I + I, I);
      w[2] = row_block(down, e * H, H);
    }
    return;
  }
  for (int64_t e = 0; e < E; ++e)
    for (size_t which = 0; which < 3; ++which) {
      const std::vector<int64_t> shape = which == 2 ? std::vector<int64_t>{H, I} : std::vector<int64_t>{I, H};
      L.experts[static_cast<size_t>(e)][which] = bind(cp.require(names.expert(l, e, which), shape));
      if (c.moe.biases)  // gpt-oss's GGUF form: each expert's bias split from the stacked ones
        L.expert_bias[static_cast<size_t>(e)][which] = vec(cp.require(names.expert(l, e, which, ".bias"), {shape[0]}));
    }
}

// gpt-oss's experts: gate_up_proj [E][hidden][2I] (x @ W, gate in the even columns, up in the odd)
// and down_proj [E][I][hidden], each expert's parts gathered into row-major matrices of their own.
void Model::bind_fused_experts(const Source& cp, const TensorNames& names, int64_t l, Layer& L) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, E = c.moe.num_experts, I = c.moe.intermediate_size;
  const std::string gate_up = names.layer(l, std::string(names.expert_prefix) + std::string(names.expert_matrices[0]), "");
  const std::string down = names.layer(l, std::string(names.expert_prefix) + std::string(names.expert_matrices[2]), "");
  const std::vector<float> gu_bias = vec(cp.require(gate_up + "_bias", {E, 2 * I}));
  const std::vector<float> dn_bias = vec(cp.require(down + "_bias", {E, H}));
  for (int64_t e = 0; e < E; ++e) {
    auto& b = L.expert_bias[static_cast<size_t>(e)];
    for (int64_t i = 0; i < I; ++i) {
      b[0].push_back(gu_bias[static_cast<size_t>(e * 2 * I + 2 * i)]);
      b[1].push_back(gu_bias[static_cast<size_t>(e * 2 * I + 2 * i + 1)]);
    }
    b[2].assign(dn_bias.begin() + e * H, dn_bias.begin() + (e + 1) * H);
  }
  if (c.moe.mxfp4) return bind_mxfp4_experts(cp, gate_up, down, L);
  const TensorInfo& gu = cp.require(gate_up, {E, H, 2 * I});
  const TensorInfo& dn = cp.require(down, {E, I, H});
  for (const TensorInfo* t : {&gu, &dn})
    if ((cp.converted && cp.converted(t->name) != nullptr) || (dtype_size(t->dtype) != 2 && dtype_size(t->dtype) != 4))
      fail(t->name, "fused experts must be stored as F32, F16 or BF16 to be split");
  const size_t elem = dtype_size(gu.dtype);
  split_.reserve(split_.size() + static_cast<size_t>(3 * E));
  auto keep = [&](std::vector<uint8_t> bytes, DType dtype, int64_t rows, int64_t cols) {
    split_.push_back(std::move(bytes));
    return WeightMatrix{split_.back().data(), dtype, rows, cols};
  };
  for (int64_t e = 0; e < E; ++e) {
    const auto* g = static_cast<const uint8_t*>(gu.data) + static_cast<size_t>(e * H * 2 * I) * elem;
    const auto* d = static_cast<const uint8_t*>(dn.data) + static_cast<size_t>(e * I * H) * dtype_size(dn.dtype);
    auto& w = L.experts[static_cast<size_t>(e)];
    w[0] = keep(gather(g, elem, I, H, 2, 2 * I, pool_), gu.dtype, I, H);
    w[1] = keep(gather(g + elem, elem, I, H, 2, 2 * I, pool_), gu.dtype, I, H);
    w[2] = keep(gather(d, dtype_size(dn.dtype), H, I, 1, H, pool_), dn.dtype, H, I);
  }
}

// gpt-oss's published experts: *_blocks [E][out][in/32][16] and *_scales [E][out][in/32] (U8), the
// fused gate_up's rows interleaved (row 2j gate unit j, 2j + 1 up unit j). Each expert's matrices are
// rewritten as ggml MXFP4 rows (mxfp4_checkpoint.h) and kept in that form (kernels/quant.h), at the
// file's 17 bytes per 32 weights.
void Model::bind_mxfp4_experts(const Source& cp, const std::string& gate_up, const std::string& down, Layer& L) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, E = c.moe.num_experts, I = c.moe.intermediate_size;
  constexpr int64_t kBlock = 32;
  for (const int64_t in : {H, I})
    if (in % kBlock != 0) fail(gate_up, "MXFP4 experts need input widths that are whole blocks of 32 (got " + std::to_string(in) + ")");
  std::vector<const TensorInfo*> sources;
  auto part = [&](const std::string& stem, int64_t out, int64_t in) {
    const TensorInfo& blocks = cp.require(stem + "_blocks", {E, out, in / kBlock, kMxfp4PairBytes});
    const TensorInfo& scales = cp.require(stem + "_scales", {E, out, in / kBlock});
    for (const TensorInfo* t : {&blocks, &scales}) {
      if (!t->u8) fail(t->file, "tensor \"" + t->name + "\" must be U8 (MXFP4 blocks and scales)");
      sources.push_back(t);
    }
    return std::pair{static_cast<const uint8_t*>(blocks.data), static_cast<const uint8_t*>(scales.data)};
  };
  const auto [gu_blocks, gu_scales] = part(gate_up, 2 * I, H);
  const auto [dn_blocks, dn_scales] = part(down, H, I);
  // Rows first + k * step (k < rows) of expert e's [out][in] matrix as ggml MXFP4 rows.
  auto to_ggml = [&](const uint8_t* blocks, const uint8_t* scales, int64_t out, int64_t in, int64_t e, int64_t first,
                     int64_t step, int64_t rows) {
    const int64_t nb = in / kBlock;
    std::vector<uint8_t> g(static_cast<size_t>(rows * nb * kMxfp4GgmlBytes));
    pool_.parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t k = r0; k < r1; ++k) {
        const int64_t row = e * out + first + k * step;
        mxfp4_row_to_ggml(blocks + row * nb * kMxfp4PairBytes, scales + row * nb, nb, g.data() + k * nb * kMxfp4GgmlBytes);
      }
    });
    quantized_.push_back(kernels::from_ggml_blocks(kernels::GgmlType::MXFP4, g.data(), rows, in, pool_, &arena_));
    return quantized_.back().view();
  };
  for (int64_t e = 0; e < E; ++e) {
    auto& w = L.experts[static_cast<size_t>(e)];
    w[0] = to_ggml(gu_blocks, gu_scales, 2 * I, H, e, 0, 2, I);
    w[1] = to_ggml(gu_blocks, gu_scales, 2 * I, H, e, 1, 2, I);
    w[2] = to_ggml(dn_blocks, dn_scales, H, I, e, 0, 1, H);
  }
  // The source blocks are not read again: a checkpoint's mapped pages are dropped now, not after the
  // whole model (loading would otherwise hold every expert twice), in-memory ones (a synthetic model) freed.
  if (!memory_.tensors.empty()) {
    for (const TensorInfo* t : sources) memory_.data.erase(t->name);
  } else {
    for (const TensorInfo* t : sources) release_pages(t->data, t->size_bytes);
  }
}

std::unique_ptr<KvCache> Model::make_cache(int64_t max_tokens, int64_t block_size) const {
  return std::make_unique<KvCache>(config_, std::max<int64_t>(1, (max_tokens + block_size - 1) / block_size),
                                   block_size, kv_dtype_);
}

int Model::factor_set(int64_t seq_len) const {
  return rope_.factor_set(seq_len) + (config_.rope_local_used() ? 2 * rope_local_.factor_set(seq_len) : 0);
}

int64_t Model::recompute_length(const KvSequence& seq, int64_t new_tokens) const {
  return seq.length() > 0 && factor_set(seq.length() + new_tokens) != seq.factor_set() ? seq.length() : 0;
}

void Model::forward(std::span<ForwardItem> items) {
  const ModelConfig& c = config_;
  std::lock_guard lock(forward_mu_);
  Batch b;
  b.rerun.resize(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const ForwardItem& it = items[i];
    if (it.tokens.empty()) fail("forward", "an item has no tokens");
    if (it.logits != nullptr && !has_logits())
      fail("forward", "this model was loaded for hidden states only (no lm_head): it has no logits");
    for (int32_t t : it.tokens)
      if (t < 0 || t >= c.vocab_size)
        fail("forward", "token id " + std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
    const int64_t held = it.seq->length(), n = static_cast<int64_t>(it.tokens.size());
    b.seqs.push_back(it.seq);
    b.held.push_back(held);
    b.logit_rows.push_back(it.all_logits ? n : 1);
    b.single_tail.push_back(std::clamp<int64_t>(it.single_tail, 0, n));
    b.ids.push_back(it.tokens);
    b.first_pos.push_back(held);
    // LongRoPE rotates a whole sequence with the factors of its length, and every layer's cached keys
    // and values past the first layer depend on that rotation: a sequence whose length crosses the
    // original context is computed again from its first token, as transformers does.
    if (recompute_length(*it.seq, n) > 0) {
      const std::span<const int32_t> before = it.seq->tokens();
      if (std::find(before.begin(), before.end(), -1) != before.end())
        fail("forward", "a sequence crossing LongRoPE's original context must be recomputed, but its cached "
                        "positions were not written by the forward pass");
      b.rerun[i].assign(before.begin(), before.end());
      b.rerun[i].insert(b.rerun[i].end(), it.tokens.begin(), it.tokens.end());
      b.ids[i] = b.rerun[i];
      b.first_pos[i] = 0;
      b.single_tail[i] = 0;
    }
    for (int64_t t = 0; t < static_cast<int64_t>(b.ids[i].size()); ++t) {
      b.item.push_back(i);
      b.pos.push_back(b.first_pos[i] + t);
      b.seq_len.push_back(held + n);
    }
  }
  b.n = static_cast<int64_t>(b.pos.size());
  if (b.n == 0) return;
  // Reserve cache positions first so that running out of blocks fails before any state changes.
  for (size_t i = 0; i < items.size(); ++i) {
    try {
      items[i].seq->rewrite(b.first_pos[i], b.held[i] + static_cast<int64_t>(items[i].tokens.size()));
    } catch (...) {
      for (size_t j = 0; j <= i; ++j) items[j].seq->truncate(b.held[j]);
      throw;
    }
  }
  for (size_t i = 0; i < items.size(); ++i) {
    items[i].seq->set_tokens(b.first_pos[i], b.ids[i]);
    items[i].seq->set_factor_set(factor_set(items[i].seq->length()));
    items[i].seq->state().begin_pass(b.first_pos[i], items[i].seq->length(), items[i].seq->cache().block_size());
  }
  const kernels::TunedStep tuned(tuner_, pool_, b.n);  // all threads or one, as measured for this size
  compute(items, b);
}

// The decoder: embeddings, then per layer attention and MLP with pre-norms (and, where the config
// says, post-norms) and residuals, then the final norm and the logits.
void Model::compute(std::span<ForwardItem> items, const Batch& b) {
  const ModelConfig& c = config_;
  const int64_t n = b.n, H = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  Scratch& s = *scratch_;
  s.resize(c, n);

  int64_t row = 0;
  for (std::span<const int32_t> ids : b.ids)
    for (int32_t t : ids) kernels::copy_row(embed_, t, s.x.data() + (row++) * H);
  if (c.embed_scale != 1.0) kernels::scale_inplace(s.x.data(), static_cast<float>(c.embed_scale), n * H);
  if (!ple_.empty()) {
    std::vector<int32_t> all;
    for (std::span<const int32_t> ids : b.ids) all.insert(all.end(), ids.begin(), ids.end());
    ple_.inputs(all, s.x.data(), H, eps, s.pli.data(), pool_);
  }

  rope_.prepare(b.pos, b.seq_len);
  if (c.rope_local_used()) rope_local_.prepare(b.pos, b.seq_len);

  if (deltanet_) {  // the hybrids' linear-attention layers: each sequence's rows of the pass
    deltanet_items_.clear();
    int64_t row = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      const int64_t nt = static_cast<int64_t>(b.ids[i].size());
      deltanet_items_.push_back({items[i].seq, row, nt, b.first_pos[i]});
      row += nt;
    }
  }

  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const Layer& L = layers_[static_cast<size_t>(l)];
    const LayerSpec& spec = c.layers[static_cast<size_t>(l)];
    // This layer's shape (Gemma 4's differ by layer type); one reading another's keys computes none.
    const int64_t D = L.attention.head_dim, KVH = L.attention.n_kv_heads, Q = c.num_attention_heads * D, KV = KVH * D;
    const bool own_kv = spec.kv_source < 0;
    // Attention.
    kernels::rms_norm(s.x.data(), L.attn_norm.data(), n, H, eps, s.xb.data());
    if (spec.kind == LayerKind::kLinear) {
      deltanet_->forward(L.delta, l, s.xb.data(), n, deltanet_items_, s.xb.data(), pool_);
    } else {
      // Gated attention (the hybrids): q_proj yields [query | gate] per head.
      float* q = c.attn_output_gate ? s.qg.data() : s.q.data();
      if (!own_kv) project(L, {{LayerMatrix::kQ, q}}, s.xb.data(), n);
      else if (spec.k_eq_v) project(L, {{LayerMatrix::kQ, q}, {LayerMatrix::kK, s.k.data()}}, s.xb.data(), n);
      else project(L, {{LayerMatrix::kQ, q}, {LayerMatrix::kK, s.k.data()}, {LayerMatrix::kV, s.v.data()}}, s.xb.data(), n);
      if (c.attn_output_gate) split_query_gate(q, n, c.num_attention_heads, D, s.q.data(), s.attn_gate.data());
      if (own_kv && spec.k_eq_v) std::copy_n(s.k.data(), n * KV, s.v.data());  // the raw keys, before their norm
      if (c.qk_norm) {
        kernels::rms_norm(s.q.data(), L.q_norm.data(), n * c.num_attention_heads, D, eps, s.q.data());
        if (own_kv) kernels::rms_norm(s.k.data(), L.k_norm.data(), n * KVH, D, eps, s.k.data());
      }
      if (own_kv && c.value_norm) kernels::rms_norm(s.v.data(), unit_.data(), n * KVH, D, eps, s.v.data());
      for (int64_t t = 0; t < n; ++t) {
        const size_t i = b.item[static_cast<size_t>(t)];
        const int64_t pos = b.pos[static_cast<size_t>(t)];
        if (L.rope != nullptr)
          L.rope->apply(s.q.data() + t * Q, c.num_attention_heads, own_kv ? s.k.data() + t * KV : nullptr, KVH,
                        static_cast<size_t>(t));
        if (own_kv) items[i].seq->store(l, pos, s.k.data() + t * KV, s.v.data() + t * KV);
      }
      attention(b, l, s.q.data(), s.att.data());
      if (c.attn_output_gate) apply_output_gate(s.att.data(), s.attn_gate.data(), n * Q);
      project(L, {{LayerMatrix::kO, s.xb.data()}}, s.att.data(), n);
    }
    if (!L.post_attn_norm.empty()) kernels::rms_norm(s.xb.data(), L.post_attn_norm.data(), n, H, eps, s.xb.data());
    kernels::add_inplace(s.x.data(), s.xb.data(), n * H);
    // MLP.
    kernels::rms_norm(s.x.data(), L.mlp_norm.data(), n, H, eps, s.xb.data());
    mlp(L, s.xb.data(), n, s.xb.data());
    if (!L.experts_out_norm.empty()) experts_beside_dense(L, s.x.data(), n, s.xb.data());
    if (!L.post_mlp_norm.empty()) kernels::rms_norm(s.xb.data(), L.post_mlp_norm.data(), n, H, eps, s.xb.data());
    kernels::add_inplace(s.x.data(), s.xb.data(), n * H);
    if (L.ple.gate.rows > 0) {
      const int64_t P = c.per_layer_input;
      L.ple.apply(s.x.data(), n, s.pli.data() + l * P, c.num_hidden_layers * P, eps, s.ple_gate.data(), s.xb.data(), pool_);
    }
    if (c.layer_scalar) kernels::scale_inplace(s.x.data(), L.scalar, n * H);
  }
  final_hidden(items, b);
  logits(items, b);
}

void Model::activate(float* gate, const float* up, int64_t n) const {
  if (config_.activation == Activation::kGeluTanh) kernels::gelu_tanh_mul(gate, up, n);
  else kernels::silu_mul(gate, up, n);
}

// x and out may be the same buffer: x is read in full before out is written.
void Model::mlp(const Layer& L, const float* x, int64_t n, float* out) {
  if (L[LayerMatrix::kGate].rows == 0) return experts(L, x, n, out);  // experts in place of the dense MLP
  Scratch& s = *scratch_;
  const int64_t H = config_.hidden_size;
  // In chunks of tokens: the gate and up rows of a long prompt would be the largest buffers of the
  // pass (Llama-3.2-1B at 128 tokens: 8 MiB), and every row is computed alone either way.
  for (int64_t t = 0; t < n; t += kMlpChunk) {
    const int64_t m = std::min(kMlpChunk, n - t);
    project(L, {{LayerMatrix::kGate, s.gate.data()}, {LayerMatrix::kUp, s.up.data()}}, x + t * H, m);
    activate(s.gate.data(), s.up.data(), m * L[LayerMatrix::kGate].rows);
    project(L, {{LayerMatrix::kDown, out + t * H}}, s.gate.data(), m);
  }
}

// A mixture of experts: each token's router softmax picks its top experts_per_tok (the lower index
// on a tie); the batch's tokens are then grouped by expert, so that each chosen expert's weights are
// read once per step and the others not at all. A token's sum runs over its experts in index order,
// whatever else shares the batch.
void Model::experts(const Layer& L, const float* x, int64_t n, float* out, const float* route_in) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, E = c.moe.num_experts, K = c.moe.experts_per_tok, I = c.moe.intermediate_size;
  Scratch& s = *scratch_;
  kernels::matmul(L.router, route_in != nullptr ? route_in : x, n, s.router.data(), pool_);
  if (!L.router_bias.empty()) kernels::add_bias(s.router.data(), L.router_bias.data(), n, E);
  route_tokens(s.router.data(), n, E, K, c.moe.renormalize, L.expert_scale.empty() ? nullptr : L.expert_scale.data(),
               s.routed);
  if (route_observer_) route_observer_(&L - layers_.data(), s.routed);
  std::fill_n(s.moe_out.data(), n * H, 0.0f);
  for (int64_t e = 0; e < E; ++e) {
    const auto& routed = s.routed[static_cast<size_t>(e)];
    if (routed.empty()) continue;
    const int64_t m = static_cast<int64_t>(routed.size());
    for (int64_t j = 0; j < m; ++j) std::copy_n(x + routed[static_cast<size_t>(j)].first * H, H, s.moe_in.data() + j * H);
    const auto& w = L.experts[static_cast<size_t>(e)];
    const kernels::MatmulOut gate_up[2] = {{&w[0], s.gate.data()}, {&w[1], s.up.data()}};
    kernels::matmul_fused(gate_up, s.moe_in.data(), m, pool_);
    const auto* bias = L.expert_bias.empty() ? nullptr : &L.expert_bias[static_cast<size_t>(e)];
    if (bias != nullptr) {
      kernels::add_bias(s.gate.data(), (*bias)[0].data(), m, I);
      kernels::add_bias(s.up.data(), (*bias)[1].data(), m, I);
    }
    if (c.moe.swiglu_limit > 0)
      kernels::clamped_swiglu_mul(s.gate.data(), s.up.data(), m * I, static_cast<float>(c.moe.swiglu_limit),
                                  1.702f);  // transformers GptOssExperts.alpha
    else activate(s.gate.data(), s.up.data(), m * I);
    kernels::matmul(w[2], s.gate.data(), m, s.moe_in.data(), pool_);
    if (bias != nullptr) kernels::add_bias(s.moe_in.data(), (*bias)[2].data(), m, H);
    for (int64_t j = 0; j < m; ++j) {
      const auto [t, weight] = routed[static_cast<size_t>(j)];
      kernels::axpy(s.moe_out.data() + t * H, weight, s.moe_in.data() + j * H, H);
    }
  }
  if (L.shared_gate.rows > 0) {  // Qwen3-Next: every token also gets the shared expert, times sigmoid(h . gate)
    const int64_t SI = c.moe.shared_intermediate_size;
    const kernels::MatmulOut gate_up[2] = {{&L.shared_expert[0], s.gate.data()}, {&L.shared_expert[1], s.up.data()}};
    kernels::matmul_fused(gate_up, x, n, pool_);
    activate(s.gate.data(), s.up.data(), n * SI);
    kernels::matmul(L.shared_expert[2], s.gate.data(), n, s.moe_in.data(), pool_);
    kernels::matmul(L.shared_gate, x, n, s.shared_gate.data(), pool_);
    for (int64_t t = 0; t < n; ++t)
      kernels::axpy(s.moe_out.data() + t * H, 1.0f / (1.0f + std::exp(-s.shared_gate[static_cast<size_t>(t)])),
                    s.moe_in.data() + t * H, H);
  }
  std::copy_n(s.moe_out.data(), n * H, out);
}

// m = norm(dense, post_feedforward_layernorm_1) + norm(experts(norm(r, pre_feedforward_layernorm_2)),
// post_feedforward_layernorm_2), the router reading norm0(r) * router.scale / sqrt(hidden).
void Model::experts_beside_dense(const Layer& L, const float* r, int64_t n, float* out) {
  const int64_t H = config_.hidden_size;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  Scratch& s = *scratch_;
  kernels::rms_norm(out, L.dense_out_norm.data(), n, H, eps, out);
  kernels::rms_norm(r, unit_.data(), n, H, eps, s.route_in.data());
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < H; ++i) s.route_in[static_cast<size_t>(t * H + i)] *= L.router_scale[static_cast<size_t>(i)];
  kernels::rms_norm(r, L.expert_norm.data(), n, H, eps, s.residual.data());
  experts(L, s.residual.data(), n, s.residual.data(), s.route_in.data());
  kernels::rms_norm(s.residual.data(), L.experts_out_norm.data(), n, H, eps, s.residual.data());
  kernels::add_inplace(out, s.residual.data(), n * H);
}

// Products of the same activations in one dispatch (q/k/v, gate/up), each with its bias if any.
void Model::project(const Layer& L, std::initializer_list<std::pair<LayerMatrix, float*>> outs, const float* x,
                    int64_t n) {
  std::array<kernels::MatmulOut, kLayerMatrices> mo;
  size_t k = 0;
  for (const auto& [m, y] : outs) mo[k++] = {&L[m], y};
  if (k == 1) kernels::matmul(*mo[0].w, x, n, mo[0].y, pool_);
  else kernels::matmul_fused(std::span<const kernels::MatmulOut>(mo.data(), k), x, n, pool_);
  for (const auto& [m, y] : outs)
    if (const auto& bias = L.bias[static_cast<size_t>(m)]; !bias.empty())
      kernels::add_bias(y, bias.data(), n, L[m].rows);
}

// Every sequence's attention over its cache in one dispatch: a decode step has little work per sequence.
void Model::attention(const Batch& b, int64_t layer, const float* q, float* out) {
  const kernels::AttentionShape& shape = layers_[static_cast<size_t>(layer)].attention;
  const int64_t Q = shape.n_heads * shape.head_dim;
  const std::span<const kernels::KvView> views = kv_view_.build(b.seqs, layer);
  std::vector<kernels::AttentionItem>& attn = attention_items_;
  attn.clear();
  int64_t row = 0;
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    const int64_t nt = b.seqs[i]->length() - b.first_pos[i], head = nt - b.single_tail[i];
    if (head > 0) attn.push_back(kernels::AttentionItem{q + row * Q, head, b.first_pos[i], views[i], out + row * Q});
    if (head < nt)  // the guesses: each token alone, as one-token passes compute it
      attn.push_back(kernels::AttentionItem{q + (row + head) * Q, nt - head, b.first_pos[i] + head, views[i],
                                            out + (row + head) * Q, /*by_token=*/true});
    row += nt;
  }
  kernels::attention(attn, shape, pool_);
}

// The final norm of every row of the items that want hidden states, straight into their outputs
// (a recomputed sequence's rows before its new tokens are not theirs).
void Model::final_hidden(std::span<ForwardItem> items, const Batch& b) {
  const int64_t H = config_.hidden_size;
  int64_t row = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const int64_t nt = static_cast<int64_t>(b.ids[i].size()), mine = static_cast<int64_t>(items[i].tokens.size());
    if (items[i].hidden != nullptr)
      kernels::rms_norm(scratch_->x.data() + (row + nt - mine) * H, final_norm_.data(), mine, H,
                        static_cast<float>(config_.rms_norm_eps), items[i].hidden);
    row += nt;
  }
}

// Final norm and lm_head only for the rows whose logits are wanted, all in one product so that the
// output matrix is read once per step rather than once per sequence.
void Model::logits(std::span<ForwardItem> items, const Batch& b) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, V = c.vocab_size;
  Scratch& s = *scratch_;
  int64_t wanted = 0, row = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const int64_t nt = static_cast<int64_t>(b.ids[i].size()), count = b.logit_rows[i];
    if (items[i].logits != nullptr) {
      kernels::rms_norm(s.x.data() + (row + nt - count) * H, final_norm_.data(), count, H,
                        static_cast<float>(c.rms_norm_eps), s.last.data() + wanted * H);
      wanted += count;
    }
    row += nt;
  }
  if (wanted == 0) return;
  s.logits.resize(static_cast<size_t>(wanted * V));
  kernels::matmul(lm_head_, s.last.data(), wanted, s.logits.data(), pool_);
  if (c.final_softcap > 0) kernels::softcap(s.logits.data(), wanted * V, static_cast<float>(c.final_softcap));
  wanted = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].logits == nullptr) continue;
    std::copy_n(s.logits.data() + wanted * V, b.logit_rows[i] * V, items[i].logits);
    wanted += b.logit_rows[i];
  }
}

std::vector<float> Model::forward(KvSequence& seq, std::span<const int32_t> tokens) {
  std::vector<float> logits(static_cast<size_t>(config_.vocab_size));
  ForwardItem item{&seq, tokens, logits.data(), false};
  forward(std::span<ForwardItem>(&item, 1));
  return logits;
}

}  // namespace ember::model
