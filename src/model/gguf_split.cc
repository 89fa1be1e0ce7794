#include "model/gguf_split.h"

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
  // Consecutive row blocks of `t`, one per (rows, name).
  void rows(const GgufTensor& t, const std::vector<std::pair<int64_t, std::string>>& blocks) {
    int64_t first = 0;
    for (const auto& [n, name] : blocks) {
      parts.push_back(row_range(t, first, n, name));
      first += n;
    }
  }
};

}  // namespace

std::vector<GgufTensor> gguf_bound_tensors(const GgufFile& g, const GgufArchitecture& arch, const ModelConfig& c) {
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
    if (arch.stacked_experts && sparse) {  // expert e: the e-th slab
      const int64_t E = c.moe.num_experts, I = c.moe.intermediate_size;
      for (size_t which = 0; which < 3; ++which) {
        const int64_t rows = which == 2 ? H : I, cols = which == 2 ? I : H;
        const GgufTensor& t = s.require(n.layer(l, n.expert_matrices[which]), {cols, rows, E}, "one expert per slab");
        for (int64_t e = 0; e < E; ++e) s.parts.push_back(row_range(t, e * rows, rows, n.expert(l, e, which)));
      }
    }
  }
  std::vector<GgufTensor> out;
  out.reserve(g.tensors().size() + s.parts.size());
  for (const GgufTensor& t : g.tensors())
    if (!s.split.contains(t.name)) out.push_back(t);
  for (GgufTensor& t : s.parts) out.push_back(std::move(t));
  return out;
}

}  // namespace ember::model
