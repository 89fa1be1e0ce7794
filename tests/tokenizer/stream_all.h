#pragma once
// Streaming decode in tests: the whole text, checked piece by piece.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/utf8.h"
#include "tokenizer/tokenizer.h"

namespace ember::test {

// Decodes `ids` one at a time through a StreamDecoder; every delta must be whole UTF-8 characters.
inline std::string stream_all(const tokenizer::Tokenizer& tok, const std::vector<int32_t>& ids, bool skip) {
  tokenizer::StreamDecoder s(tok, skip);
  std::string out;
  for (int32_t id : ids) {
    const std::string delta = s.push(id);
    EXPECT_EQ(utf8::complete_prefix(delta), delta.size()) << "partial UTF-8 character in a delta";
    out += delta;
  }
  return out + s.flush();
}

}  // namespace ember::test
