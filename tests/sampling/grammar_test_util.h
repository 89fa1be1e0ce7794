#pragma once
// Helpers of the grammar tests: a grammar from GBNF text and whether it accepts a whole text.
#include <memory>
#include <string>
#include <string_view>

#include "sampling/grammar.h"
#include "sampling/grammar_matcher.h"
#include "sampling/grammar_vocabulary.h"

namespace ember::grammar::test {

// The 256 single bytes as a vocabulary (token id = byte).
inline std::shared_ptr<const Vocabulary> byte_vocabulary() {
  static const auto v = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    return std::make_shared<const Vocabulary>(std::move(bytes), std::vector<bool>{});
  }();
  return v;
}

inline std::shared_ptr<const Grammar> compile(std::string_view gbnf) {
  return std::make_shared<const Grammar>(Grammar::from_gbnf(gbnf));
}

// The whole of `text` is a sentence of the grammar.
inline bool accepts(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  Matcher m(g, byte_vocabulary());
  return m.accept_bytes(text) && m.complete();
}

// `text` can be continued into a sentence.
inline bool accepts_prefix(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  Matcher m(g, byte_vocabulary());
  return m.accept_bytes(text);
}

}  // namespace ember::grammar::test
