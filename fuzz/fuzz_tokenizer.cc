// tokenizer.json (+ tokenizer_config.json) loading, then encode and decode with what was loaded.
// Input: tokenizer.json [NUL tokenizer_config.json [NUL text]].
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "fuzz_util.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using ember::tokenizer::Tokenizer;
  const auto [json, rest] = ember::fuzz::split_at_nul(data, size);
  const auto [config, text_part] =
      ember::fuzz::split_at_nul(reinterpret_cast<const uint8_t*>(rest.data()), rest.size());
  std::optional<Tokenizer> tok;
  try {
    tok.emplace(Tokenizer::from_json(std::string(json), std::string(config)));
  } catch (const ember::Error&) {
    return 0;
  }
  const std::string text = text_part.empty() ? std::string("Hello <s> world!\n 12345 héllo\t\t<|im_end|>") : std::string(text_part);
  try {
    for (const bool special : {false, true}) {
      const std::vector<int32_t> ids = tok->encode(text, special);
      for (const int32_t id : ids)
        if (id < 0 || id >= tok->vocab_size()) std::abort();
      (void)tok->decode(ids, false);
      (void)tok->decode(ids, true);
      ember::tokenizer::StreamDecoder sd(*tok, special);
      for (const int32_t id : ids) (void)sd.push(id);
      (void)sd.flush();
    }
  } catch (const ember::Error&) {
  }
  return 0;
}
