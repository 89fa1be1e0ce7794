#include "model/model.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "base/clock.h"
#include "base/error.h"
#include "kernels/attention.h"
#include "kernels/ops.h"

namespace ember::model {

using kernels::WeightMatrix;

struct Model::Layer {
  WeightMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
  std::vector<float> attn_norm, mlp_norm, q_norm, k_norm;
  std::vector<float> bq, bk, bv, bo, b_gate, b_up, b_down;  // empty when the architecture has none
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
  if (name == "f32") return DType::F32;
  if (name == "f16") return DType::F16;
  if (name == "bf16") return DType::BF16;
  fail("--kv-dtype", "must be f32, f16 or bf16 (got '" + name + "')");
}

// Where bind_weights finds tensors: a mapped checkpoint or in-memory weights.
struct Model::Source {
  std::function<const TensorInfo*(const std::string&)> find;
  std::function<const TensorInfo&(const std::string&, const std::vector<int64_t>&)> require;
};

Model::Model(std::string dir, ModelConfig config, Checkpoint checkpoint, const LoadOptions& options)
    : dir_(std::move(dir)), config_(std::move(config)), checkpoint_(std::move(checkpoint)), pool_(options.threads),
      tuner_(pool_.size()),
      kv_dtype_(options.kv_dtype), scratch_(std::make_unique<Scratch>()) {}

Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& dir, const LoadOptions& options) {
  auto progress = [&](const std::string& s) {
    if (options.progress) options.progress(s);
  };
  progress("reading config.json");
  ModelConfig config = load_config(dir);
  progress("mapping safetensors weights");
  Checkpoint cp = Checkpoint::open(dir);
  std::unique_ptr<Model> m(new Model(dir, std::move(config), std::move(cp), options));
  progress("checking tensors");
  const Checkpoint& ck = m->checkpoint_;
  m->bind_weights(Source{[&](const std::string& n) { return ck.find(n); },
                         [&](const std::string& n, const std::vector<int64_t>& shape) -> const TensorInfo& {
                           return ck.require(n, shape);
                         }});
  if (options.quantize != kernels::QType::None) {
    progress(std::string("quantizing weights to ") + kernels::qtype_name(options.quantize));
    m->quantize_weights(options.quantize);
  }
  progress("packing weights for the matmul");
  m->pack_weights();
  // Every matrix now lives in its packed or quantized copy: the mapped pages read to make them need
  // not stay resident (the embedding rows fault back in on use).
  m->checkpoint_.release_pages();
  return m;
}

std::unique_ptr<Model> Model::from_memory(ModelConfig config, InMemoryWeights weights, const LoadOptions& options) {
  std::unique_ptr<Model> m(new Model("", std::move(config), Checkpoint{}, options));
  m->memory_ = std::move(weights);
  const auto& tensors = m->memory_.tensors;
  auto find = [&](const std::string& n) -> const TensorInfo* {
    auto it = tensors.find(n);
    return it == tensors.end() ? nullptr : &it->second;
  };
  m->bind_weights(Source{find, [&](const std::string& n, const std::vector<int64_t>& shape) -> const TensorInfo& {
                           const TensorInfo* t = find(n);
                           if (t == nullptr || t->shape != shape) fail("in-memory weights", "tensor " + n + " is missing or mis-shaped");
                           return *t;
                         }});
  if (options.quantize != kernels::QType::None) {
    if (options.progress) options.progress(std::string("quantizing weights to ") + kernels::qtype_name(options.quantize));
    m->quantize_weights(options.quantize);
  }
  m->pack_weights();
  return m;
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
    const WeightMatrix source = w;
    quantized_.push_back(kernels::quantize(w, type, pool_));
    w = quantized_.back().view();
    release_source(source);
  };
  quantized_.reserve(layers_.size() * 7 + 1);
  for (Layer& L : layers_)
    for (WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) convert(*w, q);
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
    for (WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) convert(*w);
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
    for (const WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) total += kernels::weight_bytes(*w);
  return total;
}

std::string Model::weight_type() const {
  std::vector<std::string> types;
  for (const Layer& L : layers_)
    for (const WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
      std::string t = w->qtype != kernels::QType::None ? kernels::qtype_name(w->qtype) : dtype_name(w->dtype);
      std::transform(t.begin(), t.end(), t.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
      if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
    }
  std::string out;
  for (const std::string& t : types) out += (out.empty() ? "" : "+") + t;
  return out;
}

void Model::bind_weights(const Source& cp) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  // Tied checkpoints store the shared matrix under either name.
  const TensorInfo* embed = cp.find("model.embed_tokens.weight");
  const TensorInfo* head = cp.find("lm_head.weight");
  if (embed == nullptr && c.tie_word_embeddings) embed = head;
  if (embed == nullptr) embed = &cp.require("model.embed_tokens.weight", {V, H});
  if (c.tie_word_embeddings || head == nullptr) {
    if (!c.tie_word_embeddings) cp.require("lm_head.weight", {V, H});
    head = embed;
  }
  embed_ = matrix(cp.require(embed->name, {V, H}));
  lm_head_ = matrix(cp.require(head->name, {V, H}));
  final_norm_ = vec(cp.require("model.norm.weight", {H}));

  layers_.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    Layer& L = layers_[static_cast<size_t>(l)];
    L.attn_norm = vec(cp.require(p + "input_layernorm.weight", {H}));
    L.mlp_norm = vec(cp.require(p + "post_attention_layernorm.weight", {H}));
    L.wq = matrix(cp.require(p + "self_attn.q_proj.weight", {c.q_dim(), H}));
    L.wk = matrix(cp.require(p + "self_attn.k_proj.weight", {c.kv_dim(), H}));
    L.wv = matrix(cp.require(p + "self_attn.v_proj.weight", {c.kv_dim(), H}));
    L.wo = matrix(cp.require(p + "self_attn.o_proj.weight", {H, c.q_dim()}));
    L.w_gate = matrix(cp.require(p + "mlp.gate_proj.weight", {I, H}));
    L.w_up = matrix(cp.require(p + "mlp.up_proj.weight", {I, H}));
    L.w_down = matrix(cp.require(p + "mlp.down_proj.weight", {H, I}));
    if (c.attention_bias) {
      L.bq = vec(cp.require(p + "self_attn.q_proj.bias", {c.q_dim()}));
      L.bk = vec(cp.require(p + "self_attn.k_proj.bias", {c.kv_dim()}));
      L.bv = vec(cp.require(p + "self_attn.v_proj.bias", {c.kv_dim()}));
    }
    if (c.o_proj_bias) L.bo = vec(cp.require(p + "self_attn.o_proj.bias", {H}));
    if (c.mlp_bias) {
      L.b_gate = vec(cp.require(p + "mlp.gate_proj.bias", {I}));
      L.b_up = vec(cp.require(p + "mlp.up_proj.bias", {I}));
      L.b_down = vec(cp.require(p + "mlp.down_proj.bias", {H}));
    }
    if (c.qk_norm) {
      L.q_norm = vec(cp.require(p + "self_attn.q_norm.weight", {c.head_dim}));
      L.k_norm = vec(cp.require(p + "self_attn.k_norm.weight", {c.head_dim}));
    }
  }
}

std::unique_ptr<KvCache> Model::make_cache(int64_t max_tokens) const {
  constexpr int64_t kBlock = 16;
  return std::make_unique<KvCache>(config_, std::max<int64_t>(1, (max_tokens + kBlock - 1) / kBlock), kBlock, kv_dtype_);
}

void Model::prepare_rope(int64_t max_pos) {
  // Dynamic scaling depends on the sequence length, so its table is rebuilt when the length grows.
  const bool dynamic = config_.rope.scaling == RopeScaling::Dynamic;
  const int64_t seq_len = std::max(max_pos, config_.max_position_embeddings);
  if (max_pos <= rope_positions_ && (!dynamic || seq_len == rope_seq_len_)) return;
  const int64_t n = dynamic ? max_pos : std::max<int64_t>(max_pos, std::min<int64_t>(4096, config_.max_position_embeddings));
  const int64_t half = config_.head_dim / 2;
  const std::vector<double> inv = rope_inv_freq(config_, seq_len);
  rope_cos_.resize(n * half);
  rope_sin_.resize(n * half);
  for (int64_t p = 0; p < n; ++p)
    for (int64_t j = 0; j < half; ++j) {
      const double a = static_cast<double>(p) * inv[j];
      rope_cos_[p * half + j] = static_cast<float>(std::cos(a));
      rope_sin_[p * half + j] = static_cast<float>(std::sin(a));
    }
  rope_positions_ = n;
  rope_seq_len_ = seq_len;
}

void Model::forward(std::span<ForwardItem> batch) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), I = c.intermediate_size, hd = c.head_dim;
  int64_t n = 0, max_pos = 0;
  for (ForwardItem& it : batch) {
    if (it.tokens.empty()) fail("forward", "an item has no tokens");
    for (int32_t t : it.tokens)
      if (t < 0 || t >= c.vocab_size)
        fail("forward", "token id " + std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
    n += static_cast<int64_t>(it.tokens.size());
    max_pos = std::max(max_pos, it.seq->length() + static_cast<int64_t>(it.tokens.size()));
  }
  if (n == 0) return;
  // Reserve cache positions first so that running out of blocks fails before any state changes.
  std::vector<int64_t> first_pos;
  for (ForwardItem& it : batch) first_pos.push_back(it.seq->length());
  for (size_t i = 0; i < batch.size(); ++i) {
    try {
      batch[i].seq->extend(first_pos[i] + static_cast<int64_t>(batch[i].tokens.size()));
    } catch (...) {
      for (size_t j = 0; j <= i; ++j) batch[j].seq->truncate(first_pos[j]);
      throw;
    }
  }
  prepare_rope(max_pos);
  const int tune_kind = kernels::WidthTuner::kind_of_tokens(n);
  const int width = tuner_.choose(tune_kind);
  pool_.set_caller_only(width == 1);
  const auto started = std::chrono::steady_clock::now();
  Scratch& s = *scratch_;
  s.resize(c, n);
  kernels::ThreadPool& pool = pool_;

  int64_t row = 0;
  for (ForwardItem& it : batch)
    for (int32_t t : it.tokens) kernels::copy_row(embed_, t, s.x.data() + (row++) * H);

  const kernels::AttentionShape shape{c.num_attention_heads, c.num_key_value_heads, hd, c.sliding_window,
                                      static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)))};
  const int64_t half = hd / 2;
  std::vector<const void*> kb, vb;
  std::vector<kernels::AttentionItem> attn(batch.size());

  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const Layer& L = layers_[static_cast<size_t>(l)];
    kernels::rms_norm(s.x.data(), L.attn_norm.data(), n, H, static_cast<float>(c.rms_norm_eps), s.xb.data());
    const kernels::MatmulOut qkv[] = {{&L.wq, s.q.data()}, {&L.wk, s.k.data()}, {&L.wv, s.v.data()}};
    kernels::matmul_fused(qkv, s.xb.data(), n, pool);
    if (!L.bq.empty()) {
      kernels::add_bias(s.q.data(), L.bq.data(), n, Q);
      kernels::add_bias(s.k.data(), L.bk.data(), n, KV);
      kernels::add_bias(s.v.data(), L.bv.data(), n, KV);
    }
    if (!L.q_norm.empty()) {
      const float eps = static_cast<float>(c.rms_norm_eps);
      kernels::rms_norm(s.q.data(), L.q_norm.data(), n * c.num_attention_heads, hd, eps, s.q.data());
      kernels::rms_norm(s.k.data(), L.k_norm.data(), n * c.num_key_value_heads, hd, eps, s.k.data());
    }
    // RoPE, then store keys and values into each sequence's cache blocks.
    row = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      KvSequence& seq = *batch[i].seq;
      KvCache& cache = seq.cache();
      const int64_t bs = cache.block_size();
      for (size_t t = 0; t < batch[i].tokens.size(); ++t, ++row) {
        const int64_t pos = first_pos[i] + static_cast<int64_t>(t);
        const float* cs = rope_cos_.data() + pos * half;
        const float* sn = rope_sin_.data() + pos * half;
        kernels::rope_rotate_half(s.q.data() + row * Q, c.num_attention_heads, hd, cs, sn);
        kernels::rope_rotate_half(s.k.data() + row * KV, c.num_key_value_heads, hd, cs, sn);
        const int32_t block = seq.blocks()[static_cast<size_t>(pos / bs)];
        const int64_t slot = pos % bs, es = static_cast<int64_t>(dtype_size(cache.dtype()));
        for (int64_t h = 0; h < c.num_key_value_heads; ++h) {  // head-major blocks (kernels::KvView)
          const int64_t at = kernels::kv_offset(bs, hd, h, slot) * es;
          kernels::store_row(s.k.data() + row * KV + h * hd, hd, cache.dtype(), static_cast<uint8_t*>(cache.keys(block, l)) + at);
          kernels::store_row(s.v.data() + row * KV + h * hd, hd, cache.dtype(), static_cast<uint8_t*>(cache.values(block, l)) + at);
        }
      }
    }
    // Attention of every sequence in one dispatch: a decode step has little work per sequence.
    kb.clear();
    vb.clear();
    for (ForwardItem& it : batch)
      for (int32_t b : it.seq->blocks()) {
        kb.push_back(it.seq->cache().keys(b, l));
        vb.push_back(it.seq->cache().values(b, l));
      }
    row = 0;
    size_t table = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      const KvSequence& seq = *batch[i].seq;
      const int64_t nt = static_cast<int64_t>(batch[i].tokens.size());
      attn[i] = kernels::AttentionItem{s.q.data() + row * Q, nt, first_pos[i],
                                       kernels::KvView{kb.data() + table, vb.data() + table, seq.cache().block_size(), seq.cache().dtype()},
                                       s.att.data() + row * Q};
      table += seq.blocks().size();
      row += nt;
    }
    kernels::attention(attn, shape, pool);
    kernels::matmul(L.wo, s.att.data(), n, s.xb.data(), pool);
    if (!L.bo.empty()) kernels::add_bias(s.xb.data(), L.bo.data(), n, H);
    kernels::add_inplace(s.x.data(), s.xb.data(), n * H);

    kernels::rms_norm(s.x.data(), L.mlp_norm.data(), n, H, static_cast<float>(c.rms_norm_eps), s.xb.data());
    const kernels::MatmulOut gate_up[] = {{&L.w_gate, s.gate.data()}, {&L.w_up, s.up.data()}};
    kernels::matmul_fused(gate_up, s.xb.data(), n, pool);
    if (!L.b_gate.empty()) {
      kernels::add_bias(s.gate.data(), L.b_gate.data(), n, I);
      kernels::add_bias(s.up.data(), L.b_up.data(), n, I);
    }
    kernels::silu_mul(s.gate.data(), s.up.data(), n * I);
    kernels::matmul(L.w_down, s.gate.data(), n, s.xb.data(), pool);
    if (!L.b_down.empty()) kernels::add_bias(s.xb.data(), L.b_down.data(), n, H);
    kernels::add_inplace(s.x.data(), s.xb.data(), n * H);
  }

  // Final norm and lm_head only for the rows whose logits are wanted, all in one product so that the
  // output matrix is read once per step rather than once per sequence.
  int64_t wanted = 0;
  row = 0;
  for (ForwardItem& it : batch) {
    const int64_t nt = static_cast<int64_t>(it.tokens.size());
    const int64_t count = it.all_logits ? nt : 1;
    if (it.logits != nullptr) {
      kernels::rms_norm(s.x.data() + (row + nt - count) * H, final_norm_.data(), count, H,
                        static_cast<float>(c.rms_norm_eps), s.last.data() + wanted * H);
      wanted += count;
    }
    row += nt;
  }
  const int64_t V = c.vocab_size;
  s.logits.resize(static_cast<size_t>(wanted * V));
  kernels::matmul(lm_head_, s.last.data(), wanted, s.logits.data(), pool);
  wanted = 0;
  for (ForwardItem& it : batch) {
    if (it.logits == nullptr) continue;
    const int64_t count = it.all_logits ? static_cast<int64_t>(it.tokens.size()) : 1;
    std::copy_n(s.logits.data() + wanted * V, count * V, it.logits);
    wanted += count;
  }
  tuner_.record(tune_kind, width, seconds_since(started));
}

std::vector<float> Model::forward(KvSequence& seq, std::span<const int32_t> tokens) {
  std::vector<float> logits(static_cast<size_t>(config_.vocab_size));
  ForwardItem item{&seq, tokens, logits.data(), false};
  forward(std::span<ForwardItem>(&item, 1));
  return logits;
}

}  // namespace ember::model
