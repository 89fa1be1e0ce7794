#pragma once
// The ModelConfig a GGUF file's metadata describes (llama.cpp's {arch}.* keys), for the GGUF
// architectures of model/gguf_architecture.h: the same fields the Hugging Face reader fills, each
// set from a key or a row of that table.
#include "model/config.h"
#include "model/gguf.h"

namespace ember::model {

// Whether a -m path names a GGUF file (by its extension) rather than a Hugging Face folder.
bool is_gguf_path(const std::string& path);

// Throws ember::Error naming the file and key for a missing key, an unsupported architecture or an
// option Ember does not implement (rope scaling other than linear and yarn, long-rope factors, a key
// the arch does not have). Llama 3's rope_freqs.weight becomes RopeConfig::freq_divisors.
ModelConfig gguf_config(const GgufFile& gguf);

}  // namespace ember::model
