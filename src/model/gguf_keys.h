#pragma once
// A GGUF file's {arch}.<name> metadata keys, read with the file and key named in every error: the
// helpers gguf_config.cc and the per-arch readers beside it share.
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/gguf.h"

namespace ember::model {

struct ArchKeys {
  const GgufFile& g;
  std::string arch;
  // Blocks after the decoder's (llama.cpp's multi-token-prediction blocks, {arch}.nextn_predict_layers):
  // per-layer arrays may hold entries for them too, which are not read.
  int64_t trailing_blocks = 0;

  std::string key(const char* name) const { return arch + "." + name; }
  int64_t positive(const char* name) const {
    const int64_t v = g.get_int(key(name));
    if (v <= 0) fail(g.path(), "metadata " + key(name) + " must be positive (got " + std::to_string(v) + ")");
    return v;
  }
  int64_t positive_or(const char* name, int64_t dflt) const { return g.has(key(name)) ? positive(name) : dflt; }
  bool is_array(const char* name) const {
    const GgufKv* kv = g.find(key(name));
    return kv != nullptr && kv->type == GgufValueType::Array;
  }
  // One positive value per layer: an array of `layers` entries (llama.cpp's per-layer form), or one
  // value for every layer; the key is required.
  std::vector<int64_t> per_layer(const char* name, int64_t layers) const {
    if (!is_array(name)) return std::vector<int64_t>(static_cast<size_t>(layers), positive(name));
    return array(name, layers);
  }
  // The same, `dflt` on every layer when the key is absent.
  std::vector<int64_t> per_layer_or(const char* name, int64_t layers, int64_t dflt) const {
    return g.has(key(name)) ? per_layer(name, layers) : std::vector<int64_t>(static_cast<size_t>(layers), dflt);
  }

 private:
  std::vector<int64_t> array(const char* name, int64_t layers) const {
    std::vector<int64_t> v = g.get_int_array(key(name));
    if (static_cast<int64_t>(v.size()) != layers && static_cast<int64_t>(v.size()) != layers + trailing_blocks)
      fail(g.path(), "metadata " + key(name) + " has " + std::to_string(v.size()) + " entries for " +
                         std::to_string(layers) + " layers");
    v.resize(static_cast<size_t>(layers));
    for (int64_t x : v)
      if (x <= 0) fail(g.path(), "metadata " + key(name) + " must hold positive values (got " + std::to_string(x) + ")");
    return v;
  }
};

}  // namespace ember::model
