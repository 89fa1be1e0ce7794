#pragma once
// Writes GGUF files (version 3 by default, little-endian, the layout model/gguf.h reads): typed
// metadata in the order given and tensors placed at the alignment. A tensor's bytes are given at once
// or made on demand while the file is written, so that a model is never held whole in memory. write()
// goes to a temporary name beside the target and renames it at the end: a failure leaves no file.
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace ember::model {

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
  // Called before each tensor is written: its index (from 0), the count and its name.
  using Progress = std::function<void(size_t index, size_t count, const std::string& name)>;
  // Makes a tensor's bytes when the file is written.
  using Producer = std::function<std::string()>;

  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  // A value of GGUF type `type` (model::GgufValueType's numbering) whose encoding is `value`.
  void kv(const std::string& key, uint32_t type, const std::string& value) {
    kvs_ += gguf_str(key) + le(type, 4) + value;
    ++n_kv_;
  }
  void kv_string(const std::string& key, const std::string& v) { kv(key, 8, gguf_str(v)); }
  void kv_u32(const std::string& key, uint32_t v) { kv(key, 4, le(v, 4)); }
  void kv_i32(const std::string& key, int32_t v) { kv(key, 5, le(static_cast<uint32_t>(v), 4)); }
  void kv_f32(const std::string& key, float v) { kv(key, 6, f32_bytes(v)); }
  void kv_bool(const std::string& key, bool v) { kv(key, 7, le(v ? 1 : 0, 1)); }
  void kv_strings(const std::string& key, const std::vector<std::string>& v);
  void kv_f32s(const std::string& key, const std::vector<float>& v);
  void kv_i32s(const std::string& key, const std::vector<int32_t>& v);
  void kv_bools(const std::string& key, const std::vector<bool>& v);
  // An array header (element type, count) for hand-built array values.
  static std::string array_of(uint32_t element_type, uint64_t count) { return le(element_type, 4) + le(count, 8); }

  // dims innermost first; `type` a ggml type id (kernels::GgmlType).
  void tensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type, const std::string& data) {
    tensors_.push_back({name, dims, type, data.size(), [data] { return data; }});
  }
  // A tensor of `size` bytes that `make` produces while the file is written (write() checks the size).
  void tensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type, uint64_t size, Producer make) {
    tensors_.push_back({name, dims, type, size, std::move(make)});
  }
  size_t tensor_count() const { return tensors_.size(); }

  // The whole file in memory.
  std::string bytes(uint64_t alignment = 32) const;
  // The file at `path`, through `path`.tmp renamed at the end; throws ember::Error naming the path
  // (and the tensor, where its producer fails) and removes the temporary file.
  void write(const std::string& path, const Progress& progress = {}, uint64_t alignment = 32) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    uint64_t size;
    Producer make;
  };
  std::string header(uint64_t alignment) const;  // up to the data section, padded
  static std::string padding(uint64_t size, uint64_t alignment) {
    return std::string((alignment - size % alignment) % alignment, '\0');
  }
  uint32_t version_;
  std::string kvs_;
  uint64_t n_kv_ = 0;
  std::vector<Tensor> tensors_;
};

}  // namespace ember::model
