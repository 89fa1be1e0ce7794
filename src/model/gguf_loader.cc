// Model::load_gguf: a GGUF file's tensors made into what bind_weights takes (Hugging Face shapes and
// row order, fused and stacked tensors split: model/gguf_split.h), then the same bind / quantize / pack
// path as a Hugging Face folder, through the names of the file's GGUF architecture.
#include <algorithm>
#include <cstring>
#include <optional>

#include "base/error.h"
#include "base/mapped_file.h"
#include "kernels/gguf_quants.h"
#include "kernels/kquant.h"
#include "kernels/quant.h"
#include "model/gguf_architecture.h"
#include "model/gguf_config.h"
#include "model/gguf_split.h"
#include "model/model.h"

namespace ember::model {

using kernels::WeightMatrix;

namespace {

using kernels::GgmlType;

std::optional<DType> plain_dtype(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return DType::F32;
    case GgmlType::F16: return DType::F16;
    case GgmlType::BF16: return DType::BF16;
    default: return std::nullopt;
  }
}

// Archs with GgufArchitecture::permuted_qk (llama, smollm3) store attn_q / attn_k with each head's rows
// interleaved for adjacent-pair RoPE: GGUF row 2i + j of a head is Hugging Face row j * head_dim/2 + i.
// Returns the rows in Hugging Face order.
std::vector<uint8_t> unpermute_rows(const GgufTensor& t, int64_t head_dim) {
  const int64_t rows = t.rows();
  const size_t rb = t.row_bytes();
  std::vector<uint8_t> out(static_cast<size_t>(rows) * rb);
  const int64_t half = head_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t head = r / head_dim, within = r % head_dim;
    const int64_t hf = head * head_dim + (within % 2) * half + within / 2;
    std::memcpy(out.data() + static_cast<size_t>(hf) * rb, t.data + static_cast<size_t>(r) * rb, rb);
  }
  return out;
}

bool permuted_in_file(const GgufArchitecture& arch, const std::string& name) {
  if (!arch.permuted_qk) return false;
  const auto ends = [&](std::string_view s) { return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0; };
  return name.starts_with("blk.") && (ends(".attn_q.weight") || ends(".attn_k.weight") || ends(".attn_q.bias") || ends(".attn_k.bias"));
}

}  // namespace

std::unique_ptr<Model> Model::load_gguf(const std::string& path, const LoadOptions& options) {
  if (options.progress) options.progress("reading GGUF metadata");
  auto file = std::make_shared<const GgufFile>(path);
  std::unique_ptr<Model> m(new Model(path, gguf_config(*file), Checkpoint{}, options));
  m->gguf_ = file;
  const ModelConfig& c = m->config_;
  const GgufArchitecture& arch = gguf_architecture(*file);
  if (options.progress) options.progress("converting GGUF tensors");
  // Fused projections and stacked experts as the matrices they hold, each a view of the file.
  // (The parts that cannot be views keep their bytes in memory_.data.)
  const std::vector<GgufTensor> tensors = gguf_bound_tensors(*file, arch, c, m->memory_.data);

  // Tensors by GGUF name with Hugging Face shapes; converted bytes live in memory_ (freed once packed),
  // block-quantized matrices in quantized_.
  std::map<std::string, WeightMatrix> stored;
  std::vector<std::string> requantized;  // block types without a kernel met (Q8_K)
  m->quantized_.reserve(tensors.size());
  for (const GgufTensor& t : tensors) {
    TensorInfo info{t.name, DType::F32, t.shape, t.data, t.size_bytes, path};
    const bool in_file = !m->memory_.data.contains(t.name);  // else a part gguf_bound_tensors made
    std::vector<uint8_t> permuted;
    if (permuted_in_file(arch, t.name)) permuted = unpermute_rows(t, c.head_dim);
    const uint8_t* bytes = permuted.empty() ? t.data : permuted.data();
    const int64_t rows = t.rows(), cols = t.row_length();
    const bool matrix = t.shape.size() == 2;
    if (const auto dt = plain_dtype(t.type)) {
      info.dtype = *dt;
      if (!permuted.empty()) info.data = (m->memory_.data[t.name] = std::move(permuted)).data();
    } else if (matrix && kernels::has_stored_kernel(t.type)) {  // kernels for the stored blocks
      m->quantized_.push_back(kernels::from_ggml_blocks(t.type, bytes, rows, cols, m->pool_, &m->arena_));
      stored[t.name] = m->quantized_.back().view();
    } else if (kernels::can_dequantize(t.type)) {
      // No kernel for this block type: float32 rows, then (matrices) Q8_0 blocks.
      std::vector<float> f(static_cast<size_t>(rows * cols));
      m->pool_.parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
          kernels::dequantize_row(t.type, bytes + static_cast<size_t>(r) * t.row_bytes(), cols, f.data() + r * cols);
      });
      if (matrix && kernels::quantizable(cols)) {
        m->quantized_.push_back(
            kernels::quantize(WeightMatrix{f.data(), DType::F32, rows, cols}, kernels::QType::Q8_0, m->pool_, &m->arena_));
        stored[t.name] = m->quantized_.back().view();
        const std::string type = kernels::ggml_type_name(t.type);
        if (std::find(requantized.begin(), requantized.end(), type) == requantized.end()) requantized.push_back(type);
      } else {
        std::vector<uint8_t>& owned = m->memory_.data[t.name];
        owned.resize(f.size() * sizeof(float));
        std::memcpy(owned.data(), f.data(), owned.size());
        info.data = owned.data();
      }
    } else {
      continue;  // bind_weights names any tensor it needs that is missing here
    }
    // A converted tensor's mapped pages are not read again: drop them now, not after the whole file.
    if (!plain_dtype(t.type) && in_file) release_pages(t.data, t.size_bytes);
    m->memory_.tensors.emplace(t.name, std::move(info));
  }
  for (const std::string& type : requantized)
    m->load_note_ += (m->load_note_.empty() ? "" : ", ") + type;
  if (!m->load_note_.empty()) m->load_note_ += " matrices requantized to q8_0 at load (no kernel for them yet)";

  Source src = m->memory_source(path, [&](const std::string& n) {
    const auto g = std::find_if(tensors.begin(), tensors.end(), [&](const GgufTensor& t) { return t.name == n; });
    return g == tensors.end() ? "tensor " + n + " is missing"
                              : "tensor " + n + " has type " + kernels::ggml_type_name(g->type) + ", which Ember cannot read";
  });
  src.converted = [&](const std::string& name) -> const WeightMatrix* {
    auto it = stored.find(name);
    return it == stored.end() ? nullptr : &it->second;
  };
  m->qkv_fused_in_file_ = !arch.fused_qkv.empty();  // split by gguf_bound_tensors
  m->finish_load(src, *arch.names, options);
  file->release_pages();
  return m;
}

}  // namespace ember::model
