#pragma once
// Random-weight Hugging Face model folders for benchmarks: speed depends on a model's shapes and
// dtypes, not on its trained values, so a real model's config.json and tokenizer files with random
// weights behave as that model does in every benchmark (`ember serve -m DIR` serves it as is).
#include <filesystem>

#include "base/dtype.h"
#include "model/model.h"

namespace ember::bench {

// Writes `config` as a Hugging Face config.json (the fields Ember reads).
void write_config(const model::ModelConfig& config, DType dtype, const std::filesystem::path& file);

// Copies every .json file (and chat_template.jinja) of `source` (a folder with config.json,
// tokenizer.json, tokenizer_config.json and the like) into `dir`, and writes model.safetensors with random weights of config.json's shape in
// its torch_dtype (BF16 when it names none).
void write_random_model_folder(const std::filesystem::path& source, const std::filesystem::path& dir);

}  // namespace ember::bench
