#include "model_folder.h"

#include <fstream>
#include <utility>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/mapped_file.h"
#include "kernels/thread_pool.h"
#include "model/config.h"
#include "model/safetensors_writer.h"
#include "model/synthetic.h"

namespace ember::bench {

namespace fs = std::filesystem;

namespace {

// config.json's torch_dtype names of the float types.
constexpr std::pair<DType, const char*> kTorchDtypes[] = {
    {DType::F32, "float32"}, {DType::F16, "float16"}, {DType::BF16, "bfloat16"}};

const char* torch_dtype_name(DType t) {
  for (const auto& [d, name] : kTorchDtypes)
    if (d == t) return name;
  return "bfloat16";
}

DType torch_dtype(const std::string& name) {  // BF16 for a missing or unknown name
  for (const auto& [d, n] : kTorchDtypes)
    if (name == n) return d;
  return DType::BF16;
}

}  // namespace

void write_config(const model::ModelConfig& c, DType dtype, const fs::path& file) {
  nlohmann::ordered_json j = {
      {"architectures", {c.model_type == "qwen2" ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
      {"model_type", c.model_type},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", c.head_dim},
      {"vocab_size", c.vocab_size},
      {"max_position_embeddings", c.max_position_embeddings},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_theta", c.rope.theta},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"hidden_act", "silu"},
      {"bos_token_id", 1},
      {"eos_token_id", 2},
      {"torch_dtype", torch_dtype_name(dtype)},
  };
  std::ofstream(file) << j.dump(2) << '\n';
}

void write_random_model_folder(const fs::path& source, const fs::path& dir) {
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(source))
    if (entry.path().extension() == ".json" || entry.path().filename() == "chat_template.jinja")
      fs::copy_file(entry.path(), dir / entry.path().filename(), fs::copy_options::overwrite_existing);
  const model::ModelConfig config = model::load_config(dir.string());
  const auto raw = nlohmann::json::parse(read_file((dir / "config.json").string()));
  const DType dtype = torch_dtype(raw.value("torch_dtype", ""));
  kernels::ThreadPool pool(0);
  model::write_safetensors(model::synthetic_weights(config, dtype, 1, pool), dir / "model.safetensors");
}

}  // namespace ember::bench
