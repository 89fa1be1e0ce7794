#include "model/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "base/error.h"

namespace ember::model {

namespace {

using VT = GgufValueType;

bool known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(VT::Float64); }

// Bytes of a scalar value type; 0 for string and array (variable length).
uint64_t scalar_size(VT t) {
  switch (t) {
    case VT::UInt8:
    case VT::Int8:
    case VT::Bool: return 1;
    case VT::UInt16:
    case VT::Int16: return 2;
    case VT::UInt32:
    case VT::Int32:
    case VT::Float32: return 4;
    case VT::UInt64:
    case VT::Int64:
    case VT::Float64: return 8;
    case VT::String:
    case VT::Array: return 0;
  }
  return 0;
}

// The fewest bytes one element of type t takes: the bound that keeps a crafted count from asking
// for more elements than the rest of the file could hold.
uint64_t min_size(VT t) {
  if (t == VT::String) return 8;       // length
  if (t == VT::Array) return 4 + 8;    // element type, count
  return scalar_size(t);
}

bool is_integer(VT t) {
  return t == VT::UInt8 || t == VT::Int8 || t == VT::UInt16 || t == VT::Int16 || t == VT::UInt32 ||
         t == VT::Int32 || t == VT::UInt64 || t == VT::Int64;
}
bool is_float(VT t) { return t == VT::Float32 || t == VT::Float64; }

std::string in_quotes(std::string_view s) { return "\"" + std::string(s) + "\""; }

// Little-endian reads over the mapping; every read checks the bytes exist and names what it reads.
class GgufCursor {
 public:
  GgufCursor(const uint8_t* data, uint64_t size, const std::string& path, uint64_t pos = 0)
      : data_(data), size_(size), path_(path), pos_(pos) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  [[noreturn]] void error(uint64_t at, const std::string& what) const {
    fail(path_, "offset " + std::to_string(at) + ": " + what);
  }

  const uint8_t* take(uint64_t n, const std::string& what) {
    if (n > remaining())
      error(pos_, "truncated file: " + what + " needs " + std::to_string(n) + " bytes, only " +
                      std::to_string(remaining()) + " left");
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  uint64_t uint(int bytes, const std::string& what) {
    const uint8_t* p = take(static_cast<uint64_t>(bytes), what);
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
  }
  uint32_t u32(const std::string& what) { return static_cast<uint32_t>(uint(4, what)); }
  uint64_t u64(const std::string& what) { return uint(8, what); }
  std::string_view str(const std::string& what) {
    const uint64_t at = pos_;
    const uint64_t len = u64(what + " length");
    if (len > remaining())
      error(at, what + ": string length " + std::to_string(len) + " runs past the end of the file (" +
                    std::to_string(remaining()) + " bytes left)");
    return {reinterpret_cast<const char*>(take(len, what)), static_cast<size_t>(len)};
  }
  VT value_type(const std::string& what) {
    const uint64_t at = pos_;
    const uint32_t t = u32(what + " type");
    if (!known_value_type(t)) error(at, what + ": unknown metadata value type " + std::to_string(t));
    return static_cast<VT>(t);
  }
  // An array's element type and count, the count checked against the bytes left.
  std::pair<VT, uint64_t> array_header(const std::string& what) {
    const VT elem = value_type(what + " element");
    const uint64_t at = pos_;
    const uint64_t count = u64(what + " element count");
    if (count > remaining() / min_size(elem))
      error(at, what + ": array of " + std::to_string(count) + " " + gguf_value_type_name(elem) +
                    " values cannot fit in the " + std::to_string(remaining()) + " bytes left");
    return {elem, count};
  }

  // Steps over one value of type t, checking its structure (booleans are 0 or 1).
  void skip(VT t, const std::string& what, int depth) {
    if (t == VT::String) {
      str(what);
    } else if (t == VT::Array) {
      if (depth >= GgufFile::kMaxArrayDepth)
        error(pos_, what + ": arrays nested deeper than " + std::to_string(GgufFile::kMaxArrayDepth) + " levels");
      const auto [elem, count] = array_header(what);
      skip_elements(elem, count, what, depth + 1);
    } else if (t == VT::Bool) {
      const uint64_t at = pos_;
      const uint8_t b = *take(1, what);
      if (b > 1) error(at, what + ": boolean byte is " + std::to_string(b) + ", not 0 or 1");
    } else {
      take(scalar_size(t), what);
    }
  }
  void skip_elements(VT elem, uint64_t count, const std::string& what, int depth) {
    if (elem != VT::String && elem != VT::Array && elem != VT::Bool) {
      take(count * scalar_size(elem), what);  // count was checked against the bytes left
      return;
    }
    for (uint64_t i = 0; i < count; ++i) skip(elem, what + "[" + std::to_string(i) + "]", depth);
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  const std::string& path_;
  uint64_t pos_;
};

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

}  // namespace

const char* gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case VT::UInt8: return "uint8";
    case VT::Int8: return "int8";
    case VT::UInt16: return "uint16";
    case VT::Int16: return "int16";
    case VT::UInt32: return "uint32";
    case VT::Int32: return "int32";
    case VT::Float32: return "float32";
    case VT::Bool: return "bool";
    case VT::String: return "string";
    case VT::Array: return "array";
    case VT::UInt64: return "uint64";
    case VT::Int64: return "int64";
    case VT::Float64: return "float64";
  }
  return "?";
}

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // the reader checked the product fits
  return n;
}

int64_t GgufTensor::rows() const {
  const int64_t len = row_length();
  return len == 0 ? 0 : numel() / len;
}

size_t GgufTensor::row_bytes() const {
  return static_cast<size_t>(kernels::ggml_row_bytes(type, row_length()));
}

GgufFile::GgufFile(const std::string& path) : file_(path) {
  const std::string& p = file_.path();
  GgufCursor r(file_.data(), file_.size(), p);
  const uint8_t* magic = r.take(4, "magic \"GGUF\"");
  if (std::memcmp(magic, "GGUF", 4) != 0) r.error(0, "not a GGUF file (the first 4 bytes are not \"GGUF\")");
  version_ = r.u32("version");
  if (version_ == 1) r.error(4, "GGUF version 1 is not supported (only versions 2 and 3)");
  if (version_ != 2 && version_ != 3) {
    if ((version_ & 0xFFFFu) == 0) r.error(4, "big-endian GGUF files are not supported");
    r.error(4, "unsupported GGUF version " + std::to_string(version_) + " (supported: 2, 3)");
  }
  const uint64_t n_tensors = r.u64("tensor count");
  const uint64_t n_kv = r.u64("metadata count");
  // Key length, value type and at least one byte of value.
  if (n_kv > r.remaining() / (8 + 4 + 1))
    r.error(16, "metadata count " + std::to_string(n_kv) + " cannot fit in the " + std::to_string(r.remaining()) +
                    " bytes left");

  kvs_.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    const uint64_t at = r.pos();
    GgufKv kv;
    kv.key = std::string(r.str("key of metadata entry " + std::to_string(i)));
    const std::string what = "key " + in_quotes(kv.key);
    if (kv_index_.count(kv.key)) r.error(at, what + " appears twice");
    kv.type = r.value_type(what + " value");
    if (kv.type == VT::Array) {
      const auto [elem, count] = r.array_header(what);
      kv.element_type = elem;
      kv.count = count;
      kv.offset = r.pos();
      r.skip_elements(elem, count, what, 1);
    } else {
      kv.offset = r.pos();
      r.skip(kv.type, what, 0);
    }
    kv_index_.emplace(kv.key, kvs_.size());
    kvs_.push_back(std::move(kv));
  }

  if (const GgufKv* a = find("general.alignment")) {
    if (a->type != VT::UInt32) wrong_type(*a, "uint32");
    alignment_ = static_cast<uint64_t>(get_int("general.alignment"));
    if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0)
      r.error(a->offset, "key \"general.alignment\": " + std::to_string(alignment_) + " is not a power of two");
  }

  // Name length, dimension count, type and offset.
  if (n_tensors > r.remaining() / (8 + 4 + 4 + 8))
    r.error(r.pos(), "tensor count " + std::to_string(n_tensors) + " cannot fit in the " +
                         std::to_string(r.remaining()) + " bytes left");
  tensors_.reserve(static_cast<size_t>(n_tensors));
  std::vector<uint64_t> rel_offsets;
  rel_offsets.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const uint64_t at = r.pos();
    GgufTensor t;
    t.name = std::string(r.str("name of tensor " + std::to_string(i)));
    const std::string what = "tensor " + in_quotes(t.name);
    if (tensor_index_.count(t.name)) r.error(at, what + " appears twice");
    const uint64_t dims_at = r.pos();
    const uint32_t n_dims = r.u32(what + " dimension count");
    if (n_dims > static_cast<uint32_t>(kMaxDims))
      r.error(dims_at, what + " has " + std::to_string(n_dims) + " dimensions (at most " + std::to_string(kMaxDims) +
                           ")");
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t d_at = r.pos();
      const uint64_t v = r.u64(what + " dimension " + std::to_string(d));
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (v != 0 && numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / v))
        r.error(d_at, what + ": dimension " + std::to_string(v) + " makes the tensor too large");
      numel *= v;
      t.dims.push_back(static_cast<int64_t>(v));
    }
    t.shape.assign(t.dims.rbegin(), t.dims.rend());
    const uint64_t type_at = r.pos();
    const uint32_t type_id = r.u32(what + " type");
    const auto info = kernels::ggml_type_info(type_id);
    if (!info) r.error(type_at, what + ": unknown ggml type id " + std::to_string(type_id));
    t.type = info->type;
    const auto block = static_cast<uint64_t>(info->block_size), block_bytes = static_cast<uint64_t>(info->block_bytes);
    if (static_cast<uint64_t>(t.row_length()) % block != 0)
      r.error(type_at, what + ": row length " + std::to_string(t.row_length()) + " is not a multiple of the " +
                           info->name + " block size " + std::to_string(block));
    if (numel / block > std::numeric_limits<uint64_t>::max() / block_bytes) r.error(type_at, what + " is too large");
    // A tensor with a zero dimension holds no bytes but still has a row length, which row_bytes()
    // multiplies out: that product must fit too.
    const auto max_blocks = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / block_bytes;
    if (static_cast<uint64_t>(t.row_length()) / block > max_blocks)
      r.error(type_at, what + ": a row of " + std::to_string(t.row_length()) + " elements is too large");
    const uint64_t bytes = numel / block * block_bytes;
    const uint64_t off_at = r.pos();
    const uint64_t rel = r.u64(what + " data offset");
    if (rel % alignment_ != 0)
      r.error(off_at, what + ": data offset " + std::to_string(rel) + " is not a multiple of the alignment " +
                          std::to_string(alignment_));
    t.size_bytes = static_cast<size_t>(bytes);
    rel_offsets.push_back(rel);
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t end_of_infos = r.pos();
  const uint64_t pad = (alignment_ - end_of_infos % alignment_) % alignment_;
  data_offset_ = end_of_infos + pad;
  const uint64_t size = file_.size();
  if (!tensors_.empty() && data_offset_ > size)
    r.error(end_of_infos, "the tensor data section (at offset " + std::to_string(data_offset_) +
                              ") starts past the end of the file (" + std::to_string(size) + " bytes)");
  for (size_t i = 0; i < tensors_.size(); ++i) {
    GgufTensor& t = tensors_[i];
    const uint64_t rel = rel_offsets[i];
    const uint64_t room = size - data_offset_;
    if (rel > room || t.size_bytes > room - rel)
      fail(p, "offset " + std::to_string(data_offset_ + rel) + ": tensor " + in_quotes(t.name) + ": " +
                  kernels::ggml_type_name(t.type) + " " + dims_str(t.dims) +
                  " needs bytes [" + std::to_string(data_offset_ + rel) + ", " +
                  std::to_string(data_offset_ + rel + t.size_bytes) + ") but the file has " + std::to_string(size) +
                  " bytes");
    t.offset = data_offset_ + rel;
    t.data = file_.data() + t.offset;
  }
  std::vector<size_t> order(tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const GgufTensor& prev = tensors_[order[i - 1]];
    const GgufTensor& cur = tensors_[order[i]];
    if (cur.offset < prev.offset + prev.size_bytes)
      fail(p, "offset " + std::to_string(cur.offset) + ": tensors " + in_quotes(prev.name) + " and " + in_quotes(cur.name) +
                  " have overlapping bytes");
  }
}

const GgufKv* GgufFile::find(std::string_view key) const {
  const auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second];
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::tensor(std::string_view name) const {
  const GgufTensor* t = find_tensor(name);
  if (t == nullptr) fail(path(), "missing tensor " + in_quotes(name));
  return *t;
}

const GgufKv& GgufFile::require(std::string_view key, const char* wanted) const {
  const GgufKv* kv = find(key);
  if (kv == nullptr) fail(path(), "missing metadata key " + in_quotes(key) + " (" + wanted + ")");
  return *kv;
}

void GgufFile::wrong_type(const GgufKv& kv, const char* wanted) const {
  std::string got = gguf_value_type_name(kv.type);
  if (kv.type == VT::Array) got += std::string(" of ") + gguf_value_type_name(kv.element_type);
  fail(path(), "offset " + std::to_string(kv.offset) + ": key " + in_quotes(kv.key) + " holds " + got + ", expected " +
                   wanted);
}

int64_t GgufFile::int_at(GgufValueType t, uint64_t offset, const std::string& key) const {
  GgufCursor r(file_.data(), file_.size(), path(), offset);
  const auto bytes = static_cast<int>(scalar_size(t));
  const uint64_t raw = r.uint(bytes, "key " + in_quotes(key));
  const bool is_signed = t == VT::Int8 || t == VT::Int16 || t == VT::Int32 || t == VT::Int64;
  if (is_signed) {
    const int shift = 64 - 8 * bytes;  // sign-extend
    return static_cast<int64_t>(raw << shift) >> shift;
  }
  if (raw > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    r.error(offset, "key " + in_quotes(key) + ": " + std::to_string(raw) + " does not fit a signed 64-bit integer");
  return static_cast<int64_t>(raw);
}

std::string GgufFile::get_string(std::string_view key) const {
  const GgufKv& kv = require(key, "string");
  if (kv.type != VT::String) wrong_type(kv, "string");
  GgufCursor r(file_.data(), file_.size(), path(), kv.offset);
  return std::string(r.str("key " + in_quotes(key)));
}

int64_t GgufFile::get_int(std::string_view key) const {
  const GgufKv& kv = require(key, "integer");
  if (!is_integer(kv.type)) wrong_type(kv, "an integer");
  return int_at(kv.type, kv.offset, kv.key);
}

double GgufFile::get_float(std::string_view key) const {
  const GgufKv& kv = require(key, "float");
  if (!is_float(kv.type)) wrong_type(kv, "float32 or float64");
  GgufCursor r(file_.data(), file_.size(), path(), kv.offset);
  if (kv.type == VT::Float32) {
    const auto bits = r.u32(kv.key);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  const uint64_t bits = r.u64(kv.key);
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

bool GgufFile::get_bool(std::string_view key) const {
  const GgufKv& kv = require(key, "bool");
  if (kv.type != VT::Bool) wrong_type(kv, "bool");
  return file_.data()[kv.offset] != 0;
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const GgufKv& kv = require(key, "array of string");
  if (kv.type != VT::Array || kv.element_type != VT::String) wrong_type(kv, "array of string");
  GgufCursor r(file_.data(), file_.size(), path(), kv.offset);
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(kv.count));  // checked against the file size when it opened
  for (uint64_t i = 0; i < kv.count; ++i) out.emplace_back(r.str(kv.key));
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const GgufKv& kv = require(key, "array of integers");
  if (kv.type != VT::Array || !is_integer(kv.element_type)) wrong_type(kv, "array of integers");
  const uint64_t step = scalar_size(kv.element_type);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(kv.count));
  for (uint64_t i = 0; i < kv.count; ++i) out.push_back(int_at(kv.element_type, kv.offset + i * step, kv.key));
  return out;
}

std::vector<double> GgufFile::get_float_array(std::string_view key) const {
  const GgufKv& kv = require(key, "array of floats");
  if (kv.type != VT::Array || !is_float(kv.element_type)) wrong_type(kv, "array of float32 or float64");
  uint64_t offset = kv.offset;
  const nlohmann::json values = json_at(VT::Array, offset, kv.count, kv.element_type);
  std::vector<double> out;
  out.reserve(values.size());
  for (const auto& v : values) out.push_back(v.get<double>());
  return out;
}

std::string GgufFile::get_string_or(std::string_view key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}
int64_t GgufFile::get_int_or(std::string_view key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}
double GgufFile::get_float_or(std::string_view key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}
bool GgufFile::get_bool_or(std::string_view key, bool fallback) const { return has(key) ? get_bool(key) : fallback; }

nlohmann::json GgufFile::get_json(std::string_view key) const {
  const GgufKv& kv = require(key, "any value");
  uint64_t offset = kv.offset;
  return json_at(kv.type, offset, kv.count, kv.element_type);
}

// Decodes the value at `offset` (advancing it); for an array, `offset` is at its first element and
// count / element describe it. The structure was validated when the file opened.
nlohmann::json GgufFile::json_at(GgufValueType t, uint64_t& offset, uint64_t count, GgufValueType element) const {
  if (t == VT::Array) {
    nlohmann::json out = nlohmann::json::array();
    for (uint64_t i = 0; i < count; ++i) {
      if (element == VT::Array) {
        GgufCursor h(file_.data(), file_.size(), path(), offset);
        const auto [elem, n] = h.array_header("nested array");
        offset = h.pos();
        out.push_back(json_at(VT::Array, offset, n, elem));
      } else {
        out.push_back(json_at(element, offset, 0, element));
      }
    }
    return out;
  }
  GgufCursor r(file_.data(), file_.size(), path(), offset);
  nlohmann::json out;
  if (t == VT::String) {
    out = std::string(r.str("string"));
  } else if (t == VT::Bool) {
    out = *r.take(1, "bool") != 0;
  } else if (t == VT::Float32) {
    const uint32_t bits = r.u32("float32");
    float f;
    std::memcpy(&f, &bits, 4);
    out = f;
  } else if (t == VT::Float64) {
    const uint64_t bits = r.u64("float64");
    double d;
    std::memcpy(&d, &bits, 8);
    out = d;
  } else if (t == VT::UInt64) {
    out = r.u64("uint64");  // may exceed int64
  } else {
    out = int_at(t, offset, "value");
    r.take(scalar_size(t), "value");
  }
  offset = r.pos();
  return out;
}

}  // namespace ember::model
