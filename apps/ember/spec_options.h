#pragma once
// --spec and --spec-max: speculative decoding for generate, chat, serve and bench (engine/speculation.h).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <string>

#include "apps/ember/flag_range.h"
#include "engine/speculation.h"
#include "model/config.h"

namespace ember::app {

struct SpecFlags {
  std::string mode = "off";
  int64_t max_draft = engine::SpecOptions{}.max_draft;

  void add_to(CLI::App& cmd) {
    cmd.add_option("--spec", mode,
                   "Speculative decoding: ngram (prompt lookup: guesses copied from the prompt and the text so far, "
                   "checked in one pass; the output is the same as without) or off")
        ->check(CLI::IsMember({"off", "ngram", "draft"}))
        ->capture_default_str();
    cmd.add_option("--spec-max", max_draft, "Speculation: most tokens guessed per step (the length adapts below it)")
        ->check(in_range<int64_t>(1, 64))
        ->capture_default_str();
  }
  // The options for `config`'s model: off, with a note on stderr unless quiet, where it cannot speculate.
  engine::SpecOptions resolve(const model::ModelConfig& config, bool quiet) const {
    engine::SpecOptions o;
    o.mode = engine::parse_spec_mode(mode);
    o.max_draft = max_draft;
    if (o.mode == engine::SpecMode::kOff) return o;
    if (const std::string why = engine::spec_unsupported(config); !why.empty()) {
      if (!quiet) std::fprintf(stderr, "speculation off: %s\n", why.c_str());
      return engine::SpecOptions{};
    }
    return o;
  }
};

}  // namespace ember::app
