#pragma once
// PCRE2 (UTF + UCP, JIT) wrapper for the Oniguruma patterns found in tokenizer.json files.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::tokenizer {

using ByteRange = std::pair<size_t, size_t>;  // [begin, end) in bytes

class Regex {
 public:
  // Compiles `pattern`; `where` names the component for error messages.
  Regex(const std::string& pattern, const std::string& where);
  // Successive non-overlapping matches of valid UTF-8 `s`, left to right (thread-safe).
  std::vector<ByteRange> find_all(std::string_view s) const;

 private:
  std::shared_ptr<void> code_;  // pcre2_code_8, immutable after compilation
};

// Oniguruma's \s also matches U+0085 (NEL), which PCRE2's UCP \s does not: rewrite the pattern.
std::string onig_to_pcre2(std::string_view pattern);

// Successive non-overlapping occurrences of a literal `needle` (none when it is empty).
std::vector<ByteRange> find_all_literal(std::string_view s, std::string_view needle);

}  // namespace ember::tokenizer
