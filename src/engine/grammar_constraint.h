#pragma once
// What a generation needs to follow a grammar: the compiled grammar and the vocabulary it masks,
// both immutable and shared by every sequence that uses them.
#include <memory>

#include "sampling/grammar.h"
#include "sampling/grammar_vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace ember::engine {

struct GrammarConstraint {
  std::shared_ptr<const grammar::Grammar> grammar;
  std::shared_ptr<const grammar::Vocabulary> vocabulary;  // from grammar_vocabulary(tokenizer)
};

// The tokenizer's tokens as byte strings; special tokens are control tokens no grammar allows.
// Build it once per tokenizer (it sorts the whole vocabulary).
std::shared_ptr<const grammar::Vocabulary> grammar_vocabulary(const tokenizer::Tokenizer& tokenizer);

}  // namespace ember::engine
