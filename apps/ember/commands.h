#pragma once
// Each subcommand lives in its own cmd_<name>.cc and registers itself on the CLI11 app.
// The returned callback runs after parsing; it returns the process exit code.
#include <CLI/CLI.hpp>

#include <functional>

namespace ember::app {

using Run = std::function<int()>;

Run add_logits_command(CLI::App& app);
Run add_generate_command(CLI::App& app);
Run add_chat_command(CLI::App& app);
Run add_serve_command(CLI::App& app);
Run add_tokenize_command(CLI::App& app);
Run add_detokenize_command(CLI::App& app);
Run add_template_command(CLI::App& app);
Run add_bench_command(CLI::App& app);
Run add_embed_command(CLI::App& app);
Run add_perplexity_command(CLI::App& app);
Run add_convert_command(CLI::App& app);


}  // namespace ember::app
