#pragma once
// llama.cpp's form of Gemma 4's per-layer plan (arch gemma4): the full layers' head size in
// attention.key_length and the sliding ones' in key_length_swa, kv heads and MLP widths as arrays of
// one value per layer, KV sharing by attention.shared_kv_layers (llama.cpp's rule for the source),
// keys as values on any layer that stores no attn_v, and the per-layer embeddings' width in
// embedding_length_per_layer_input.
#include "model/config.h"
#include "model/gguf_architecture.h"
#include "model/gguf_keys.h"

namespace ember::model {

// Fills c.layers' shapes and c's Gemma 4 options. c.layers already holds each layer's window (from
// attention.sliding_window_pattern) and rope, c.head_dim the full layers' head size. Throws
// ember::Error naming the file and the key or tensor for a plan Ember cannot run as llama.cpp does.
void read_gguf_layer_plan(const ArchKeys& k, const GgufArchitecture& ga, ModelConfig& c);

}  // namespace ember::model
