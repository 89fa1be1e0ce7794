#pragma once
// A copy of a GGUF file with some metadata keys replaced, dropped or added and some tensors dropped or
// re-shaped (their bytes cut or zero-padded to the new size): crafted variants of the shared files for
// tests of what a reader does with a wrong key or tensor table; or the whole file as F32.
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "gguf_test_writer.h"
#include "kernels/gguf_quants.h"
#include "model/gguf.h"

namespace ember::test {

// One metadata value: its GGUF type id, the element type for arrays, and the value as JSON.
struct GgufValue {
  uint32_t type = 4;
  uint32_t element_type = 0;
  nlohmann::json value;
};

struct GgufEdits {
  std::map<std::string, std::optional<GgufValue>> keys;  // nullopt: dropped; else replaced or added
  std::map<std::string, std::optional<std::vector<uint64_t>>> tensors;  // nullopt: dropped; else new dims
  // Every tensor of another type dequantized to F32 (gguf-py's reference values): the file's exact
  // math run on Ember's float path.
  bool to_f32 = false;
  // Tensors added after the file's own: (new name, the tensor whose type, dims and bytes it copies).
  std::vector<std::pair<std::string, std::string>> copies;
  // Tensors renamed (with new dims over the same bytes), and F32 tensors of zeros added.
  std::map<std::string, std::pair<std::string, std::vector<uint64_t>>> renames;
  std::vector<std::pair<std::string, std::vector<uint64_t>>> zeros;
};

// The bytes of one value of GGUF type `type` (arrays of scalars and strings only).
inline std::string encode_gguf_value(uint32_t type, uint32_t element_type, const nlohmann::json& v) {
  switch (type) {
    case 0: case 1: return le(static_cast<uint64_t>(v.get<int64_t>()), 1);
    case 2: case 3: return le(static_cast<uint64_t>(v.get<int64_t>()), 2);
    case 4: case 5: return le(static_cast<uint64_t>(v.get<int64_t>()), 4);
    case 10: case 11: return le(static_cast<uint64_t>(v.get<int64_t>()), 8);
    case 6: return f32_bytes(v.get<float>());
    case 12: return f64_bytes(v.get<double>());
    case 7: return le(v.get<bool>() ? 1 : 0, 1);
    case 8: return gguf_str(v.get<std::string>());
    case 9: {
      if (element_type == 9) fail("gguf_rewrite", "nested arrays are not rewritten");
      std::string out = GgufWriter::array_of(element_type, v.size());
      for (const auto& e : v) out += encode_gguf_value(element_type, 0, e);
      return out;
    }
    default: fail("gguf_rewrite", "unknown value type " + std::to_string(type));
  }
}

inline std::string rewrite_gguf(const model::GgufFile& g, const GgufEdits& edits) {
  GgufWriter w;
  auto add = [&w](const std::string& key, const GgufValue& v) {
    w.kv(key, v.type, encode_gguf_value(v.type, v.element_type, v.value));
  };
  for (const model::GgufKv& kv : g.metadata()) {
    if (kv.key == "general.alignment") continue;  // the writer aligns to its default
    const auto e = edits.keys.find(kv.key);
    if (e == edits.keys.end())
      add(kv.key, {static_cast<uint32_t>(kv.type), static_cast<uint32_t>(kv.element_type), g.get_json(kv.key)});
    else if (e->second)
      add(kv.key, *e->second);
  }
  for (const auto& [key, v] : edits.keys)
    if (v && !g.has(key)) add(key, *v);
  for (const model::GgufTensor& t : g.tensors()) {
    std::vector<uint64_t> dims(t.dims.begin(), t.dims.end());
    std::string data(reinterpret_cast<const char*>(t.data), t.size_bytes);
    uint32_t type = static_cast<uint32_t>(t.type);
    if (edits.to_f32 && t.type != kernels::GgmlType::F32) {
      std::vector<float> f(static_cast<size_t>(t.numel()));
      for (int64_t r = 0; r < t.rows(); ++r)
        kernels::dequantize_row(t.type, t.data + static_cast<size_t>(r) * t.row_bytes(), t.row_length(), f.data() + r * t.row_length());
      data.assign(reinterpret_cast<const char*>(f.data()), f.size() * sizeof(float));
      type = static_cast<uint32_t>(kernels::GgmlType::F32);
    }
    if (const auto e = edits.tensors.find(t.name); e != edits.tensors.end()) {
      if (!e->second) continue;
      dims = *e->second;
      uint64_t rows = 1;
      for (size_t i = 1; i < dims.size(); ++i) rows *= dims[i];
      const auto row = static_cast<uint64_t>(kernels::ggml_row_bytes(t.type, static_cast<int64_t>(dims.at(0))));
      data.resize(static_cast<size_t>(row * rows), '\0');
    }
    std::string name = t.name;
    if (const auto r = edits.renames.find(t.name); r != edits.renames.end()) std::tie(name, dims) = r->second;
    w.tensor(name, dims, type, data);
  }
  for (const auto& [name, dims] : edits.zeros) {
    uint64_t n = 1;
    for (uint64_t d : dims) n *= d;
    w.tensor(name, dims, static_cast<uint32_t>(kernels::GgmlType::F32), std::string(static_cast<size_t>(n * 4), '\0'));
  }
  for (const auto& [name, source] : edits.copies) {
    const model::GgufTensor& t = g.tensor(source);
    w.tensor(name, std::vector<uint64_t>(t.dims.begin(), t.dims.end()), static_cast<uint32_t>(t.type),
             std::string(reinterpret_cast<const char*>(t.data), t.size_bytes));
  }
  return w.bytes();
}

}  // namespace ember::test
