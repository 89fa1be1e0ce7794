#pragma once
// A tokenizer.json pattern: {"String": literal} or {"Regex": oniguruma pattern}.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/json_util.h"
#include "tokenizer/regex.h"

namespace ember::tokenizer {

class Pattern {
 public:
  static Pattern from_json(const json& j, const std::string& where);
  static Pattern literal(std::string s);
  std::vector<ByteRange> find_all(std::string_view s) const;
  // Replaces every match with the literal `content`.
  std::string replace_all(std::string_view s, std::string_view content) const;

 private:
  std::string literal_;
  std::optional<Regex> regex_;
};

}  // namespace ember::tokenizer
