#include "engine/grammar_constraint.h"

namespace ember::engine {

std::shared_ptr<const grammar::Vocabulary> grammar_vocabulary(const tokenizer::Tokenizer& tokenizer) {
  const auto n = static_cast<size_t>(tokenizer.vocab_size());
  std::vector<std::string> bytes(n);
  std::vector<bool> control(n, false);
  for (size_t id = 0; id < n; ++id) {
    const auto i = static_cast<int32_t>(id);
    if (auto b = tokenizer.token_bytes(i)) bytes[id] = std::move(*b);
    control[id] = tokenizer.is_special(i);
  }
  return std::make_shared<const grammar::Vocabulary>(std::move(bytes), control);
}

}  // namespace ember::engine
