// config.json -> ModelConfig, then the derived values the model computes from it at load time.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const ember::model::ModelConfig c = ember::model::parse_config(text, "config.json");
    (void)ember::model::rope_inv_freq(c, 1);
    // Past the trained context (where dynamic scaling starts), without overflowing the count.
    const int64_t past = c.max_position_embeddings < INT64_MAX ? c.max_position_embeddings + 1 : INT64_MAX;
    (void)ember::model::rope_inv_freq(c, past);
  } catch (const ember::Error&) {
  }
  return 0;
}
