#pragma once
// tokenizer.json "decoder": ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence.
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_util.h"

namespace ember::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the token strings (Hugging Face decode_chain); the result is their concatenation.
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
  // The same, but bytes that are not valid UTF-8 on their own stay as they are (no U+FFFD): a
  // token's exact bytes, for grammars that may see a character split across tokens.
  virtual void decode_chain_bytes(std::vector<std::string>& tokens) const { decode_chain(tokens); }
  // True if this decoder (or a part of it) groups "<0xNN>" byte tokens.
  virtual bool groups_bytes() const { return false; }
};

// nullptr for null; throws ember::Error naming an unsupported type.
std::unique_ptr<const Decoder> make_decoder(const json& j, const std::string& where = "decoder");

// True for a byte-fallback token "<0xNN>"; stores the byte in `byte`.
bool parse_byte_token(const std::string& token, unsigned char& byte);

}  // namespace ember::tokenizer
