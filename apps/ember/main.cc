// ember: run Hugging Face language models locally. See README.md for every command.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <utility>
#include <vector>

#include "apps/ember/commands.h"
#include "base/error.h"

namespace {

// A command's output that did not all reach stdout (a full disk, /dev/full, a closed stdout) is a
// failure, whatever the command returned. Returns 0 when everything was written.
int check_stdout() {
  std::cout.flush();
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout) && std::cout.good()) return 0;
  // A write that failed before this flush left no errno (stdio drops what it could not write): one
  // byte more says why. The errors that fail writes persist (full disk, closed or broken output).
  if (errno == 0) {
    std::clearerr(stdout);
    if (std::fputc('\n', stdout) != EOF) std::fflush(stdout);
  }
  std::fprintf(stderr, "ember: error: writing standard output failed (%s)\n",
               errno != 0 ? std::strerror(errno) : "the reason is unknown");
  return 1;
}

// The exit status of the parsed command: its own, 1 for an ember::Error, 2 for any other exception.
int run_parsed(CLI::App& app, int argc, char** argv,
               const std::vector<std::pair<CLI::App*, ember::app::Run>>& commands) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);  // --help and --version print to stdout and return 0
  }
  try {
    for (const auto& [cmd, run] : commands)
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

}  // namespace

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

  const int status = run_parsed(app, argc, argv, commands);
  const int written = check_stdout();
  return status != 0 ? status : written;
}
