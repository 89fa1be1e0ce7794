#pragma once
// --json-schema FILE and --grammar FILE (GBNF): the output must follow them (generate and chat).
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "engine/grammar_constraint.h"

namespace ember::app {

struct GrammarOptions {
  std::string json_schema_file, grammar_file;
  void add_to(CLI::App& cmd);
  // The grammar of the flags (none without them); throws ember::Error naming the file. Call it before
  // the model loads, so that a bad file fails fast.
  std::shared_ptr<const grammar::Grammar> compile() const;
  // How errors name it: "the JSON schema in FILE" or "the grammar in FILE".
  std::string source() const;
};

// The constraint of a compiled grammar over this tokenizer (none for none); `source` names it.
std::optional<engine::GrammarConstraint> constraint_for(std::shared_ptr<const grammar::Grammar> grammar,
                                                        const tokenizer::Tokenizer& tokenizer,
                                                        const std::string& source);

}  // namespace ember::app
