#pragma once
// What a generation needs to follow a grammar: the compiled grammar and the vocabulary it masks,
// both immutable, and the masks already computed for them; all shared by every sequence (and
// every copy of the constraint) that uses them.
#include <memory>
#include <string>

#include "sampling/grammar.h"
#include "sampling/grammar_matcher.h"
#include "sampling/grammar_vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace ember::engine {

struct GrammarConstraint {
  std::shared_ptr<const grammar::Grammar> grammar;
  std::shared_ptr<const grammar::Vocabulary> vocabulary;  // from grammar_vocabulary(tokenizer)
  std::shared_ptr<grammar::MaskCache> masks = std::make_shared<grammar::MaskCache>();
  std::string source = "the grammar";  // names it in errors: "the JSON schema in FILE", "'response_format'"
};

// The tokenizer's tokens as byte strings; special tokens are control tokens no grammar allows.
// Build it once per tokenizer (it sorts the whole vocabulary).
std::shared_ptr<const grammar::Vocabulary> grammar_vocabulary(const tokenizer::Tokenizer& tokenizer);

}  // namespace ember::engine
