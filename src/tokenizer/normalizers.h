#pragma once
// tokenizer.json "normalizer": Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents,
// Replace, Prepend.
#include <memory>
#include <string>

#include "tokenizer/json_util.h"

namespace ember::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& s) const = 0;
};

// nullptr for a null normalizer; throws ember::Error naming an unsupported type.
std::unique_ptr<const Normalizer> make_normalizer(const json& j, const std::string& where = "normalizer");

}  // namespace ember::tokenizer
