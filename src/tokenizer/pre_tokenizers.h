#pragma once
// tokenizer.json "pre_tokenizer": Sequence, ByteLevel, Metaspace, Split, Digits, Punctuation,
// Whitespace, WhitespaceSplit, BertPreTokenizer.
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_util.h"
#include "tokenizer/piece.h"

namespace ember::tokenizer {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits (and may rewrite) every piece that is not an added token.
  virtual void pre_tokenize(std::vector<Piece>& pieces) const = 0;
};

// nullptr for null; throws ember::Error naming an unsupported type.
std::unique_ptr<const PreTokenizer> make_pre_tokenizer(const json& j, const std::string& where = "pre_tokenizer");

// GPT-2's byte-to-character table: byte b is written as the UTF-8 string byte_chars()[b].
const std::array<std::string, 256>& byte_chars();

// The regex ByteLevel uses when use_regex is true.
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace ember::tokenizer
