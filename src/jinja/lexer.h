#pragma once
// Splits template source into tokens the way Jinja2's lexer does with trim_blocks and
// lstrip_blocks on: text between tags, and the expression tokens inside {{ }} and {% %}.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::jinja {

enum class Tok : uint8_t {
  Data,        // literal template text
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,      // value already unescaped
  Int,
  Float,
  Op,          // operator or punctuation, text in `text`
  End,
};

struct Pos {
  uint32_t line = 1;
  uint32_t column = 1;
};

struct Token {
  Tok type;
  std::string text;
  Pos pos;
  int64_t int_value = 0;
  double float_value = 0;
};

// Throws ember::Error "line L, column C: ..." on malformed input.
std::vector<Token> tokenize(std::string_view source);

// "line L, column C: what"
std::string at(Pos pos, std::string_view what);

}  // namespace ember::jinja
