// ember convert -m DIR -o FILE.gguf [--quantize TYPE]: a Hugging Face folder written as a GGUF file
// that llama.cpp (and any GGUF tool) loads (model/gguf_convert.h).
#include <cstdio>

#include "apps/ember/commands.h"
#include "apps/ember/model_options.h"
#include "model/gguf_convert.h"

namespace ember::app {

Run add_convert_command(CLI::App& app) {
  struct Opts {
    std::string model, output, quantize;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("convert", "Write a Hugging Face model folder as a GGUF file (llama.cpp's format)");
  cmd->add_option("-m,--model", o->model, "Hugging Face model folder")->required();
  cmd->add_option("-o,--output", o->output, "The GGUF file to write")->required();
  cmd->add_option("--quantize", o->quantize,
                  "Matrix type: " + model::convert_type_names() +
                      " (default: as stored; the token embedding and 1-D tensors stay float; q4_k_m and q5_k_m are "
                      "llama-quantize's mixes, the token embedding included)");
  add_threads_option(*cmd, o->threads);
  return [o] {
    model::ConvertOptions opts;
    opts.threads = o->threads;
    if (!o->quantize.empty()) model::set_convert_quantize(opts, o->quantize);
    opts.progress = [](const std::string& line) { std::fprintf(stderr, "ember: %s\n", line.c_str()); };
    opts.warn = [](const std::string& line) { std::fprintf(stderr, "ember: warning: %s\n", line.c_str()); };
    model::convert_to_gguf(o->model, o->output, opts);
    std::fprintf(stderr, "ember: wrote %s\n", o->output.c_str());
    return 0;
  };
}

}  // namespace ember::app
