#pragma once
// What beam-search tests compare a search's tracked score with: a sequence's log-probability from
// one fresh full pass.
#include <span>
#include <vector>

#include "model/model.h"
#include "sampling/beam_search.h"

namespace ember::test {

// Sum of log P(tokens[i] | prompt, tokens[<i]) from one fresh full pass.
inline double sequence_logprob(model::Model& m, const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens) {
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), tokens.begin(), tokens.end());
  const auto cache = m.make_cache(static_cast<int64_t>(all.size()));
  model::KvSequence seq(*cache);
  const size_t vocab = static_cast<size_t>(m.config().vocab_size);
  std::vector<float> logits(all.size() * vocab);
  model::ForwardItem item{&seq, all, logits.data(), true};
  m.forward(std::span<model::ForwardItem>(&item, 1));
  double sum = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::span<float> row(logits.data() + (prompt.size() - 1 + i) * vocab, vocab);
    sampling::log_softmax(row, row);
    sum += row[static_cast<size_t>(tokens[i])];
  }
  return sum;
}

}  // namespace ember::test
