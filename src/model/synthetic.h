#pragma once
// Random-weight models of named real shapes, built in memory (for benchmarks: speed depends on the
// shapes and dtypes, not on trained values).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "model/model.h"

namespace ember::model {

// llama-1b, llama-1b-128k, smollm-360m, qwen-0.5b, qwen3-30b-a3b-2l (a mixture of experts),
// gemma-4-e2b-4l and gemma-4-26b-a4b-4l (Gemma 4's layers, 2 of each type), and the hybrids
// qwen3.5-0.8b and qwen3.6-35b-a3b-4l (Gated DeltaNet layers with a recurrent state).
std::vector<std::string> synthetic_shape_names();
// The config of a named shape; throws ember::Error listing the known names.
ModelConfig synthetic_config(const std::string& shape);

// Every tensor the config needs, in `dtype`, drawn from a fixed-seed generator (uniform with the
// variance of a typical initialisation, norms at 1).
InMemoryWeights synthetic_weights(const ModelConfig& config, DType dtype, uint64_t seed, kernels::ThreadPool& pool);

// synthetic_config + synthetic_weights + Model::from_memory (quantizing as options say).
std::unique_ptr<Model> make_synthetic_model(const std::string& shape, DType dtype, const LoadOptions& options,
                                            uint64_t seed = 1);

}  // namespace ember::model
