#pragma once
// Writes weights as one .safetensors file (the reader is model/safetensors.h): random-weight folders
// for benchmarks, and folders the tests derive from the shared models.
#include <filesystem>

#include "model/model.h"

namespace ember::model {

// 8-byte little-endian header length, the JSON header (padded to 8 bytes), then each tensor's bytes in
// the map's order. Throws ember::Error naming the file when the write fails.
void write_safetensors(const InMemoryWeights& weights, const std::filesystem::path& file);

}  // namespace ember::model
