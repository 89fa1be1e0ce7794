#include "model/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/error.h"

namespace ember::model {

void GgufWriter::kv_strings(const std::string& key, const std::vector<std::string>& v) {
  std::string body = array_of(8, v.size());
  for (const auto& s : v) body += gguf_str(s);
  kv(key, 9, body);
}

void GgufWriter::kv_f32s(const std::string& key, const std::vector<float>& v) {
  std::string body = array_of(6, v.size());
  for (float f : v) body += f32_bytes(f);
  kv(key, 9, body);
}

void GgufWriter::kv_i32s(const std::string& key, const std::vector<int32_t>& v) {
  std::string body = array_of(5, v.size());
  for (int32_t x : v) body += le(static_cast<uint32_t>(x), 4);
  kv(key, 9, body);
}

void GgufWriter::kv_bools(const std::string& key, const std::vector<bool>& v) {
  std::string body = array_of(7, v.size());
  for (bool b : v) body += le(b ? 1 : 0, 1);
  kv(key, 9, body);
}

std::string GgufWriter::header(uint64_t alignment) const {
  std::string out = "GGUF" + le(version_, 4) + le(tensors_.size(), 8) + le(n_kv_, 8) + kvs_;
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    offset += padding(offset, alignment).size();
    out += gguf_str(t.name) + le(t.dims.size(), 4);
    for (uint64_t d : t.dims) out += le(d, 8);
    out += le(t.type, 4) + le(offset, 8);
    offset += t.size;
  }
  return out + padding(out.size(), alignment);
}

std::string GgufWriter::bytes(uint64_t alignment) const {
  std::string out = header(alignment), data;
  for (const Tensor& t : tensors_) data += padding(data.size(), alignment) + t.make();
  return out + data;
}

void GgufWriter::write(const std::string& path, const Progress& progress, uint64_t alignment) const {
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) fail(path, std::string("cannot write the output file (") + std::strerror(errno) + ")");
  std::error_code ignored;
  try {
    auto put = [&](const std::string& s) {
      if (!out.write(s.data(), static_cast<std::streamsize>(s.size())))
        fail(path, std::string("write failed (") + std::strerror(errno) + ")");
    };
    put(header(alignment));
    uint64_t offset = 0;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const Tensor& t = tensors_[i];
      if (progress) progress(i, tensors_.size(), t.name);
      const std::string pad = padding(offset, alignment);
      const std::string data = t.make();
      if (data.size() != t.size)
        fail(path, "tensor " + t.name + ": " + std::to_string(data.size()) + " bytes made for " + std::to_string(t.size) + " declared");
      put(pad);
      put(data);
      offset += pad.size() + data.size();
    }
    out.close();
    if (!out) fail(path, std::string("write failed (") + std::strerror(errno) + ")");
    std::filesystem::rename(tmp, path);
  } catch (const std::filesystem::filesystem_error& e) {
    std::filesystem::remove(tmp, ignored);
    fail(path, std::string("cannot rename the finished file into place (") + e.code().message() + ")");
  } catch (...) {
    out.close();
    std::filesystem::remove(tmp, ignored);
    throw;
  }
}

}  // namespace ember::model
