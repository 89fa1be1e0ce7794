#pragma once
// A Hugging Face folder written as a GGUF file that llama.cpp loads with the same logits (ember
// convert): the arch and its hyperparameters under llama.cpp's keys, the tokenizer as tokenizer.ggml.*
// metadata, and the tensors under llama.cpp's names and shapes, stored as the rows of the GGUF
// architecture table say (model/gguf_architecture.h: llama's q/k rows permuted, Gemma's norms as
// 1 + w). What a GGUF file cannot say (a setting llama.cpp would run otherwise) is refused, naming
// the field; the output is written under a temporary name and renamed at the end.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kernels/gguf_quants.h"
#include "kernels/quant_mix.h"
#include "model/gguf_writer.h"

namespace ember::model {

struct ConvertOptions {
  // The matrices' type: nullopt keeps each as stored (F32, F16 or BF16); a float type converts them;
  // a block type (Q8_0, Q4_0, Q4_K) quantizes them, except the token embedding, which stays float,
  // and rows not a whole number of blocks (Q4_K falls back to Q8_0, then float). 1-D tensors and the
  // routers are always F32.
  std::optional<kernels::GgmlType> type;
  // llama.cpp's Q4_K_M / Q5_K_M instead (type then unused): each matrix, the token embedding too, in
  // kernels::mix_tensor_type's type (a tied embedding by the output's rule, an untied one in the base
  // type), by ggml's reference quantizers, as llama-quantize writes them.
  kernels::QuantMix mix = kernels::QuantMix::None;
  int threads = 0;  // rows converted and quantized in parallel (0: one thread per hardware thread)
  std::function<void(const std::string&)> progress;  // one line per step and per tensor
  std::function<void(const std::string&)> warn;      // what llama.cpp will run differently
};

void convert_to_gguf(const std::string& model_dir, const std::string& out_path, const ConvertOptions& options = {});

// tokenizer.ggml.* and tokenizer.chat_template from the tokenizer files of `dir` (tokenizer.json,
// tokenizer_config.json, chat_template.jinja) as llama.cpp's converter writes them: "llama" for a
// byte-fallback BPE (scores from its merges' ranks, the merges too, which Ember reads), "gpt2" for a
// byte-level one (with the tokenizer.ggml.pre name of its pre-tokenizer). `rows` tokens (the
// embedding's rows: ids the files lack are padding; 0: as many as the files have); the first of
// `eos_ids` (config.json's) where tokenizer_config.json names no eos token, a second as eot.
void write_gguf_tokenizer(GgufWriter& w, const std::string& dir, int64_t rows, const std::vector<int32_t>& eos_ids = {});

// --quantize: "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k"; throws ember::Error naming them otherwise.
kernels::GgmlType parse_convert_type(const std::string& name);
// Those, or "q4_k_m" / "q5_k_m" (the mixes), into o.type or o.mix.
void set_convert_quantize(ConvertOptions& o, const std::string& name);
std::string convert_type_names();  // the types, then the mixes

}  // namespace ember::model
