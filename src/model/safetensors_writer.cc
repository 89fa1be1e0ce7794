#include "model/safetensors_writer.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace ember::model {

void write_safetensors(const InMemoryWeights& w, const std::filesystem::path& file) {
  nlohmann::ordered_json header = {{"__metadata__", {{"format", "pt"}}}};
  size_t offset = 0;
  for (const auto& [name, info] : w.tensors) {
    const size_t n = w.data.at(name).size();
    header[name] = {{"dtype", info.u8 ? "U8" : dtype_name(info.dtype)}, {"shape", info.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(file, std::ios::binary);
  const uint64_t len = text.size();
  out.write(reinterpret_cast<const char*>(&len), 8);  // x86-64 is little-endian
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& [name, info] : w.tensors) {
    const std::vector<uint8_t>& bytes = w.data.at(name);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  if (!out) throw Error(file.string() + ": write failed");
}

}  // namespace ember::model
