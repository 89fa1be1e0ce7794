// ember: run Hugging Face language models locally. See README.md for every command.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <utility>
#include <vector>

#include "apps/ember/commands.h"
#include "base/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Ember: run Hugging Face language models on your own machine"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ember " EMBER_VERSION);

  std::vector<std::pair<CLI::App*, ember::app::Run>> commands;
  auto add = [&](ember::app::Run (*adder)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    ember::app::Run run = adder(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(run));
  };
  // add(ember::app::add_<name>_command); one line per subcommand
  add(ember::app::add_generate_command);
  add(ember::app::add_chat_command);
  add(ember::app::add_serve_command);
  add(ember::app::add_logits_command);
  add(ember::app::add_tokenize_command);
  add(ember::app::add_detokenize_command);
  add(ember::app::add_template_command);
  add(ember::app::add_bench_command);
  add(ember::app::add_embed_command);
  add(ember::app::add_perplexity_command);
  add(ember::app::add_convert_command);

  CLI11_PARSE(app, argc, argv);
  try {
    for (auto& [cmd, run] : commands)
      if (cmd->parsed()) return run();
  } catch (const ember::Error& e) {
    std::fprintf(stderr, "ember: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember: internal error: %s\n", e.what());
    return 2;
  }
  return 1;
}
