#pragma once
// Gemma 4's per-layer plan, read from its text config: which head size, kv heads and window each
// layer type has, which layers use the keys as values, which reuse an earlier layer's keys and values
// (num_kv_shared_layers), how wide each MLP is, and the per-layer embeddings.
#include "model/config.h"
#include "model/config_fields.h"

namespace ember::model {

// Gemma 4's math beside the plan, whatever format it is read from: plain-weight norms (no 1 + w),
// embeddings times sqrt(hidden), unscaled scores, a weightless value norm, each layer's layer_scalar.
void set_layer_plan_math(ModelConfig& c);

// Fills c.layers' shapes and c's Gemma 4 options from the text config `r`; c.layers already holds
// each layer's window (sliding_window > 0: a sliding layer) and rope. Throws ember::Error naming the
// field for a plan that cannot be run (a shared layer whose type no unshared layer has).
void parse_layer_plan(const ConfigFields& r, ModelConfig& c);

}  // namespace ember::model
