// Text and token ids from strangers through the shared tokenizers: encode, decode and streaming
// decode. Input: one byte choosing the tokenizer, then the text. Checks the documented invariants:
// ids lie in the vocabulary, and the streamed deltas plus flush() equal decode().
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/error.h"
#include "tokenizer/tokenizer.h"

namespace {

using ember::tokenizer::Tokenizer;

// One of each family of the shared tokenizers (byte fallback, byte-level, Metaspace, regex splits).
const std::vector<Tokenizer>& tokenizers() {
  static const std::vector<Tokenizer> all = [] {
    std::vector<Tokenizer> v;
    for (const char* name : {"tinystories-656k", "chat-skills", "gpt2", "qwen3", "mistral-7b-instruct-v0.3",
                             "falcon-7b", "phi-3-mini", "llama-3.2"})
      v.push_back(Tokenizer::from_folder(std::string(EMBER_SHARED_DIR).append("/tokenizers/").append(name)));
    return v;
  }();
  return all;
}

void check_stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip) {
  const std::string whole = tok.decode(ids, skip);
  ember::tokenizer::StreamDecoder sd(tok, skip);
  std::string streamed;
  for (const int32_t id : ids) streamed += sd.push(id);
  streamed += sd.flush();
  if (streamed != whole) std::abort();
}

}  // namespace

// Loading takes seconds under the sanitizers: do it before the first input's timeout starts.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& all = tokenizers();
  const Tokenizer& tok = all[data[0] % all.size()];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const std::vector<int32_t> ids = tok.encode(text, (data[0] / all.size()) % 2 == 1);
    for (const int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size()) std::abort();
    check_stream(tok, ids, false);
    check_stream(tok, ids, true);
  } catch (const ember::Error&) {
  }
  // The same bytes as ids (as a client's detokenize request would send them), in and out of range.
  std::vector<int32_t> ids;
  for (size_t k = 1; k + 1 < size; k += 2)
    ids.push_back(static_cast<int32_t>((data[k] | data[k + 1] << 8) % (tok.vocab_size() + 8)) - 4);
  try {
    check_stream(tok, ids, (data[0] & 1) != 0);
  } catch (const ember::Error&) {
  }
  return 0;
}
