#pragma once
// Options shared by the commands that run a model: loading with progress, threads, context size, and
// the sampling flags of DESIGN.md layered over the model's generation_config.json.
#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/sampling_options.h"
#include "model/model.h"
#include "sampling/generation_config.h"
#include "tokenizer/tokenizer.h"

namespace ember::app {

struct ModelOptions {
  std::string dir;
  int threads = 0;
  int64_t ctx = 0;
  std::string kv_dtype = kernels::kv_type_name(model::kKvTypeDefault);  // how the KV cache stores keys and values
  std::string quantize = "none";  // q8_0 / q4_0 / q4_k / q4_k_m / q5_k_m: weight matrices quantized at load
  std::string dtype;              // f32 / f16 / bf16: plain weight matrices converted at load ("": as stored)
  std::string mem;                // memory for the KV cache ("8G", "512M", bytes); "": a share of what is available
  std::string act_dtype = "f32";  // f32 / bf16: the activations BF16 weight matrices multiply
  bool quiet = false;
  model::LoadOptions::LmHead lm_head = model::LoadOptions::LmHead::kRequired;  // not a flag: the command's need

  void add_to(CLI::App& cmd);
  // Loads the model, printing progress and the load time to stderr unless quiet.
  std::unique_ptr<model::Model> load() const;
};

// The sampling flags: the library's ember::SamplingOptions, set from the command line.
struct SamplingOptions : ember::SamplingOptions {
  bool to_the_end = false;  // -n -1: no token limit, not even the command's default or max_length
  void add_to(CLI::App& cmd);
  // The model's defaults (engine::default_params), then these flags (sampling::apply).
  sampling::SamplingParams resolve(const model::Model& model) const;
};

// What chat, generate and serve start from.
struct LoadedModel {
  std::unique_ptr<model::Model> model;
  tokenizer::Tokenizer tokenizer;
  sampling::SamplingParams params;  // `sampling` resolved over generation_config.json; defaults without it
};

// Loads the model (progress on stderr unless quiet) and its folder's tokenizer, and resolves the
// sampling flags when given (serve takes them per request instead).
LoadedModel load_model(const ModelOptions& model, const SamplingOptions* sampling = nullptr);

// --chat-template FILE of chat and serve: a Jinja chat template used instead of the model's.
void add_chat_template_option(CLI::App& cmd, std::string& file);
// The template in `file` ("" for none); throws ember::Error naming the file when it cannot be read.
std::string read_chat_template(const std::string& file);

// The context per sequence that fits `sequences` sequences (engine::plan_memory, --ctx and --mem);
// prints the plan's line unless quiet. pool_factor: KV blocks per context (2 for the server's reuse).
int64_t planned_context(const model::Model& model, const ModelOptions& options, int64_t sequences = 1,
                        int64_t pool_factor = 1);

// -t/--threads of every command that computes (0: one per hardware thread), in [0, kMaxThreads] and
// capped by usable_threads.
constexpr int kMaxThreads = 4096;
CLI::Option* add_threads_option(CLI::App& cmd, int& threads);
// The options of a command that reads JSON lines with a model (logits, embed): -m, --jsonl
// (required) and -t.
struct JsonlModelOptions {
  std::string model;
  bool jsonl = false;
  int threads = 0;
  void add_to(CLI::App& cmd, const std::string& model_help, const std::string& jsonl_help);
};

// --kv-dtype, its names, default and check from kernels/kv_type.h's table (bench has it too).
void add_kv_dtype_option(CLI::App& cmd, std::string& kv_dtype);
// --act-dtype f32|bf16 (bench has it too); bf16_activations reads its value.
void add_act_dtype_option(CLI::App& cmd, std::string& act_dtype);
inline bool bf16_activations(const std::string& act_dtype) { return act_dtype == "bf16"; }
// `requested`, or the hardware threads with a warning when it asks for more: the extra threads
// would only compete for the same cores (and -t 1000 started 1000).
int usable_threads(int requested);

// "8G", "512MB", "1.5GiB", "1000000" as bytes; throws ember::Error naming `flag` otherwise.
int64_t parse_bytes(const std::string& text, const std::string& flag);

}  // namespace ember::app
