#pragma once
// GGUF files (llama.cpp's model format, versions 2 and 3, little-endian), mapped read-only: typed
// metadata, tensor infos and their bytes. The whole structure is validated when the file opens;
// every error is an ember::Error naming the file, the byte offset and the key or tensor at fault.
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/mapped_file.h"
#include "kernels/gguf_quants.h"

namespace ember::model {

enum class GgufValueType : uint32_t {
  UInt8 = 0,
  Int8 = 1,
  UInt16 = 2,
  Int16 = 3,
  UInt32 = 4,
  Int32 = 5,
  Float32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  UInt64 = 10,
  Int64 = 11,
  Float64 = 12,
};
const char* gguf_value_type_name(GgufValueType t);  // "uint32", "string", ...

// Where one metadata value lies in the file; values are decoded on request.
struct GgufKv {
  std::string key;
  GgufValueType type = GgufValueType::UInt8;
  GgufValueType element_type = GgufValueType::UInt8;  // arrays only
  uint64_t count = 0;   // arrays only: number of elements
  uint64_t offset = 0;  // file offset of the value (for an array: of its first element)
};

// One tensor. Its rows are Hugging Face's rows with the same bytes, except that files of arch llama
// store attn_q / attn_k with the rows of each head permuted (GGUF row 2i + j of a head is Hugging
// Face row j * head_dim/2 + i; llama.cpp rotates adjacent pairs); qwen2 / qwen3 keep the order.
struct GgufTensor {
  std::string name;
  kernels::GgmlType type = kernels::GgmlType::F32;
  // GGUF order, innermost first: dims[0] is the length of a (contiguous) row.
  std::vector<int64_t> dims;
  // Hugging Face / row-major order, dims reversed: a matrix is [out, in] = [rows, row length].
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // inside the mapping
  uint64_t offset = 0;            // absolute file offset of data
  size_t size_bytes = 0;

  int64_t numel() const;
  int64_t row_length() const { return dims.empty() ? 1 : dims[0]; }
  int64_t rows() const;  // numel / row_length (1 for a scalar)
  size_t row_bytes() const;  // bytes of one row
};

// Movable, not copyable; tensor data pointers stay valid when the file is moved.
class GgufFile {
 public:
  static constexpr uint64_t kDefaultAlignment = 32;
  static constexpr int kMaxDims = 4;         // as ggml (GGML_MAX_DIMS)
  static constexpr int kMaxArrayDepth = 16;  // arrays of arrays nested deeper are refused

  explicit GgufFile(const std::string& path);  // throws ember::Error

  const std::string& path() const { return file_.path(); }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the tensor data section
  size_t file_size() const { return file_.size(); }
  // Whether [p, p + bytes) lies in this file's mapping (a tensor used in place).
  bool maps(const void* p, size_t bytes) const {
    const auto* b = static_cast<const uint8_t*>(p);
    return b >= file_.data() && bytes <= file_.size() && b - file_.data() <= static_cast<std::ptrdiff_t>(file_.size() - bytes);
  }

  // Metadata, in file order.
  const std::vector<GgufKv>& metadata() const { return kvs_; }
  const GgufKv* find(std::string_view key) const;  // nullptr when absent
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed accessors: each throws ember::Error naming the file and key when the key is missing or
  // holds another type. get_int takes any integer type (and fails if the value does not fit an
  // int64); get_float takes float32 or float64.
  std::string get_string(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  std::vector<double> get_float_array(std::string_view key) const;
  // The same with a fallback for an absent key (a present key of the wrong type still throws).
  std::string get_string_or(std::string_view key, const std::string& fallback) const;
  int64_t get_int_or(std::string_view key, int64_t fallback) const;
  double get_float_or(std::string_view key, double fallback) const;
  bool get_bool_or(std::string_view key, bool fallback) const;
  // Any value (nested arrays too) as JSON: numbers, booleans, strings and arrays.
  nlohmann::json get_json(std::string_view key) const;

  // Tensors, in file order.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;  // nullptr when absent
  const GgufTensor& tensor(std::string_view name) const;       // throws naming the tensor

  // Once the weights have been copied: see MappedFile::release_pages.
  void release_pages() const { file_.release_pages(); }

 private:
  const GgufKv& require(std::string_view key, const char* wanted) const;
  [[noreturn]] void wrong_type(const GgufKv& kv, const char* wanted) const;
  int64_t int_at(GgufValueType t, uint64_t offset, const std::string& key) const;
  nlohmann::json json_at(GgufValueType t, uint64_t& offset, uint64_t count, GgufValueType element) const;

  MappedFile file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufKv> kvs_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace ember::model
