// GGUF files from strangers: the input is opened as a .gguf file. Every accepted tensor must lie
// inside the file with the byte size its type and shape give; every metadata value must decode;
// a dequantizable tensor's first row is converted, and the tokenizer of the metadata is built and
// used when the metadata describes one.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/error.h"
#include "fuzz_util.h"
#include "kernels/gguf_quants.h"
#include "model/gguf.h"
#include "model/gguf_tokenizer.h"

namespace {

using ember::model::GgufFile;

void check_tensors(const GgufFile& g) {
  for (const auto& t : g.tensors()) {
    if (t.offset < g.data_offset() || t.offset > g.file_size() || t.size_bytes > g.file_size() - t.offset) std::abort();
    if (static_cast<size_t>(t.rows()) * t.row_bytes() != t.size_bytes) std::abort();
    if (t.size_bytes == 0 || !ember::kernels::can_dequantize(t.type) || t.row_length() > (1 << 16)) continue;
    std::vector<float> row(static_cast<size_t>(t.row_length()));
    ember::kernels::dequantize_row(t.type, t.data, t.row_length(), row.data());
  }
}

void use_tokenizer(const GgufFile& g) {
  if (!g.has("tokenizer.ggml.model")) return;
  const auto tok = ember::model::gguf_tokenizer(g);
  for (const bool special : {false, true}) {
    const auto ids = tok.encode("Hello world! 12345 h\xC3\xA9llo\t\n<s></s><|im_end|>", special);
    for (const int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size()) std::abort();
    (void)tok.decode(ids, special);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ember::fuzz::TempDir dir;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  try {
    const GgufFile g(dir.write("input.gguf", input));
    for (const auto& kv : g.metadata()) (void)g.get_json(kv.key);
    check_tensors(g);
    use_tokenizer(g);
  } catch (const ember::Error&) {
  }
  return 0;
}
