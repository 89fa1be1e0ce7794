#include "apps/ember/grammar_options.h"

#include "apps/ember/jsonl.h"
#include "base/error.h"
#include "engine/chat_plan.h"

namespace ember::app {

void GrammarOptions::add_to(CLI::App& cmd) {
  auto* schema = cmd.add_option("--json-schema", json_schema_file, "The output is JSON valid for the JSON Schema in FILE");
  cmd.add_option("--grammar", grammar_file, "The output follows the GBNF grammar in FILE (llama.cpp's format)")
      ->excludes(schema);
}

std::shared_ptr<const grammar::Grammar> GrammarOptions::compile() const {
  const std::string& path = !json_schema_file.empty() ? json_schema_file : grammar_file;
  if (path.empty()) return nullptr;
  try {
    // A schema's grammar as the server makes a response_format's (engine::format_gbnf).
    const std::string gbnf =
        !json_schema_file.empty()
            ? *engine::format_gbnf({engine::OutputFormat::Kind::kJsonSchema, path, read_json_file(path), {}})
            : read_file(path);
    return std::make_shared<const grammar::Grammar>(grammar::Grammar::from_gbnf(gbnf));
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind(path, 0) == 0) throw;  // already names the file
    fail(path, what);
  }
}

std::string GrammarOptions::source() const {
  return !json_schema_file.empty() ? "the JSON schema in " + json_schema_file : "the grammar in " + grammar_file;
}

std::optional<engine::GrammarConstraint> constraint_for(std::shared_ptr<const grammar::Grammar> grammar,
                                                        const tokenizer::Tokenizer& tokenizer,
                                                        const std::string& source) {
  if (!grammar) return std::nullopt;
  engine::GrammarConstraint c{std::move(grammar), engine::grammar_vocabulary(tokenizer)};
  c.source = source;
  return c;
}

}  // namespace ember::app
