#include "apps/ember/model_options.h"
#include "apps/ember/flag_range.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/format.h"
#include "base/mapped_file.h"
#include "chat/chat_template.h"
#include "engine/generation.h"
#include "engine/memory_plan.h"
#include "kernels/quant.h"
#include "kernels/quant_mix.h"
#include "model/load_tokenizer.h"
#include "sampling/overrides.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <thread>

namespace ember::app {

void JsonlModelOptions::add_to(CLI::App& cmd, const std::string& model_help, const std::string& jsonl_help) {
  cmd.add_option("-m,--model", model, model_help)->required();
  cmd.add_flag("--jsonl", jsonl, jsonl_help)->required();
  add_threads_option(cmd, threads);
}

void add_kv_dtype_option(CLI::App& cmd, std::string& kv_dtype) {
  const auto names = kernels::kv_type_names();
  cmd.add_option("--kv-dtype", kv_dtype,
                 "KV cache storage: " + one_of(names) + " (default " + kernels::kv_type_name(model::kKvTypeDefault) +
                     ", as llama.cpp; q8_0 holds about half of f16's memory)")
      ->check(CLI::IsMember(std::vector<std::string>(names.begin(), names.end())));
}

void add_act_dtype_option(CLI::App& cmd, std::string& act_dtype) {
  cmd.add_option("--act-dtype", act_dtype,
                 "Activations that BF16 weight matrices multiply: f32 (default; float32, the reference "
                 "implementations' precision) or bf16 (rounded to BF16, as llama.cpp computes BF16 models: prefill "
                 "and batched steps about 1.8x faster on CPUs with AVX512-BF16; an error for a model without BF16 "
                 "matrices)")
      ->check(CLI::IsMember({"f32", "bf16"}));
}

void ModelOptions::add_to(CLI::App& cmd) {
  cmd.add_option("-m,--model", dir, "Hugging Face model folder or .gguf file")->required();
  add_threads_option(cmd, threads);
  cmd.add_option("--ctx", ctx, "Context size in tokens (default: the model's max_position_embeddings)")
      ->check(in_range<int64_t>(1, int64_t{1} << 30));
  add_kv_dtype_option(cmd, kv_dtype);
  add_act_dtype_option(cmd, act_dtype);
  cmd.add_option("--quantize", quantize,
                 "Quantize weight matrices at load: " + one_of(kernels::quantize_names()) +
                     " (q8_0 about half of BF16's memory, the 4-bit types about a quarter; q4_k_m and q5_k_m are "
                     "llama.cpp's mixes: Q4_K / Q5_K with Q6_K for the output and for v and down on the first and "
                     "last eighth of the layers and every third between; none, the default, keeps the stored dtype)")
      ->check([](const std::string& s) {  // parse_quantization knows the names; CLI11 adds the flag's
        try {
          kernels::parse_quantization(s);
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what());
        }
      });
  cmd.add_option("--dtype", dtype,
                 "Convert the plain (float) weight matrices at load: " + one_of(dtype_lower_names()) + " (default: as stored)")
      ->check(CLI::IsMember(std::vector<std::string>(dtype_lower_names().begin(), dtype_lower_names().end())));
  cmd.add_option("--mem", mem,
                 "Memory for the KV cache, e.g. 8G or 512M (default: 80% of the memory the system has available)")
      ->check([](const std::string& s) {
        try {
          parse_bytes(s, "--mem");
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what());
        }
      });
  cmd.add_flag("-q,--quiet", quiet, "No progress or statistics on stderr");
}

std::unique_ptr<model::Model> ModelOptions::load() const {
  const auto t0 = std::chrono::steady_clock::now();
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  model::LoadOptions lo;
  lo.threads = threads;
  lo.lm_head = lm_head;
  lo.kv_dtype = model::parse_kv_dtype(kv_dtype);
  lo.quantize = kernels::parse_quantization(quantize);
  if (!dtype.empty()) lo.weight_dtype = parse_lower_dtype(dtype);
  lo.bf16_activations = bf16_activations(act_dtype);
  if (!quiet)
    lo.progress = [tty](const std::string& stage) {  // a log (not a terminal) gets a line per stage
      std::fprintf(stderr, tty ? "\r\033[Kloading: %s" : "loading: %s\n", stage.c_str());
    };
  auto m = model::Model::load(dir, lo);
  if (!quiet) {
    const double s = seconds_since(t0);
    const std::string quantized =
        quantize == "none" ? ""
                           : ", matrices quantized to " + quantize + " (" + m->weight_type() + "): " +
                                 format_bytes(static_cast<double>(m->decode_weight_bytes()));
    const std::string note = m->load_note().empty() ? "" : "; " + m->load_note();
    std::fprintf(stderr, "%sloaded %s (%s, %s of weights%s%s) in %.3f s with %d threads\n", tty ? "\r\033[K" : "",
                 dir.c_str(), m->config().model_type.c_str(),
                 format_bytes(static_cast<double>(m->weight_bytes())).c_str(), quantized.c_str(), note.c_str(), s,
                 m->pool().size());
  }
  return m;
}

void SamplingOptions::add_to(CLI::App& cmd) {
  // -1 as llama.cpp's users write it: no limit but the end token and the context.
  cmd.add_option_function<int32_t>(
         "-n,--max-tokens",
         [this](int32_t n) {
           to_the_end = n < 0;
           if (to_the_end) max_tokens.reset();
           else max_tokens = n;
         },
         "Maximum number of new tokens (-1: until the end token or the context)")
      ->check(in_range<int32_t>(-1, 1 << 30));
  cmd.add_option("--temperature", temperature, "Sampling temperature (0: greedy)")->check(in_range(0.0f, 100.0f));
  cmd.add_option("--top-k", top_k, "Keep only the K most likely tokens (0: off)")->check(in_range(0, 1 << 24));
  cmd.add_option("--top-p", top_p, "Nucleus sampling: keep the smallest set with probability >= P")
      ->check(in_range(0.0f, 1.0f, LowerBound::kExcluded));  // top_p 0 keeps no token
  cmd.add_option("--min-p", min_p, "Drop tokens below P times the most likely token's probability")
      ->check(in_range(0.0f, 1.0f));
  cmd.add_option("--repeat-penalty", repetition_penalty, "Repetition penalty (Hugging Face semantics; 1: off)")
      ->check(in_range(0.01f, 100.0f));
  cmd.add_option("--seed", seed, "Random seed for reproducible sampling");
  cmd.add_option("--stop", stop, "Stop when this text appears (repeatable); it is not printed");
}

LoadedModel load_model(const ModelOptions& model, const SamplingOptions* sampling) {
  LoadedModel m{model.load(), model::load_tokenizer(model.dir), {}};
  if (sampling) m.params = sampling->resolve(*m.model);
  return m;
}

void add_chat_template_option(CLI::App& cmd, std::string& file) {
  cmd.add_option("--chat-template", file,
                 "A Jinja chat template to use instead of the model's (e.g. one that renders gpt-oss's harmony format)")
      ->check(CLI::ExistingFile);
}

std::string read_chat_template(const std::string& file) {
  if (file.empty()) return {};
  std::string source = read_file(file);
  if (source.empty()) fail(file, "the chat template is empty");
  try {  // parsed here too, so that a syntax error names the file
    chat::ChatTemplate parsed(source);
  } catch (const Error& e) {
    fail(file, e.what());
  }
  return source;
}

int64_t parse_bytes(const std::string& text, const std::string& flag) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    fail(flag, "expected a size such as 8G or 512M (got '" + text + "')");
  }
  std::string unit = text.substr(used);
  for (char& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();
  if (unit.size() > 1 && unit.back() == 'I') unit.pop_back();  // GiB, MiB: binary like the rest
  double scale = 1;
  if (unit == "K") scale = 1024.0;
  else if (unit == "M") scale = 1024.0 * 1024;
  else if (unit == "G") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty() && unit != "B") fail(flag, "unknown unit '" + text.substr(used) + "' (use K, M, G or T)");
  if (!(value > 0)) fail(flag, "must be positive (got '" + text + "')");
  // The cast of a double past int64_t's range is undefined: 1e20 became a budget that meant "default".
  if (!(value * scale < 0x1p63)) fail(flag, "too large (got '" + text + "'; the most is 2^63 - 1 bytes)");
  return static_cast<int64_t>(value * scale);
}

int64_t planned_context(const model::Model& model, const ModelOptions& o, int64_t sequences, int64_t pool_factor) {
  engine::MemoryRequest r;
  r.context = o.ctx;
  r.sequences = sequences;
  r.pool_factor = pool_factor;
  if (!o.mem.empty()) r.budget_bytes = parse_bytes(o.mem, "--mem");
  const engine::MemoryPlan plan = engine::plan_memory(model, r);
  if (!o.quiet) std::fprintf(stderr, "%s\n", plan.describe().c_str());
  return plan.context;
}

sampling::SamplingParams SamplingOptions::resolve(const model::Model& model) const {
  sampling::SamplingParams p = sampling::apply(engine::default_params(model.dir(), model.config()), *this);
  if (to_the_end) {  // over generation_config.json's max_length too
    p.max_new_tokens.reset();
    p.max_length.reset();
  }
  return p;
}

CLI::Option* add_threads_option(CLI::App& cmd, int& threads) {
  return cmd
      .add_option_function<int>(
          "-t,--threads", [&threads](int n) { threads = usable_threads(n); },
          "Threads (default 0: one per hardware thread; more than the hardware threads are capped to them)")
      ->check(in_range(0, kMaxThreads));
}

int usable_threads(int requested) {
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (requested <= hardware) return requested;
  std::fprintf(stderr, "ember: warning: -t %d is more threads than the %d hardware threads; using %d\n", requested,
               hardware, hardware);
  return hardware;
}

}  // namespace ember::app
