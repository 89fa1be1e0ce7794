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
  // True if this decoder (or a part of it) groups "<0xNN>" byte tokens.
  virtual bool groups_bytes() const { return false; }
};

// nullptr for null; throws ember::Error naming an unsupported type.
std::unique_ptr<const Decoder> make_decoder(const json& j, const std::string& where = "decoder");

// True for a byte-fallback token "<0xNN>"; stores the byte in `byte`.
bool parse_byte_token(const std::string& token, unsigned char& byte);

}  // namespace ember::tokenizer
