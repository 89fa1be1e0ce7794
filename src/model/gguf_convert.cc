#include "model/gguf_convert.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "base/error.h"
#include "base/mapped_file.h"
#include "kernels/thread_pool.h"
#include "model/config.h"
#include "model/gguf_architecture.h"
#include "model/gguf_tokenizer.h"
#include "model/gguf_writer.h"
#include "model/rope_config.h"
#include "model/safetensors.h"

namespace ember::model {

namespace {

using kernels::GgmlType;
using json = nlohmann::json;

// How a tensor is stored: which type it may take and how its values change on the way.
enum class Kind : uint8_t {
  kMatrix,     // the chosen type
  kEmbedding,  // a float type (the chosen one where it is a float type)
  kVector,     // 1-D (biases) and routers: F32
  kNorm,       // F32, plus one where the arch stores norms so
  kQ,          // a matrix (or bias) whose rows are permuted per head where the arch says so
  kK,
};

struct Planned {
  std::string name;                      // GGUF name
  std::vector<const TensorInfo*> parts;  // stacked along the outermost dimension (experts)
  Kind kind;
  std::vector<float> values;  // tensors made here (rope factors): parts empty
  std::vector<uint64_t> dims;  // innermost first
  GgmlType type = GgmlType::F32;
  bool stacked = false;  // parts are experts: one more (outermost) dimension
  // What a mix makes of it: the matrix's role, and its layer (attn_v: its index among the layers with
  // attention).
  kernels::TensorRole role = kernels::TensorRole::kOther;
  int layer = 0;
};

std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// A layer matrix's role in llama.cpp's mixes, by LayerMatrix.
constexpr kernels::TensorRole kMatrixRoles[] = {kernels::TensorRole::kAttnQ,      kernels::TensorRole::kAttnK,
                                                kernels::TensorRole::kAttnV,      kernels::TensorRole::kAttnOutput,
                                                kernels::TensorRole::kFfnGate,    kernels::TensorRole::kFfnUp,
                                                kernels::TensorRole::kFfnDown};
static_assert(std::size(kMatrixRoles) == kLayerMatrices);

GgmlType ggml_of(DType t) { return t == DType::F32 ? GgmlType::F32 : t == DType::F16 ? GgmlType::F16 : GgmlType::BF16; }
bool is_float(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

class Converter {
 public:
  Converter(const std::string& dir, const ConvertOptions& o)
      : dir_(dir), o_(o), c_(load_config(dir)), ck_(Checkpoint::open(dir)), pool_(o.threads) {
    ga_ = gguf_architecture_to_write(c_.model_type);
    if (ga_ == nullptr)
      fail(dir + "/config.json", "model_type \"" + c_.model_type + "\" cannot be written as GGUF (convert writes: " +
                                     writable_model_types() + ")");
    arch_ = find_architecture(c_.model_type);
    key_prefix_ = std::string(ga_->arch) + ".";
  }

  void run(const std::string& out) {
    check_config();
    GgufWriter w;
    w.kv_string("general.architecture", std::string(ga_->arch));
    plan_tensors();
    write_hyperparameters(w);
    write_tokenizer(w);
    write_file_type(w);
    for (const Planned& p : planned_) add_tensor(w, p);
    if (o_.progress) o_.progress("writing " + std::to_string(planned_.size()) + " tensors to " + out);
    w.write(out, [&](size_t i, size_t n, const std::string& name) {
      if (o_.progress) o_.progress("[" + std::to_string(i + 1) + "/" + std::to_string(n) + "] " + name);
    });
  }

 private:
  [[noreturn]] void refuse(const std::string& field, const std::string& why) const {
    fail(dir_ + "/config.json", field + ": " + why + " (GGUF arch " + std::string(ga_->arch) + " cannot say it)");
  }
  void warn(const std::string& what) const {
    if (o_.warn) o_.warn(what);
  }
  std::string key(const char* name) const { return key_prefix_ + name; }

  // What llama.cpp would run differently, refused by the config.json field that says it.
  void check_config() {
    const ModelConfig& c = c_;
    if (c.activation != ga_->activation) refuse("hidden_act", "the activation differs from the one llama.cpp runs for this arch");
    if (c.attention_sinks || c.attn_output_gate || c.linear.conv_kernel > 0 || c.value_norm || c.layer_scalar ||
        c.per_layer_input > 0)
      refuse("model_type", "this model's layers are not the arch's");
    if (arch_->gemma_norms) {
      const bool wide = c.num_hidden_layers == ga_->wide_query_scale_blocks;
      const double want = static_cast<double>(wide ? c.hidden_size / c.num_attention_heads : c.head_dim);
      const double have = c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : static_cast<double>(c.head_dim);
      if (have != want)
        refuse("query_pre_attn_scalar", "is " + number(have) + "; llama.cpp scales scores by 1/sqrt(" + number(want) +
                                            ") for this shape");
    }
    // Windows: one width; which layers slide must be the arch's rule.
    std::set<int64_t> widths;
    for (const LayerSpec& l : c.layers)
      if (l.sliding_window > 0) widths.insert(l.sliding_window);
    if (widths.size() > 1) refuse("sliding_window", "the layers' windows differ");
    window_ = widths.empty() ? 0 : *widths.begin();
    for (size_t l = 0; l < c.layers.size(); ++l) {
      const bool slides = c.layers[l].sliding_window > 0;
      bool rule = slides;
      if (ga_->windows == GgufWindows::kAllLayers) rule = window_ > 0;
      if (ga_->windows == GgufWindows::kEvenLayers) rule = window_ > 0 && l % 2 == 0;
      if (rule != slides) refuse("layer_types", "layer " + std::to_string(l) + (slides ? " slides" : " does not slide") +
                                                    ", which the arch's window rule does not give");
      const LayerRope rope = c.layers[l].rope;
      const bool no_rope_rule = ga_->no_rope_interval > 0 && (static_cast<int64_t>(l) + 1) % ga_->no_rope_interval == 0;
      if ((rope == LayerRope::kNone) != no_rope_rule)
        refuse("no_rope_layers", "layer " + std::to_string(l) + (no_rope_rule ? " rotates" : " skips RoPE") +
                                     " (llama.cpp skips RoPE on every " + std::to_string(ga_->no_rope_interval) + "th layer only)");
      if (rope != LayerRope::kNone && (rope == LayerRope::kLocal) != (slides && arch_->local_rope))
        refuse("rope_local_base_freq", "layer " + std::to_string(l) + "'s RoPE is not its window's");
    }
    if (window_ > 0 && ga_->windows == GgufWindows::kNone)
      warn("sliding_window " + std::to_string(window_) + " is not written: llama.cpp runs arch " + std::string(ga_->arch) +
           " on every position (the logits agree while a sequence fits in " + std::to_string(window_) + " tokens)");
    if (c.rope_local_used() && c.rope_local.scaling != RopeScaling::None)
      refuse("rope_local_base_freq", "llama.cpp never scales the sliding layers' RoPE");
    if (c.moe.num_experts > 0) {
      if (!ga_->stacked_experts) refuse("num_experts", "the arch has no experts");
      if (!c.moe.renormalize) refuse("norm_topk_prob", "false: llama.cpp always renormalises the top-k weights");
      if (c.moe.biases || c.moe.swiglu_limit > 0 || c.moe.beside_dense || c.moe.shared_intermediate_size > 0)
        refuse("model_type", "these experts are not the arch's");
      for (const LayerSpec& l : c.layers)
        if (!l.sparse_mlp) refuse("mlp_only_layers", "every layer of a GGUF mixture of experts is sparse");
    }
  }

  // {arch}.* keys, as llama.cpp names them.
  void write_hyperparameters(GgufWriter& w) {
    const ModelConfig& c = c_;
    auto u32 = [&](const char* name, int64_t v) { w.kv_u32(key(name), static_cast<uint32_t>(v)); };
    u32("vocab_size", c.vocab_size);
    u32("context_length", c.max_position_embeddings);
    u32("embedding_length", c.hidden_size);
    u32("block_count", c.num_hidden_layers);
    const bool experts = c.moe.num_experts > 0;
    u32("feed_forward_length", experts && ga_->expert_width_key == "feed_forward_length" ? c.moe.intermediate_size : c.intermediate_size);
    u32("attention.head_count", c.num_attention_heads);
    u32("attention.head_count_kv", c.num_key_value_heads);
    u32("attention.key_length", c.head_dim);
    u32("attention.value_length", c.head_dim);
    u32("rope.dimension_count", c.rope_dim());
    w.kv_f32(key("attention.layer_norm_rms_epsilon"), static_cast<float>(c.rms_norm_eps));
    w.kv_f32(key("rope.freq_base"), static_cast<float>(c.rope.theta));
    if (experts) {
      u32("expert_count", c.moe.num_experts);
      u32("expert_used_count", c.moe.experts_per_tok);
      if (ga_->expert_width_key != "feed_forward_length") u32(std::string(ga_->expert_width_key).c_str(), c.moe.intermediate_size);
    }
    if (window_ > 0 && ga_->windows != GgufWindows::kNone) {
      u32("attention.sliding_window", window_);
      if (ga_->windows == GgufWindows::kPattern) {
        std::vector<bool> pattern;
        for (const LayerSpec& l : c.layers) pattern.push_back(l.sliding_window > 0);
        w.kv_bools(key("attention.sliding_window_pattern"), pattern);
      }
    } else if (ga_->windows == GgufWindows::kAllLayers) {
      u32("attention.sliding_window", 0);  // phi3: llama.cpp's converter always writes it
    }
    if (c.rope_local_used()) w.kv_f32(key("rope.freq_base_swa"), static_cast<float>(c.rope_local.theta));
    if (c.attn_softcap > 0) w.kv_f32(key("attn_logit_softcapping"), static_cast<float>(c.attn_softcap));
    if (c.final_softcap > 0) w.kv_f32(key("final_logit_softcapping"), static_cast<float>(c.final_softcap));
    write_rope_scaling(w);
  }

  void write_rope_scaling(GgufWriter& w) {
    const RopeConfig& r = c_.rope;
    switch (r.scaling) {
      case RopeScaling::None: return;
      case RopeScaling::Linear:
        w.kv_string(key("rope.scaling.type"), "linear");
        w.kv_f32(key("rope.scaling.factor"), static_cast<float>(r.factor));
        return;
      case RopeScaling::Yarn:
        if (!r.truncate) refuse("rope_scaling.truncate", "false: llama.cpp always floors and ceils YaRN's correction range");
        if (std::fabs(r.attention_factor - yarn_mscale(r.factor)) > 1e-12)
          refuse("rope_scaling.attention_factor", "llama.cpp's YaRN scales attention by 0.1 ln(factor) + 1");
        w.kv_string(key("rope.scaling.type"), "yarn");
        w.kv_f32(key("rope.scaling.factor"), static_cast<float>(r.factor));
        w.kv_u32(key("rope.scaling.original_context_length"), static_cast<uint32_t>(r.original_max_position_embeddings));
        if (r.beta_fast != 32.0) w.kv_f32(key("rope.scaling.yarn_beta_fast"), static_cast<float>(r.beta_fast));
        if (r.beta_slow != 1.0) w.kv_f32(key("rope.scaling.yarn_beta_slow"), static_cast<float>(r.beta_slow));
        return;
      case RopeScaling::LongRope: {
        const double factor = static_cast<double>(c_.max_position_embeddings) / static_cast<double>(r.original_max_position_embeddings);
        if (std::fabs(factor - r.factor) > 1e-9 * factor)
          refuse("rope_scaling.factor", "llama.cpp's long-rope factor is max_position_embeddings / original_max_position_embeddings");
        w.kv_u32(key("rope.scaling.original_context_length"), static_cast<uint32_t>(r.original_max_position_embeddings));
        w.kv_f32(key("rope.scaling.attn_factor"), static_cast<float>(r.attention_factor));
        return;
      }
      case RopeScaling::Llama3: return;  // rope_freqs.weight (plan_tensors)
      default: refuse("rope_scaling.rope_type", "this RoPE scaling has no GGUF form (written: linear, yarn, longrope, llama3)");
    }
  }

  void write_tokenizer(GgufWriter& w) { write_gguf_tokenizer(w, dir_, c_.vocab_size, c_.eos_token_ids); }

  // general.file_type (llama.cpp's llama_ftype) from the matrices' types.
  void write_file_type(GgufWriter& w) {
    std::map<GgmlType, size_t> count;
    for (const Planned& p : planned_)
      if (p.dims.size() >= 2 && p.kind != Kind::kEmbedding) ++count[p.type];
    GgmlType most = GgmlType::F32;
    size_t best = 0;
    for (const auto& [t, k] : count)
      if (k > best) most = t, best = k;
    const std::map<GgmlType, uint32_t> ftype = {{GgmlType::F32, 0}, {GgmlType::F16, 1}, {GgmlType::Q4_0, 2},
                                               {GgmlType::Q8_0, 7}, {GgmlType::Q4_K, 14}, {GgmlType::BF16, 32}};
    // llama_ftype's LLAMA_FTYPE_MOSTLY_Q4_K_M and _Q5_K_M for the mixes.
    const uint32_t mix_ftype = o_.mix == kernels::QuantMix::Q4_K_M ? 15 : 17;
    w.kv_u32("general.file_type", o_.mix != kernels::QuantMix::None ? mix_ftype : ftype.at(most));
    if (!is_float(most)) w.kv_u32("general.quantization_version", 2);
  }

  // --- tensors

  const TensorInfo* find(const std::string& name) {
    const TensorNames& hn = *arch_->names;
    const TensorInfo* t = ck_.find(name);
    if (t == nullptr) t = ck_.find(std::string(hn.without_base_prefix(name)));
    if (t != nullptr) used_.insert(t->name);
    return t;
  }

  // GGUF `gguf` from the checkpoint's `hf`; an absent optional tensor (a bias) is skipped.
  void add(const std::string& gguf, const std::string& hf, Kind kind, bool optional = false,
           kernels::TensorRole role = kernels::TensorRole::kOther, int layer = 0) {
    const TensorInfo* t = find(hf);
    if (t == nullptr) {
      if (optional) return;
      fail(dir_, "tensor " + hf + " is missing (GGUF " + gguf + ")");
    }
    planned_.push_back({gguf, {t}, kind, {}, {}, GgmlType::F32, false, role, layer});
  }

  void plan_tensors() {
    const ModelConfig& c = c_;
    const TensorNames& hn = *arch_->names;
    const TensorNames& gn = *ga_->names;
    // A tied checkpoint may store the matrix once, as lm_head (story-656k).
    const bool embed_as_head = c.tie_word_embeddings && find(std::string(hn.embed)) == nullptr;
    // A tied embedding is the output to llama.cpp's mixes.
    add(std::string(gn.embed), std::string(embed_as_head ? hn.lm_head : hn.embed), Kind::kEmbedding, false,
        c.tie_word_embeddings ? kernels::TensorRole::kOutput : kernels::TensorRole::kOther);
    int attention = 0;  // layers with attention so far: attn_v's index in a mix
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const bool sparse = static_cast<size_t>(l) < c.layers.size() && c.layers[static_cast<size_t>(l)].sparse_mlp;
      const std::pair<std::string_view, std::string_view> norms[] = {
          {gn.attn_norm, hn.attn_norm}, {gn.mlp_norm, hn.mlp_norm}, {gn.post_attn_norm, hn.post_attn_norm},
          {gn.post_mlp_norm, hn.post_mlp_norm}, {c.qk_norm ? gn.q_norm : "", hn.q_norm}, {c.qk_norm ? gn.k_norm : "", hn.k_norm}};
      for (const auto& [g, h] : norms)
        if (!g.empty() && !h.empty()) add(gn.layer(l, g), hn.layer(l, h), Kind::kNorm);
      for (LayerMatrix m : kAllLayerMatrices) {
        const bool qkv = m == LayerMatrix::kQ || m == LayerMatrix::kK || m == LayerMatrix::kV;
        const bool mlp = m == LayerMatrix::kGate || m == LayerMatrix::kUp || m == LayerMatrix::kDown;
        if ((qkv && !hn.fused_qkv.empty()) || ((m == LayerMatrix::kGate || m == LayerMatrix::kUp) && !hn.fused_gate_up.empty()) ||
            (mlp && sparse))
          continue;
        const Kind kind = m == LayerMatrix::kQ ? Kind::kQ : m == LayerMatrix::kK ? Kind::kK : Kind::kMatrix;
        const auto role = kMatrixRoles[static_cast<size_t>(m)];
        add(gn.matrix(l, m), hn.matrix(l, m), kind, false, role, role == kernels::TensorRole::kAttnV ? attention++ : static_cast<int>(l));
        add(gn.matrix(l, m, ".bias"), hn.matrix(l, m, ".bias"), kind == Kind::kMatrix ? Kind::kVector : kind, true);
      }
      if (!hn.fused_qkv.empty())
        add(gn.layer(l, ga_->fused_qkv), hn.layer(l, hn.fused_qkv), Kind::kMatrix, false, kernels::TensorRole::kAttnQkv, attention++);
      if (!hn.fused_gate_up.empty()) add(gn.layer(l, ga_->fused_gate_up), hn.layer(l, hn.fused_gate_up), Kind::kMatrix);
      if (sparse) {
        add(gn.layer(l, gn.router), hn.layer(l, hn.router), Kind::kVector);
        for (size_t which = 0; which < 3; ++which) {
          Planned p{gn.layer(l, gn.expert_matrices[which]), {}, Kind::kMatrix, {}, {}, GgmlType::F32, true,
                    kMatrixRoles[static_cast<size_t>(LayerMatrix::kGate) + which], static_cast<int>(l)};
          for (int64_t e = 0; e < c.moe.num_experts; ++e) {
            const std::string name = hn.expert(l, e, which);
            const TensorInfo* t = find(name);
            if (t == nullptr) fail(dir_, "tensor " + name + " is missing (GGUF " + p.name + ")");
            p.parts.push_back(t);
          }
          planned_.push_back(std::move(p));
        }
      }
    }
    add(std::string(gn.final_norm), std::string(hn.final_norm), Kind::kNorm);
    if (!c.tie_word_embeddings) add(std::string(gn.lm_head), std::string(hn.lm_head), Kind::kMatrix, false, kernels::TensorRole::kOutput);
    else find(std::string(hn.lm_head));  // a tied checkpoint's copy, if any, is the embedding
    n_attention_ = attention;
    plan_rope_tensors();
    for (const std::string& name : ck_.names())
      if (!used_.contains(name) && name.find("rotary_emb.inv_freq") == std::string::npos)
        fail(dir_, "tensor " + name + " has no place in a GGUF file of arch " + std::string(ga_->arch));
    for (Planned& p : planned_) shape(p);
  }

  // Llama 3's RoPE as llama.cpp stores it: rope_freqs.weight, each frequency's divisor; Phi-3's
  // long-rope as its two factor tensors.
  void plan_rope_tensors() {
    const RopeConfig& r = c_.rope;
    auto values = [&](const char* name, std::vector<float> v) {
      planned_.push_back({name, {}, Kind::kVector, v, {v.size()}, GgmlType::F32});
    };
    if (r.scaling == RopeScaling::Llama3) {
      const std::vector<double> scaled = rope_inv_freq(c_, 0);
      std::vector<float> div;
      const double d = static_cast<double>(c_.rope_dim());
      for (size_t i = 0; i < scaled.size(); ++i)
        div.push_back(static_cast<float>(std::pow(r.theta, -2.0 * static_cast<double>(i) / d) / scaled[i]));
      values("rope_freqs.weight", div);
    }
    if (r.scaling == RopeScaling::LongRope) {
      values("rope_factors_long.weight", std::vector<float>(r.long_factor.begin(), r.long_factor.end()));
      values("rope_factors_short.weight", std::vector<float>(r.short_factor.begin(), r.short_factor.end()));
    }
  }

  // GGUF dims (innermost first) and type of a planned tensor.
  void shape(Planned& p) {
    if (p.parts.empty()) return;
    const std::vector<int64_t>& s = p.parts[0]->shape;
    for (const TensorInfo* t : p.parts)
      if (t->shape != s || t->dtype != p.parts[0]->dtype)
        fail(dir_, "tensor " + t->name + " differs in shape or type from " + p.parts[0]->name + " (GGUF " + p.name + ")");
    const bool vector = p.kind == Kind::kNorm || s.size() == 1;
    if (s.empty() || s.size() > 2 || (p.kind == Kind::kNorm && s.size() != 1))
      fail(dir_, "tensor " + p.parts[0]->name + " has shape " + shape_string(s) + ", which GGUF " + p.name + " cannot take");
    for (auto it = s.rbegin(); it != s.rend(); ++it) p.dims.push_back(static_cast<uint64_t>(*it));
    if (p.stacked) p.dims.push_back(p.parts.size());
    const GgmlType stored = ggml_of(p.parts[0]->dtype);
    const std::optional<GgmlType>& want = o_.type;
    if (vector || p.kind == Kind::kVector) {
      p.type = GgmlType::F32;
    } else if (o_.mix != kernels::QuantMix::None) {
      const bool v = p.role == kernels::TensorRole::kAttnV;
      p.type = kernels::mix_tensor_type(o_.mix, p.role, p.layer, v ? n_attention_ : static_cast<int>(c_.num_hidden_layers),
                                        static_cast<int64_t>(p.dims[0]), static_cast<int>(c_.moe.num_experts));
    } else if (!want || (p.kind == Kind::kEmbedding && !is_float(*want))) {
      p.type = stored;
    } else if (is_float(*want)) {
      p.type = *want;
    } else {
      const auto cols = static_cast<int64_t>(p.dims[0]);
      if (cols % kernels::ggml_type_info(*want).block_size == 0) p.type = *want;
      else if (cols % 32 == 0) p.type = GgmlType::Q8_0;  // llama.cpp's fallback for narrow K-quant rows
      else p.type = stored;
    }
  }

  // One part's values as float32, rows permuted and norms incremented as the arch stores them.
  std::vector<float> values(const Planned& p, const TensorInfo& t) const {
    const int64_t n = t.numel();
    std::vector<float> f(static_cast<size_t>(n));
    kernels::dequantize_row(ggml_of(t.dtype), t.data, n, f.data());
    if (p.kind == Kind::kNorm && ga_->norms_stored_plus_one)
      for (float& v : f) v += 1.0f;
    if ((p.kind == Kind::kQ || p.kind == Kind::kK) && ga_->permuted_qk) {
      // GGUF row 2i + j of a head is Hugging Face row j * head_dim/2 + i (llama.cpp rotates adjacent pairs).
      const int64_t hd = c_.head_dim, half = hd / 2, rows = t.shape[0], cols = n / rows;
      if (rows % hd != 0) fail(dir_, "tensor " + t.name + ": " + std::to_string(rows) + " rows are not whole heads of " + std::to_string(hd));
      std::vector<float> out(f.size());
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t head = r / hd, within = r % hd, hf = head * hd + (within % 2) * half + within / 2;
        std::copy_n(f.begin() + hf * cols, cols, out.begin() + r * cols);
      }
      f.swap(out);
    }
    return f;
  }

  // One row in `type`: a mix's blocks by ggml's reference quantizers, as llama-quantize writes them.
  void quantize(GgmlType type, const float* row, int64_t cols, char* out) const {
    if (o_.mix != kernels::QuantMix::None && kernels::can_quantize_ref(type)) kernels::quantize_row_ref(type, row, cols, out);
    else kernels::quantize_row(type, row, cols, out);
  }

  void add_tensor(GgufWriter& w, const Planned& p) {
    const auto cols = static_cast<int64_t>(p.dims[0]);
    int64_t numel = 1;
    for (uint64_t d : p.dims) numel *= static_cast<int64_t>(d);
    const int64_t rows = numel / cols, row_bytes = kernels::ggml_row_bytes(p.type, cols);
    w.tensor(p.name, p.dims, static_cast<uint32_t>(p.type), static_cast<uint64_t>(rows * row_bytes), [this, &p, cols, row_bytes] {
      std::string out;
      auto put = [&](const std::vector<float>& f) {
        const size_t at = out.size();
        const auto rows = static_cast<int64_t>(f.size()) / cols;
        out.resize(at + static_cast<size_t>(rows * row_bytes));
        pool_.parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r)
            quantize(p.type, f.data() + r * cols, cols, out.data() + at + static_cast<size_t>(r * row_bytes));
        });
      };
      if (p.parts.empty()) put(p.values);
      for (const TensorInfo* t : p.parts) put(values(p, *t));
      return out;
    });
  }

  std::string dir_;
  const ConvertOptions& o_;
  ModelConfig c_;
  Checkpoint ck_;
  const GgufArchitecture* ga_ = nullptr;
  const Architecture* arch_ = nullptr;
  std::string key_prefix_;
  int64_t window_ = 0;
  int n_attention_ = 0;  // layers with attention (attn_v or attn_qkv)
  std::vector<Planned> planned_;
  std::set<std::string> used_;
  kernels::ThreadPool pool_;
};

constexpr std::pair<const char*, GgmlType> kConvertTypes[] = {{"f32", GgmlType::F32},   {"f16", GgmlType::F16},
                                                              {"bf16", GgmlType::BF16}, {"q8_0", GgmlType::Q8_0},
                                                              {"q4_0", GgmlType::Q4_0}, {"q4_k", GgmlType::Q4_K}};

}  // namespace

void write_gguf_tokenizer(GgufWriter& w, const std::string& dir, int64_t rows, const std::vector<int32_t>& eos_ids) {
  const std::string tok_path = dir + "/tokenizer.json", cfg_path = dir + "/tokenizer_config.json";
  json tok, tcfg = json::object();
  try {
    tok = json::parse(read_file(tok_path));
    if (std::filesystem::exists(cfg_path)) tcfg = json::parse(read_file(cfg_path));
  } catch (const json::exception& e) {
    fail(dir, std::string("tokenizer files: invalid JSON: ") + e.what());
  }
  const json& model = tok["model"];
  if (!model.is_object() || model.value("type", "") != "BPE")
    fail(tok_path, "model.type must be \"BPE\" (GGUF's gpt2 and llama tokenizers are BPE)");
  std::map<int64_t, std::string> by_id;
  std::map<std::string, int64_t> ids;
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) by_id[it.value().get<int64_t>()] = it.key();
  std::set<int64_t> added, special;
  for (const json& t : tok.value("added_tokens", json::array())) {
    const int64_t id = t.at("id").get<int64_t>();
    by_id[id] = t.at("content").get<std::string>();
    added.insert(id);
    if (t.value("special", false)) special.insert(id);
  }
  for (const auto& [id, s] : by_id) ids.emplace(s, id);
  const int64_t n = rows > 0 ? rows : by_id.empty() ? 0 : by_id.rbegin()->first + 1;
  if (!by_id.empty() && (by_id.begin()->first < 0 || by_id.rbegin()->first >= n))
    fail(tok_path, "token id " + std::to_string(by_id.rbegin()->first) + " is outside the embedding's " + std::to_string(n) + " rows");
  auto content = [](const json& v) -> std::optional<std::string> {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    return std::nullopt;
  };
  auto token_of = [&](const std::string& s) -> std::optional<int64_t> {
    const auto it = ids.find(s);
    return it == ids.end() ? std::nullopt : std::optional<int64_t>(it->second);
  };
  auto special_id = [&](const char* field) -> std::optional<int64_t> {
    const auto s = tcfg.contains(field) ? content(tcfg[field]) : std::nullopt;
    return s ? token_of(*s) : std::nullopt;
  };
  auto bos = special_id("bos_token"), eos = special_id("eos_token");
  const auto unk = special_id("unk_token"), pad = special_id("pad_token");
  for (const auto& id : {bos, eos, unk, pad})
    if (id) special.insert(*id);

  // Byte-level BPE (a ByteLevel pre-tokenizer or decoder): llama.cpp's gpt2; SentencePiece-style
  // (byte fallback): its llama tokenizer, the merges ranked by score.
  const std::string dump = tok["pre_tokenizer"].dump() + tok["decoder"].dump();
  const bool byte_level = dump.find("\"ByteLevel\"") != std::string::npos;
  const bool spm = !byte_level && model.value("byte_fallback", false);
  if (!byte_level && !spm) fail(tok_path, "model: a BPE that is neither byte-level nor byte-fallback has no GGUF form");
  std::vector<std::string> merges;
  for (const json& m : model.value("merges", json::array())) {
    if (m.is_string()) {
      merges.push_back(m.get<std::string>());
    } else {
      const std::string a = m.at(0).get<std::string>(), b = m.at(1).get<std::string>();
      if (a.find(' ') != std::string::npos || b.find(' ') != std::string::npos)
        fail(tok_path, "model.merges: the merge of \"" + a + "\" and \"" + b + "\" holds a space, which GGUF's merge strings cannot");
      merges.push_back(a + " " + b);
    }
  }
  std::map<std::string, int64_t> rank;
  for (size_t r = 0; r < merges.size(); ++r) {
    const size_t space = merges[r].find(' ');
    if (space == std::string::npos) fail(tok_path, "model.merges: \"" + merges[r] + "\" is not two tokens");
    rank.emplace(merges[r].substr(0, space) + merges[r].substr(space + 1), static_cast<int64_t>(r));
  }
  static const std::regex byte_token("<0x[0-9A-Fa-f]{2}>");
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;  // llama.cpp's token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  for (int64_t i = 0; i < n; ++i) {
    const auto it = by_id.find(i);
    if (it == by_id.end()) {
      tokens.push_back("[PAD" + std::to_string(i) + "]");
      scores.push_back(-1e4f);
      types.push_back(5);
      continue;
    }
    const std::string& s = it->second;
    tokens.push_back(s);
    float score = 0.0f;
    int32_t type = 1;
    if (special.contains(i)) {
      type = unk && *unk == i ? 2 : 3;
    } else if (spm && std::regex_match(s, byte_token)) {
      type = 6;
    } else if (added.contains(i)) {
      type = 4;
    } else {  // the merge that makes the piece ranks it; other pieces (characters) below every merge
      const auto r = rank.find(s);
      score = r != rank.end() ? -static_cast<float>(r->second) : -1000.0f - static_cast<float>(i) * 1e-3f;
    }
    scores.push_back(score);
    types.push_back(type);
  }
  w.kv_string("tokenizer.ggml.model", spm ? "llama" : "gpt2");
  if (byte_level) {
    const auto pre = gguf_pre_tokenizer_name(tok["normalizer"], tok["pre_tokenizer"]);
    if (!pre) fail(tok_path, "pre_tokenizer: not one whose llama.cpp name Ember knows (default, llama-bpe, qwen2, smollm)");
    w.kv_string("tokenizer.ggml.pre", *pre);
  }
  w.kv_strings("tokenizer.ggml.tokens", tokens);
  if (spm) w.kv_f32s("tokenizer.ggml.scores", scores);
  w.kv_i32s("tokenizer.ggml.token_type", types);
  // (llama.cpp reads merges only for gpt2; Ember also for llama, where the scores alone are lossy.)
  w.kv_strings("tokenizer.ggml.merges", merges);
  auto id_key = [&](const char* k, std::optional<int64_t> id) {
    if (id) w.kv_u32(k, static_cast<uint32_t>(*id));
  };
  // BOS / EOS around a text: the post-processor's template where it has one (what Hugging Face's
  // tokenizer runs), else tokenizer_config.json's flags.
  bool add_bos = tcfg.value("add_bos_token", false), add_eos = tcfg.value("add_eos_token", false);
  const json& pp = tok["post_processor"];
  const json steps = pp.is_object() && pp.value("type", "") == "Sequence" ? pp.value("processors", json::array()) : json::array({pp});
  for (const json& step : steps)
    if (step.is_object() && step.value("type", "") == "TemplateProcessing" && step.contains("single") && !step["single"].empty()) {
      const json& single = step["single"];
      add_bos = single.front().contains("SpecialToken");
      add_eos = single.size() > 1 && single.back().contains("SpecialToken");
      // The template's tokens, where tokenizer_config.json names none.
      if (add_bos && !bos) bos = token_of(single.front()["SpecialToken"].value("id", ""));
      if (add_eos && !eos) eos = token_of(single.back()["SpecialToken"].value("id", ""));
    }
  std::optional<int64_t> eos_id = eos;
  if (!eos_id && !eos_ids.empty()) eos_id = eos_ids[0];
  id_key("tokenizer.ggml.bos_token_id", bos);
  id_key("tokenizer.ggml.eos_token_id", eos_id);
  for (int32_t e : eos_ids)
    if (!eos_id || e != *eos_id) {
      id_key("tokenizer.ggml.eot_token_id", e);  // a second stop token of config.json
      break;
    }
  id_key("tokenizer.ggml.unknown_token_id", unk);
  id_key("tokenizer.ggml.padding_token_id", pad);
  w.kv_bool("tokenizer.ggml.add_bos_token", add_bos);
  w.kv_bool("tokenizer.ggml.add_eos_token", add_eos);
  if (spm) {
    // A space before the text: a Prepend normalizer, or a Metaspace pre-tokenizer that prepends.
    const std::string norm = tok["normalizer"].dump(), pre = tok["pre_tokenizer"].dump();
    const bool metaspace_prepends = pre.find("\"Metaspace\"") != std::string::npos &&
                                    pre.find("\"prepend_scheme\":\"never\"") == std::string::npos &&
                                    pre.find("\"add_prefix_space\":false") == std::string::npos;
    w.kv_bool("tokenizer.ggml.add_space_prefix", norm.find("\"Prepend\"") != std::string::npos || metaspace_prepends);
  }
  std::optional<std::string> tmpl;
  if (tcfg.contains("chat_template")) {
    if (!tcfg["chat_template"].is_string())
      fail(cfg_path, "chat_template: only a single template string can be written (tokenizer.chat_template)");
    tmpl = tcfg["chat_template"].get<std::string>();
  } else if (std::filesystem::exists(dir + "/chat_template.jinja")) {
    tmpl = read_file(dir + "/chat_template.jinja");
  }
  if (tmpl) w.kv_string("tokenizer.chat_template", *tmpl);
}

namespace {

// The file is renamed over out_path at the end, whatever is there: as root, -o /dev/full replaced the
// device node. Anything but a regular file (or nothing) at out_path is refused before any work.
void check_output_path(const std::string& out_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(out_path, ec);  // through a link: what the path names
  if (!fs::exists(st) || fs::is_regular_file(st)) return;
  const char* kind = fs::is_directory(st)        ? "a directory"
                     : fs::is_character_file(st) ? "a character device"
                     : fs::is_block_file(st)     ? "a block device"
                     : fs::is_fifo(st)           ? "a fifo"
                     : fs::is_socket(st)         ? "a socket"
                                                 : "something other than a file";
  fail(out_path, std::string("exists and is ") + kind + ": convert writes a new file or replaces a regular one");
}

}  // namespace

void convert_to_gguf(const std::string& model_dir, const std::string& out_path, const ConvertOptions& options) {
  if (std::filesystem::is_regular_file(model_dir))
    fail(model_dir, "convert reads a Hugging Face model folder; this is a file (a GGUF file needs no converting: "
                    "the other commands load it as it is)");
  check_output_path(out_path);
  Converter(model_dir, options).run(out_path);
}

std::string convert_type_names() {
  std::string s;
  for (const auto& [name, type] : kConvertTypes) s += (s.empty() ? "" : ", ") + std::string(name);
  return s + ", q4_k_m, q5_k_m";
}

void set_convert_quantize(ConvertOptions& o, const std::string& name) {
  for (kernels::QuantMix m : {kernels::QuantMix::Q4_K_M, kernels::QuantMix::Q5_K_M})
    if (name == kernels::quant_mix_name(m)) {
      o.mix = m;
      return;
    }
  o.type = parse_convert_type(name);
}

kernels::GgmlType parse_convert_type(const std::string& name) {
  for (const auto& [n, type] : kConvertTypes)
    if (name == n) return type;
  throw Error("--quantize " + name + ": not a type convert writes (" + convert_type_names() + ")");
}

}  // namespace ember::model
