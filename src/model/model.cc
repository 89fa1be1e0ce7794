#include "model/model.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "kernels/attention.h"
#include "kernels/ops.h"
#include "model/gguf_config.h"

namespace ember::model {

using kernels::WeightMatrix;

struct Model::Layer {
  std::array<WeightMatrix, kLayerMatrices> w;           // indexed by LayerMatrix
  std::array<std::vector<float>, kLayerMatrices> bias;  // empty where the layer has none
  std::vector<float> attn_norm, mlp_norm, q_norm, k_norm;
  kernels::AttentionShape attention;  // heads, scale and this layer's window

  const WeightMatrix& operator[](LayerMatrix m) const { return w[static_cast<size_t>(m)]; }
};

// Activations of one batch, reused across calls.
struct Model::Scratch {
  std::vector<float> x, xb, q, k, v, att, gate, up, last, logits;
  void resize(const ModelConfig& c, int64_t n) {
    x.resize(n * c.hidden_size);
    xb.resize(n * c.hidden_size);
    q.resize(n * c.q_dim());
    k.resize(n * c.kv_dim());
    v.resize(n * c.kv_dim());
    att.resize(n * c.q_dim());
    gate.resize(n * c.intermediate_size);
    up.resize(n * c.intermediate_size);
    last.resize(n * c.hidden_size);
  }
};

// Where each token of a batch goes: its sequence, its position, and its sequence's length after the
// pass (which dynamic RoPE scaling depends on).
struct Model::Batch {
  int64_t n = 0;                           // tokens
  std::vector<const KvSequence*> seqs;     // per item
  std::vector<int64_t> first_pos;          // per item
  std::vector<size_t> item;                // per token
  std::vector<int64_t> pos;                // per token
  std::vector<int64_t> seq_len;            // per token: its sequence's length after the pass
};

namespace {

WeightMatrix matrix(const TensorInfo& t) {
  return WeightMatrix{t.data, t.dtype, t.shape[0], t.shape.size() > 1 ? t.shape[1] : 1};
}

// Small vectors (norm weights, biases) are converted to float32 once; matrices stay as stored.
std::vector<float> vec(const TensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  kernels::copy_row(WeightMatrix{t.data, t.dtype, 1, t.numel()}, 0, out.data());
  return out;
}

}  // namespace

DType parse_kv_dtype(const std::string& name) {
  if (const auto t = parse_lower_dtype(name)) return *t;
  fail("--kv-dtype", "must be f32, f16 or bf16 (got '" + name + "')");
}

Model::Model(std::string dir, ModelConfig config, Checkpoint checkpoint, const LoadOptions& options)
    : dir_(std::move(dir)), config_(std::move(config)), checkpoint_(std::move(checkpoint)), pool_(options.threads),
      tuner_(pool_.size()),
      kv_dtype_(options.kv_dtype), scratch_(std::make_unique<Scratch>()), rope_(config_) {}

Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& dir, const LoadOptions& options) {
  if (is_gguf_path(dir)) return load_gguf(dir, options);
  if (options.progress) options.progress("reading config.json");
  ModelConfig config = load_config(dir);
  if (options.progress) options.progress("mapping safetensors weights");
  Checkpoint cp = Checkpoint::open(dir);
  std::unique_ptr<Model> m(new Model(dir, std::move(config), std::move(cp), options));
  const Checkpoint& ck = m->checkpoint_;
  m->finish_load(Source{[&](const std::string& n) { return ck.find(n); },
                        [&](const std::string& n, const std::vector<int64_t>& shape) -> const TensorInfo& {
                          return ck.require(n, shape);
                        },
                        nullptr},
                 *find_architecture(m->config_.model_type)->names, options);
  // Every matrix now lives in its packed or quantized copy: the mapped pages read to make them need
  // not stay resident (the embedding rows fault back in on use).
  m->checkpoint_.release_pages();
  return m;
}

void Model::finish_load(const Source& src, const TensorNames& names, const LoadOptions& options) {
  if (options.progress) options.progress("checking tensors");
  bind_weights(src, names);
  if (options.quantize != kernels::QType::None) {
    if (options.progress) options.progress(std::string("quantizing weights to ") + kernels::qtype_name(options.quantize));
    quantize_weights(options.quantize);
  }
  if (options.progress) options.progress("packing weights for the matmul");
  pack_weights();
}

std::unique_ptr<Model> Model::from_memory(ModelConfig config, InMemoryWeights weights, const LoadOptions& options) {
  std::unique_ptr<Model> m(new Model("", std::move(config), Checkpoint{}, options));
  m->memory_ = std::move(weights);
  m->finish_load(m->memory_source("in-memory weights"), kHuggingFaceNames, options);
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

// A matrix copied into packed or quantized form: its source is freed (in-memory weights) or its
// mapped pages dropped (a checkpoint), so that loading never holds both copies of every matrix. Not
// while the embedding lookup still reads it.
void Model::release_source(const WeightMatrix& source) {
  if (source.data == embed_.data) return;
  if (memory_.tensors.empty()) {  // mapped from a checkpoint (never madvise heap memory: it would zero it)
    release_pages(source.data, static_cast<size_t>(source.rows * source.cols) * dtype_size(source.dtype));
    return;
  }
  for (auto& [name, t] : memory_.tensors)
    if (t.data == source.data) memory_.data.erase(name);
}

void Model::quantize_weights(kernels::QType q) {
  auto convert = [&](WeightMatrix& w, kernels::QType type) {
    if (!kernels::quantizable(w.cols) || w.qtype != kernels::QType::None) return;
    // Rows that are not whole K-quant super-blocks take Q8_0 (as llama.cpp falls back to a wider type).
    if (!kernels::quantizable(w.cols, type)) type = kernels::QType::Q8_0;
    const WeightMatrix source = w;
    quantized_.push_back(kernels::quantize(w, type, pool_));
    w = quantized_.back().view();
    release_source(source);
  };
  quantized_.reserve(layers_.size() * kLayerMatrices + 1);
  for (Layer& L : layers_)
    for (WeightMatrix& w : L.w) convert(w, q);
  convert(lm_head_, kernels::QType::Q8_0);
}

// Plain matrices the matmul reads are repacked into panels (kernels/pack.h). A tied embedding then
// reads its rows from the packed head, so that matrix is held once.
void Model::pack_weights() {
  const bool tied = embed_.data == lm_head_.data;
  auto convert = [&](WeightMatrix& w) {
    if (w.qtype != kernels::QType::None || w.layout == kernels::Layout::Panels) return;
    const WeightMatrix source = w;
    packed_.push_back(kernels::pack(w, pool_));
    w = packed_.back().view();
    release_source(source);
  };
  for (Layer& L : layers_)
    for (WeightMatrix& w : L.w) convert(w);
  convert(lm_head_);
  if (tied && lm_head_.layout == kernels::Layout::Panels) {
    const WeightMatrix source = embed_;
    embed_ = lm_head_;
    release_source(source);
  }
}

int64_t Model::decode_weight_bytes() const {
  int64_t total = kernels::weight_bytes(lm_head_);
  for (const Layer& L : layers_)
    for (const WeightMatrix& w : L.w) total += kernels::weight_bytes(w);
  return total;
}

std::string Model::weight_type() const {
  std::vector<std::string> types;
  for (const Layer& L : layers_)
    for (const WeightMatrix& w : L.w) {
      const std::string t = w.qtype != kernels::QType::None ? kernels::qtype_name(w.qtype) : dtype_lower_name(w.dtype);
      if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
    }
  std::string out;
  for (const std::string& t : types) out += (out.empty() ? "" : "+") + t;
  return out;
}

void Model::bind_weights(const Source& cp, const TensorNames& names) {
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
  if (c.tie_word_embeddings || head == nullptr) {
    if (!c.tie_word_embeddings) cp.require(head_name, {V, H});
    head = embed;
  }
  auto bind = [&](const TensorInfo& t) {
    const WeightMatrix* w = cp.converted ? cp.converted(t.name) : nullptr;
    return w != nullptr ? *w : matrix(t);
  };
  embed_ = bind(cp.require(embed->name, {V, H}));
  lm_head_ = bind(cp.require(head->name, {V, H}));
  final_norm_ = vec(cp.require(std::string(names.final_norm), {H}));

  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  layers_.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    L.attn_norm = vec(cp.require(names.layer(l, names.attn_norm), {H}));
    L.mlp_norm = vec(cp.require(names.layer(l, names.mlp_norm), {H}));
    for (LayerMatrix m : kAllLayerMatrices) {
      const auto [rows, cols] = c.shape(m);
      L.w[static_cast<size_t>(m)] = bind(cp.require(names.matrix(l, m), {rows, cols}));
      if (c.has_bias(m)) L.bias[static_cast<size_t>(m)] = vec(cp.require(names.matrix(l, m, ".bias"), {rows}));
    }
    if (c.qk_norm) {
      L.q_norm = vec(cp.require(names.layer(l, names.q_norm), {c.head_dim}));
      L.k_norm = vec(cp.require(names.layer(l, names.k_norm), {c.head_dim}));
    }
    L.attention = kernels::AttentionShape{c.num_attention_heads, c.num_key_value_heads, c.head_dim,
                                          c.layers[static_cast<size_t>(l)].sliding_window, scale};
  }
}

std::unique_ptr<KvCache> Model::make_cache(int64_t max_tokens, int64_t block_size) const {
  return std::make_unique<KvCache>(config_, std::max<int64_t>(1, (max_tokens + block_size - 1) / block_size),
                                   block_size, kv_dtype_);
}

void Model::forward(std::span<ForwardItem> items) {
  const ModelConfig& c = config_;
  Batch b;
  for (size_t i = 0; i < items.size(); ++i) {
    const ForwardItem& it = items[i];
    if (it.tokens.empty()) fail("forward", "an item has no tokens");
    for (int32_t t : it.tokens)
      if (t < 0 || t >= c.vocab_size)
        fail("forward", "token id " + std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
    b.seqs.push_back(it.seq);
    b.first_pos.push_back(it.seq->length());
    for (size_t t = 0; t < it.tokens.size(); ++t) {
      b.item.push_back(i);
      b.pos.push_back(it.seq->length() + static_cast<int64_t>(t));
      b.seq_len.push_back(it.seq->length() + static_cast<int64_t>(it.tokens.size()));
    }
  }
  b.n = static_cast<int64_t>(b.pos.size());
  if (b.n == 0) return;
  // Reserve cache positions first so that running out of blocks fails before any state changes.
  for (size_t i = 0; i < items.size(); ++i) {
    try {
      items[i].seq->extend(b.first_pos[i] + static_cast<int64_t>(items[i].tokens.size()));
    } catch (...) {
      for (size_t j = 0; j <= i; ++j) items[j].seq->truncate(b.first_pos[j]);
      throw;
    }
  }
  const kernels::TunedStep tuned(tuner_, pool_, b.n);  // all threads or one, as measured for this size
  compute(items, b);
}

// The decoder: embeddings, then per layer attention and MLP with pre-norms and residuals, then the
// final norm and the logits.
void Model::compute(std::span<ForwardItem> items, const Batch& b) {
  const ModelConfig& c = config_;
  const int64_t n = b.n, H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), I = c.intermediate_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  Scratch& s = *scratch_;
  s.resize(c, n);

  int64_t row = 0;
  for (const ForwardItem& it : items)
    for (int32_t t : it.tokens) kernels::copy_row(embed_, t, s.x.data() + (row++) * H);

  rope_.prepare(b.pos, b.seq_len);

  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const Layer& L = layers_[static_cast<size_t>(l)];
    // Attention.
    kernels::rms_norm(s.x.data(), L.attn_norm.data(), n, H, eps, s.xb.data());
    project(L, {{LayerMatrix::kQ, s.q.data()}, {LayerMatrix::kK, s.k.data()}, {LayerMatrix::kV, s.v.data()}}, s.xb.data(), n);
    if (c.qk_norm) {
      kernels::rms_norm(s.q.data(), L.q_norm.data(), n * c.num_attention_heads, c.head_dim, eps, s.q.data());
      kernels::rms_norm(s.k.data(), L.k_norm.data(), n * c.num_key_value_heads, c.head_dim, eps, s.k.data());
    }
    for (int64_t t = 0; t < n; ++t) {
      const size_t i = b.item[static_cast<size_t>(t)];
      const int64_t pos = b.pos[static_cast<size_t>(t)];
      rope_.apply(s.q.data() + t * Q, s.k.data() + t * KV, static_cast<size_t>(t));
      items[i].seq->store(l, pos, s.k.data() + t * KV, s.v.data() + t * KV);
    }
    attention(b, l, s.q.data(), s.att.data());
    project(L, {{LayerMatrix::kO, s.xb.data()}}, s.att.data(), n);
    kernels::add_inplace(s.x.data(), s.xb.data(), n * H);
    // MLP.
    kernels::rms_norm(s.x.data(), L.mlp_norm.data(), n, H, eps, s.xb.data());
    project(L, {{LayerMatrix::kGate, s.gate.data()}, {LayerMatrix::kUp, s.up.data()}}, s.xb.data(), n);
    kernels::silu_mul(s.gate.data(), s.up.data(), n * I);
    project(L, {{LayerMatrix::kDown, s.xb.data()}}, s.gate.data(), n);
    kernels::add_inplace(s.x.data(), s.xb.data(), n * H);
  }
  logits(items);
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
  const int64_t Q = config_.q_dim();
  const std::span<const kernels::KvView> views = kv_view_.build(b.seqs, layer);
  std::vector<kernels::AttentionItem>& attn = attention_items_;
  attn.resize(b.seqs.size());
  int64_t row = 0;
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    const int64_t nt = b.seqs[i]->length() - b.first_pos[i];
    attn[i] = kernels::AttentionItem{q + row * Q, nt, b.first_pos[i], views[i], out + row * Q};
    row += nt;
  }
  kernels::attention(attn, layers_[static_cast<size_t>(layer)].attention, pool_);
}

// Final norm and lm_head only for the rows whose logits are wanted, all in one product so that the
// output matrix is read once per step rather than once per sequence.
void Model::logits(std::span<ForwardItem> items) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, V = c.vocab_size;
  Scratch& s = *scratch_;
  int64_t wanted = 0, row = 0;
  for (const ForwardItem& it : items) {
    const int64_t nt = static_cast<int64_t>(it.tokens.size());
    const int64_t count = it.all_logits ? nt : 1;
    if (it.logits != nullptr) {
      kernels::rms_norm(s.x.data() + (row + nt - count) * H, final_norm_.data(), count, H,
                        static_cast<float>(c.rms_norm_eps), s.last.data() + wanted * H);
      wanted += count;
    }
    row += nt;
  }
  s.logits.resize(static_cast<size_t>(wanted * V));
  kernels::matmul(lm_head_, s.last.data(), wanted, s.logits.data(), pool_);
  wanted = 0;
  for (ForwardItem& it : items) {
    if (it.logits == nullptr) continue;
    const int64_t count = it.all_logits ? static_cast<int64_t>(it.tokens.size()) : 1;
    std::copy_n(s.logits.data() + wanted * V, count * V, it.logits);
    wanted += count;
  }
}

std::vector<float> Model::forward(KvSequence& seq, std::span<const int32_t> tokens) {
  std::vector<float> logits(static_cast<size_t>(config_.vocab_size));
  ForwardItem item{&seq, tokens, logits.data(), false};
  forward(std::span<ForwardItem>(&item, 1));
  return logits;
}

}  // namespace ember::model
