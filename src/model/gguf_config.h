#pragma once
// The ModelConfig a GGUF file's metadata describes (llama.cpp's {arch}.* keys), for the GGUF
// architectures Ember runs: llama (Llama, Mistral), qwen2 and qwen3.
#include "model/config.h"
#include "model/gguf.h"

namespace ember::model {

// Whether a -m path names a GGUF file (by its extension) rather than a Hugging Face folder.
bool is_gguf_path(const std::string& path);

// Throws ember::Error naming the file and key for a missing key, an unsupported architecture or an
// option Ember does not implement (rope scaling other than linear, experts). Llama 3's rope_freqs.weight
// becomes RopeConfig::freq_divisors.
ModelConfig gguf_config(const GgufFile& gguf);

}  // namespace ember::model
