#include "model/gguf_split.h"

#include <cmath>
#include <cstring>
#include <set>
#include <string>

#include "base/error.h"

namespace ember::model {

namespace {

std::string dims_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// Rows [first, first + rows) of `t` (over all its slabs: a 3-D tensor's rows run slab after slab), a
// matrix of its own. Quant blocks never cross a row, so any block type splits this way.
GgufTensor row_range(const GgufTensor& t, int64_t first, int64_t rows, std::string name) {
  GgufTensor part = t;
  part.name = std::move(name);
  part.dims = {t.row_length(), rows};
  part.shape = {rows, t.row_length()};
  const size_t skip = static_cast<size_t>(first) * t.row_bytes();
  part.data = t.data + skip;
  part.offset = t.offset + skip;
  part.size_bytes = static_cast<size_t>(rows) * t.row_bytes();
  return part;
}

struct Splitter {
  const GgufFile& g;
  const GgufArchitecture& arch;
  std::set<std::string> split;  // stored names replaced by their parts
  std::vector<GgufTensor> parts;

  // The stored tensor `name`, which must have GGUF dims `dims` (innermost first).
  const GgufTensor& require(const std::string& name, const std::vector<int64_t>& dims, const char* what) {
    const GgufTensor* t = g.find_tensor(name);
    if (t == nullptr) fail(g.path(), "tensor " + name + " is missing (arch " + std::string(arch.arch) + " stores " + what + " in it)");
    if (t->dims != dims)
      fail(g.path(), "tensor " + name + " has GGUF shape " + dims_string(t->dims) + ", expected " + dims_string(dims) + " (" +
                         what + ")");
    split.insert(name);
    return *t;
  }
  // `t` under another name and shape (the same bytes).
  void rename(const GgufTensor& t, std::string name, std::vector<int64_t> dims) {
    GgufTensor part = t;
    part.name = std::move(name);
    part.shape.assign(dims.rbegin(), dims.rend());
    part.dims = std::move(dims);
    parts.push_back(std::move(part));
  }
  // A part of `like`'s type holding `bytes` (kept in `owned`), GGUF dims `dims`.
  void own(const GgufTensor& like, std::string name, std::vector<int64_t> dims, std::vector<uint8_t> bytes,
           std::map<std::string, std::vector<uint8_t>>& owned) {
    std::vector<uint8_t>& kept = owned[name] = std::move(bytes);
    GgufTensor part = like;
    part.data = kept.data();
    part.size_bytes = kept.size();
    part.offset = 0;
    rename(part, std::move(name), std::move(dims));
  }
  // Consecutive row blocks of `t`, one per (rows, name).
  void rows(const GgufTensor& t, const std::vector<std::pair<int64_t, std::string>>& blocks) {
    int64_t first = 0;
    for (const auto& [n, name] : blocks) {
      parts.push_back(row_range(t, first, n, name));
      first += n;
    }
  }
};

// The Gated DeltaNet tensors of linear layer `l` that the file stores otherwise than Hugging Face.
void split_linear(Splitter& s, const ModelConfig& c, int64_t l, std::map<std::string, std::vector<uint8_t>>& owned) {
  const GgufFile& g = s.g;
  const TensorNames& n = *s.arch.names;
  const LinearAttentionConfig& a = c.linear;
  const int64_t H = c.hidden_size, nv = a.value_heads, C = a.conv_channels(), K = a.conv_kernel;
  // ssm_conv1d [K, C] (GGUF order) is Hugging Face's conv1d.weight [C][1][K].
  const GgufTensor& conv = s.require(n.layer(l, n.linear.conv), {K, C}, "the conv kernel of each [q; k; v] channel");
  s.rename(conv, conv.name, {K, 1, C});
  // ssm_a = -exp(A_log), every value negative.
  const GgufTensor& neg_a = s.require(n.layer(l, "ssm_a", ""), {nv}, "-exp(A_log) per value head");
  if (!kernels::can_dequantize(neg_a.type)) fail(g.path(), "tensor " + neg_a.name + " must hold float values");
  std::vector<float> v(static_cast<size_t>(nv));
  kernels::dequantize_row(neg_a.type, neg_a.data, nv, v.data());
  for (float& x : v) {
    if (!(x < 0.0f) || !std::isfinite(x)) fail(g.path(), "tensor " + neg_a.name + " holds a value that is not negative (it is -exp(A_log))");
    x = static_cast<float>(std::log(-static_cast<double>(x)));
  }
  std::vector<uint8_t> bytes(v.size() * sizeof(float));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  GgufTensor like = neg_a;
  like.type = kernels::GgmlType::F32;
  s.own(like, n.layer(l, n.linear.a_log, ""), {nv}, std::move(bytes), owned);
  if (s.arch.fused_ba.empty()) return;
  // Rows [b (r), a (r)] per key head: b's and a's rows gathered in value head order.
  const GgufTensor& ba = s.require(n.layer(l, s.arch.fused_ba), {H, 2 * nv}, "b and a, [b (r), a (r)] per key head");
  const int64_t r = nv / a.key_heads;
  const size_t rb = ba.row_bytes();
  for (int64_t part = 0; part < 2; ++part) {
    std::vector<uint8_t> rows(static_cast<size_t>(nv) * rb);
    for (int64_t h = 0; h < nv; ++h)
      std::memcpy(rows.data() + static_cast<size_t>(h) * rb, ba.data + static_cast<size_t>((h / r) * 2 * r + part * r + h % r) * rb, rb);
    s.own(ba, n.layer(l, part == 0 ? n.linear.b : n.linear.a), {H, nv}, std::move(rows), owned);
  }
}

// The shared expert of sparse layer `l`: ffn_{gate,up,down}_shexp under names->shared_expert and its gate
// ffn_gate_inp_shexp [hidden] as the [1][hidden] matrix Hugging Face stores.
void split_shared_expert(Splitter& s, const ModelConfig& c, int64_t l) {
  const TensorNames& n = *s.arch.names;
  const int64_t H = c.hidden_size, SI = c.moe.shared_intermediate_size;
  constexpr const char* kStored[] = {"ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"};
  for (size_t which = 0; which < 3; ++which) {
    const std::vector<int64_t> dims = which == 2 ? std::vector<int64_t>{SI, H} : std::vector<int64_t>{H, SI};
    const GgufTensor& t = s.require(n.layer(l, kStored[which]), dims, "the shared expert");
    s.rename(t, n.layer(l, std::string(n.shared_expert) + "." + std::string(n.expert_matrices[which])), dims);
  }
  const GgufTensor& gate = s.require(n.layer(l, n.shared_expert_gate), {H}, "the shared expert's gate");
  s.rename(gate, gate.name, {H, 1});
}

}  // namespace

std::vector<GgufTensor> gguf_bound_tensors(const GgufFile& g, const GgufArchitecture& arch, const ModelConfig& c,
                                           std::map<std::string, std::vector<uint8_t>>& owned) {
  Splitter s{g, arch, {}, {}};
  const TensorNames& n = *arch.names;
  const int64_t H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim();
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const bool sparse = c.layers[static_cast<size_t>(l)].sparse_mlp;
    if (!arch.fused_qkv.empty()) {  // rows [q; k; v]
      const GgufTensor& t = s.require(n.layer(l, arch.fused_qkv), {H, Q + 2 * KV}, "q, k and v by rows");
      s.rows(t, {{Q, n.matrix(l, LayerMatrix::kQ)}, {KV, n.matrix(l, LayerMatrix::kK)}, {KV, n.matrix(l, LayerMatrix::kV)}});
    }
    if (!arch.fused_gate_up.empty() && !sparse) {  // rows [gate; up]
      const int64_t I = c.intermediate_size;
      const GgufTensor& t = s.require(n.layer(l, arch.fused_gate_up), {H, 2 * I}, "gate and up by rows");
      s.rows(t, {{I, n.matrix(l, LayerMatrix::kGate)}, {I, n.matrix(l, LayerMatrix::kUp)}});
    }
    if (arch.linear_layout != LinearRule::kNone && c.layers[static_cast<size_t>(l)].kind == LayerKind::kLinear)
      split_linear(s, c, l, owned);
    if (sparse && c.moe.shared_intermediate_size > 0) split_shared_expert(s, c, l);
    if (arch.stacked_experts && sparse) {  // expert e: the e-th slab
      const int64_t E = c.moe.num_experts, I = c.moe.intermediate_size;
      for (size_t which = 0; which < 3; ++which) {
        const int64_t rows = which == 2 ? H : I, cols = which == 2 ? I : H;
        const GgufTensor& t = s.require(n.layer(l, n.expert_matrices[which]), {cols, rows, E}, "one expert per slab");
        for (int64_t e = 0; e < E; ++e) s.parts.push_back(row_range(t, e * rows, rows, n.expert(l, e, which)));
        if (!c.moe.biases) continue;  // gpt-oss: each expert's bias, a row of the stacked [E][rows]
        const GgufTensor& b = s.require(n.layer(l, n.expert_matrices[which], ".bias"), {rows, E}, "one expert's bias per row");
        for (int64_t e = 0; e < E; ++e) {
          GgufTensor part = row_range(b, e, 1, n.expert(l, e, which, ".bias"));
          part.dims = part.shape = {rows};
          s.parts.push_back(std::move(part));
        }
      }
    }
  }
  std::vector<GgufTensor> out;
  out.reserve(g.tensors().size() + s.parts.size());
  for (const GgufTensor& t : g.tensors())
    if (!s.split.contains(t.name)) out.push_back(t);
  for (const GgufTensor& t : s.parts)  // a part may replace the tensor it came from, never another
    if (!s.split.contains(t.name) && g.find_tensor(t.name) != nullptr)
      fail(g.path(), "tensor " + t.name + " is stored, and arch " + std::string(arch.arch) + " also makes it from other tensors");
  for (GgufTensor& t : s.parts) out.push_back(std::move(t));
  return out;
}

}  // namespace ember::model
