#include "model/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.h"

namespace ember::model {

namespace {

using nlohmann::json;


}  // namespace

std::string shape_string(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t TensorInfo::element_bytes() const { return u8 ? 1 : dtype_size(dtype); }

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  const size_t size = file_.size();
  if (size < 8) fail(path, "truncated safetensors file: " + std::to_string(size) + " bytes, no header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file_.data()[i];  // little-endian u64
  if (header_len > kMaxHeaderBytes)
    fail(path, "safetensors header length " + std::to_string(header_len) + " exceeds the limit of " +
                   std::to_string(kMaxHeaderBytes) + " bytes");
  if (header_len > size - 8)
    fail(path, "safetensors header length " + std::to_string(header_len) + " runs past the end of the file (" +
                   std::to_string(size) + " bytes)");
  json header;
  try {
    header = json::parse(file_.data() + 8, file_.data() + 8 + header_len);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    fail(path, std::string("safetensors header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail(path, "safetensors header is not a JSON object");
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;

  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string where = path + ": tensor \"" + it.key() + "\"";
    const json& t = it.value();
    if (!t.is_object()) fail(where, "entry is not an object");
    TensorInfo info;
    info.name = it.key();
    info.file = path;
    auto dt = t.find("dtype");
    if (dt == t.end() || !dt->is_string()) fail(where, "missing dtype");
    const auto dtype = parse_dtype(dt->get<std::string>());
    info.u8 = !dtype && dt->get<std::string>() == "U8";
    if (!dtype && !info.u8) fail(where, "unsupported dtype " + dt->dump() + " (supported: F32, F16, BF16, U8)");
    if (dtype) info.dtype = *dtype;
    auto sh = t.find("shape");
    if (sh == t.end() || !sh->is_array()) fail(where, "missing shape");
    uint64_t numel = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned()) fail(where, "shape entries must be non-negative integers");
      const uint64_t v = d.get<uint64_t>();
      if (v != 0 && numel > std::numeric_limits<uint64_t>::max() / 16 / v) fail(where, "shape is too large");
      numel *= v;
      info.shape.push_back(static_cast<int64_t>(v));
    }
    auto off = t.find("data_offsets");
    if (off == t.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      fail(where, "data_offsets must be two non-negative integers");
    const uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
    if (end < begin) fail(where, "data_offsets end before they begin");
    if (end > data_size)
      fail(where, "byte range [" + std::to_string(begin) + ", " + std::to_string(end) + ") lies outside the file's " +
                      std::to_string(data_size) + " data bytes");
    const uint64_t expected = numel * info.element_bytes();
    if (end - begin != expected)
      fail(where, "shape " + shape_string(info.shape) + " of " + (info.u8 ? "U8" : dtype_name(info.dtype)) + " needs " +
                      std::to_string(expected) + " bytes but the byte range holds " + std::to_string(end - begin));
    info.data = file_.data() + data_start + begin;
    info.size_bytes = end - begin;
    ranges.emplace_back(begin, end);
    tensors_.emplace(info.name, std::move(info));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) {
      std::string a, b;
      for (const auto& [name, info] : tensors_) {
        const uint64_t off = static_cast<uint64_t>(static_cast<const uint8_t*>(info.data) - (file_.data() + data_start));
        if (off == ranges[i - 1].first && a.empty()) a = name;
        else if (off == ranges[i].first) b = name;
      }
      fail(path, "tensors \"" + a + "\" and \"" + b + "\" have overlapping byte ranges");
    }
  }
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [name, info] : index_) out.push_back(name);
  return out;
}

Checkpoint Checkpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  Checkpoint cp;
  const std::string index_path = dir + "/model.safetensors.index.json";
  std::vector<std::string> shard_names;
  json weight_map;
  if (fs::exists(index_path)) {
    json index;
    try {
      index = json::parse(read_file(index_path));
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
      fail(index_path, std::string("invalid JSON: ") + e.what());
    }
    auto wm = index.find("weight_map");
    if (!index.is_object() || wm == index.end() || !wm->is_object()) fail(index_path, "missing \"weight_map\" object");
    weight_map = *wm;
    std::set<std::string> seen;
    for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
      if (!it->is_string()) fail(index_path, "weight_map entry \"" + it.key() + "\" is not a file name");
      const std::string shard = *it;
      if (shard.find('/') != std::string::npos || shard == "..")
        fail(index_path, "weight_map entry \"" + it.key() + "\" names a file outside the folder: " + shard);
      if (seen.insert(shard).second) shard_names.push_back(shard);
    }
  } else if (fs::exists(dir + "/model.safetensors")) {
    shard_names.push_back("model.safetensors");
  } else {
    fail(dir, "no model.safetensors or model.safetensors.index.json in the model folder");
  }
  for (const auto& name : shard_names) {
    auto f = std::make_shared<SafetensorsFile>(dir + "/" + name);
    for (const auto& [tname, info] : f->tensors()) {
      if (!weight_map.is_null()) {
        auto it = weight_map.find(tname);
        if (it == weight_map.end() || *it != name) continue;  // the index decides which shard owns it
      }
      if (!cp.index_.emplace(tname, &info).second) fail(info.file, "tensor \"" + tname + "\" appears twice");
    }
    cp.files_.push_back(std::move(f));
  }
  if (!weight_map.is_null()) {
    for (auto it = weight_map.begin(); it != weight_map.end(); ++it)
      if (!cp.index_.count(it.key()))
        fail(dir + "/" + it->get<std::string>(), "tensor \"" + it.key() + "\" listed in the index is missing");
  }
  return cp;
}

const TensorInfo* Checkpoint::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

const TensorInfo& Checkpoint::require(const std::string& name, const std::vector<int64_t>& shape) const {
  const TensorInfo* t = find(name);
  if (t == nullptr) fail("model weights", "missing tensor \"" + name + "\" with shape " + shape_string(shape));
  if (t->shape != shape)
    fail(t->file, "tensor \"" + name + "\" has shape " + shape_string(t->shape) + ", expected " + shape_string(shape));
  return *t;
}

void Checkpoint::release_pages() const {
  for (const auto& f : files_) f->release_pages();
}

size_t Checkpoint::total_bytes() const {
  size_t n = 0;
  for (const auto& [name, t] : index_) n += t->size_bytes;
  return n;
}

}  // namespace ember::model
