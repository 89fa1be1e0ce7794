#pragma once
// Safetensors checkpoints: a single file or shards listed in model.safetensors.index.json, mapped
// read-only. Headers are validated before any tensor is used.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/mapped_file.h"

namespace ember::model {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // inside the mapping
  size_t size_bytes = 0;
  std::string file;            // for error messages
  // U8: raw bytes (gpt-oss's MXFP4 blocks and scales), read only by code that knows their format;
  // dtype is then meaningless, and binding it as a matrix or a vector is an error.
  bool u8 = false;

  int64_t numel() const;
  size_t element_bytes() const;  // 1 for U8, else dtype_size(dtype)
};

// "[2048, 128]": a shape as error messages write it.
std::string shape_string(const std::vector<int64_t>& shape);

// One mapped .safetensors file.
class SafetensorsFile {
 public:
  static constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // as the reference implementation

  explicit SafetensorsFile(const std::string& path);  // throws ember::Error naming the file and tensor
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  void release_pages() const { file_.release_pages(); }

 private:
  MappedFile file_;
  std::map<std::string, TensorInfo> tensors_;
};

// All tensors of a model folder.
class Checkpoint {
 public:
  static Checkpoint open(const std::string& model_dir);
  const TensorInfo* find(const std::string& name) const;
  std::vector<std::string> names() const;  // every tensor, sorted
  // The tensor `name` with exactly `shape`; throws naming the tensor if it is absent or mis-shaped.
  const TensorInfo& require(const std::string& name, const std::vector<int64_t>& shape) const;
  size_t total_bytes() const;
  // Once the weights have been copied (packed, quantized): see MappedFile::release_pages.
  void release_pages() const;

 private:
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> index_;
};

}  // namespace ember::model
