#pragma once
// config.json's RoPE settings: rope_theta and rope_scaling (transformers 4.x), or transformers v5's
// rope_parameters, which replaces both (one object, or one per layer type as Gemma 3 writes it).
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "model/config.h"

namespace ember::model {

// Sets c.rope, and c.rope_local where `local_rope` (the architecture rotates its sliding layers
// apart), from the config.json object `j`; `where` names the file in errors. Reads c.model_type,
// c.max_position_embeddings and c.rope_dim(), so it runs once those are set.
void parse_rope_settings(const nlohmann::json& j, const std::string& where, bool local_rope, ModelConfig& c);

// YaRN's attention scaling for a context `scale` times the original one (mscale: DeepSeek's
// multiplier of its logarithm), as transformers' get_mscale.
double yarn_mscale(double scale, double mscale = 1.0);

}  // namespace ember::model
