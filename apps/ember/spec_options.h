#pragma once
// --spec, --spec-max and the draft model's flags: speculative decoding for generate, chat, serve and
// bench (engine/speculation.h).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <string>

#include "apps/ember/flag_range.h"
#include "apps/ember/model_options.h"
#include "base/error.h"
#include "engine/speculation.h"
#include "kernels/quant.h"
#include "model/config.h"
#include "model/load_tokenizer.h"

namespace ember::app {

struct SpecFlags {
  std::string mode = "off";
  int64_t max_draft = engine::SpecOptions{}.max_draft;
  std::string draft_model;     // --draft-model: a folder or .gguf file ("": the target's own files)
  std::string draft_quantize;  // --draft-quantize: the draft's weights quantized at load ("": as stored)

  void add_to(CLI::App& cmd) {
    cmd.add_option("--spec", mode,
                   "Speculative decoding: ngram (prompt lookup: guesses copied from the prompt and the text so far), "
                   "draft (a draft model's guesses: --draft-model, --draft-quantize) or off; guesses are checked in one "
                   "pass and the output is the same as without (greedy), or distributed the same (sampling)")
        ->check(CLI::IsMember({"off", "ngram", "draft"}))
        ->capture_default_str();
    cmd.add_option("--spec-max", max_draft, "Speculation: most tokens guessed per step (the length adapts below it)")
        ->check(in_range<int64_t>(1, 64))
        ->capture_default_str();
    cmd.add_option("--draft-model", draft_model,
                   "Speculation by a draft model: a smaller model with the same vocabulary (folder or .gguf); implies "
                   "--spec draft");
    cmd.add_option("--draft-quantize", draft_quantize,
                   "The draft model's matrices quantized at load (" + one_of(kernels::quantize_names()) +
                       "); without --draft-model the draft is the target's own weights so quantized (e.g. q4_0); "
                       "implies --spec draft")
        ->check([](const std::string& s) {
          try {
            kernels::parse_quantization(s);
            return std::string();
          } catch (const Error& e) {
            return std::string(e.what());
          }
        });
  }
  // The mode asked for: --spec, or draft where only the draft's flags say so.
  std::string effective_mode() const {
    return mode == "off" && (!draft_model.empty() || !draft_quantize.empty()) ? "draft" : mode;
  }
  // The options for `target` (tokenizer `tok`): off, with a note on stderr unless quiet, where it
  // cannot speculate. --spec draft loads the draft (as `load` loads models: threads, KV dtype, quiet)
  // and refuses one whose vocabulary differs. Throws ember::Error for a draft that cannot be used.
  engine::SpecOptions resolve(const model::Model& target, const tokenizer::Tokenizer& tok, const ModelOptions& load) const {
    engine::SpecOptions o;
    const std::string m = effective_mode();
    o.mode = engine::parse_spec_mode(m);
    o.max_draft = max_draft;
    if (o.mode != engine::SpecMode::kDraft && (!draft_model.empty() || !draft_quantize.empty()))
      throw Error("--draft-model and --draft-quantize go with --spec draft, not --spec " + m);
    if (o.mode == engine::SpecMode::kOff) return o;
    if (const std::string why = engine::spec_unsupported(target.config()); !why.empty()) {
      if (!load.quiet) std::fprintf(stderr, "speculation off: %s\n", why.c_str());
      return engine::SpecOptions{};
    }
    if (o.mode == engine::SpecMode::kDraft) {
      if (draft_model.empty() && draft_quantize.empty())
        throw Error("--spec draft needs a draft model: --draft-model DIR|FILE.gguf, or --draft-quantize TYPE for the "
                    "target's own weights quantized");
      ModelOptions d = load;
      d.dir = draft_model.empty() ? load.dir : draft_model;
      d.quantize = draft_quantize.empty() ? "none" : draft_quantize;
      d.dtype.clear();
      d.lm_head = model::LoadOptions::LmHead::kRequired;
      o = engine::draft_speculation(d.load(), model::load_tokenizer(d.dir), target, tok);
      o.max_draft = max_draft;
    }
    return o;
  }
};

}  // namespace ember::app
