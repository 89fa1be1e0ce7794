#pragma once
// A minimal GGUF writer for tests: metadata of any type (raw little-endian bytes) and tensors placed
// at the alignment. (Files go to a fuzz::TempDir, the temporary folder of fuzz/fuzz_util.h.)
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_util.h"

namespace ember::test {

using TempFolder = fuzz::TempDir;

// `n` little-endian bytes of v.
inline std::string le(uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xFF);
  return s;
}
inline std::string gguf_str(const std::string& s) { return le(s.size(), 8) + s; }
inline std::string f32_bytes(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return le(u, 4);
}
inline std::string f64_bytes(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return le(u, 8);
}

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  // A value of GGUF type `type` whose encoding is `value`.
  void kv(const std::string& key, uint32_t type, const std::string& value) {
    kvs_ += gguf_str(key) + le(type, 4) + value;
    ++n_kv_;
  }
  void kv_string(const std::string& key, const std::string& v) { kv(key, 8, gguf_str(v)); }
  void kv_u32(const std::string& key, uint32_t v) { kv(key, 4, le(v, 4)); }
  void kv_bool(const std::string& key, bool v) { kv(key, 7, le(v ? 1 : 0, 1)); }
  void kv_strings(const std::string& key, const std::vector<std::string>& v) {
    std::string body = le(8, 4) + le(v.size(), 8);
    for (const auto& s : v) body += gguf_str(s);
    kv(key, 9, body);
  }
  // An array header (element type, count) for hand-built array values.
  static std::string array_of(uint32_t element_type, uint64_t count) { return le(element_type, 4) + le(count, 8); }

  void tensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type, const std::string& data) {
    tensors_.push_back({name, dims, type, data});
  }

  std::string bytes(uint64_t alignment = 32) const {
    std::string out = "GGUF" + le(version_, 4) + le(tensors_.size(), 8) + le(n_kv_, 8) + kvs_;
    std::string data;
    for (const auto& t : tensors_) {
      while (data.size() % alignment) data += '\0';
      out += gguf_str(t.name) + le(t.dims.size(), 4);
      for (uint64_t d : t.dims) out += le(d, 8);
      out += le(t.type, 4) + le(data.size(), 8);
      data += t.data;
    }
    while (out.size() % alignment) out += '\0';
    return out + data;
  }

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    std::string data;
  };
  uint32_t version_;
  std::string kvs_;
  uint64_t n_kv_ = 0;
  std::vector<Tensor> tensors_;
};

}  // namespace ember::test
