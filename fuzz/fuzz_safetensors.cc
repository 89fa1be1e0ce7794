// Safetensors files and the shard index from strangers' model folders: the input is read both as
// a .safetensors file and as a model.safetensors.index.json beside real shards (whose index from
// ../shared is a seed). Every accepted tensor must lie inside its file.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/error.h"
#include "fuzz_util.h"
#include "model/safetensors.h"

namespace {

using ember::fuzz::TempDir;

// A folder holding the shards of the shared sharded model, so that its index (and mutations of it)
// resolve to real files.
struct ModelDir {
  TempDir dir;
  ModelDir() {
    namespace fs = std::filesystem;
    const fs::path src = fs::path(EMBER_SHARED_DIR) / "models/tiny-llama-sharded-bf16";
    for (const auto& e : fs::directory_iterator(src))
      if (e.path().extension() == ".safetensors")
        fs::create_symlink(fs::absolute(e.path()), fs::path(dir.path()) / e.path().filename());
  }
};

uint8_t touch(const ember::model::TensorInfo& t) {
  if (t.size_bytes == 0) return 0;
  const auto* p = static_cast<const uint8_t*>(t.data);
  return static_cast<uint8_t>(p[0] ^ p[t.size_bytes - 1]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ModelDir model;
  const TempDir& dir = model.dir;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  volatile uint8_t sink = 0;
  try {
    const ember::model::SafetensorsFile f(dir.write("input.safetensors", input));
    for (const auto& [name, t] : f.tensors()) {
      if (static_cast<uint64_t>(t.numel()) * t.element_bytes() != t.size_bytes) std::abort();
      sink = sink ^ touch(t);
    }
  } catch (const ember::Error&) {
  }
  try {
    dir.write("model.safetensors.index.json", input);
    const auto cp = ember::model::Checkpoint::open(dir.path());
    sink = sink ^ static_cast<uint8_t>(cp.total_bytes());
  } catch (const ember::Error&) {
  }
  return 0;
}
