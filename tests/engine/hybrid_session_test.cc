// A chat on a hybrid model (Gated DeltaNet layers, whose recurrent state cannot be cut back like KV
// blocks): a turn whose prompt departs from what the cache holds re-evaluates only the tokens after
// the deepest state snapshot at or below the shared prefix, and gives the logits of a fresh run.
#include <gtest/gtest.h>

#include <cstdio>

#include "engine/session.h"
#include "test_paths.h"

namespace ember::engine {
namespace {

// A conversation of about 2,000 tokens: a 1,000-token first prompt, a 500-token greedy reply, then
// a second prompt that re-renders the reply without its last tokens (as templates that strip
// reasoning or end-of-turn marks do) and adds a 500-token turn.
struct Turns {
  std::vector<int32_t> first, second;
  size_t shared = 0;  // tokens the second prompt shares with what the cache holds
};

Turns conversation(Session& s, int32_t vocab) {
  Turns t;
  for (int i = 0; i < 1000; ++i) t.first.push_back(3 + (i * 31) % (vocab - 3));
  sampling::SamplingParams params;
  params.temperature = 0;
  params.max_new_tokens = 500;
  params.logit_bias = {{2, -100.0f}};  // no end token: the reply runs its whole length
  const GenerationResult r = s.generate(t.first, params);
  EXPECT_EQ(r.tokens.size(), 500u);
  t.second = t.first;
  t.second.insert(t.second.end(), r.tokens.begin(), r.tokens.end() - 7);
  t.shared = t.second.size();
  for (int i = 0; i < 500; ++i) t.second.push_back(3 + (i * 17) % (vocab - 3));
  return t;
}

TEST(HybridSession, SecondTurnRestartsFromTheDeepestSnapshot) {
  const std::string dir = test::model_dir("tiny-qwen35-bf16");
  auto model = model::Model::load(dir, {.threads = 2, .progress = {}});
  const auto tok = tokenizer::Tokenizer::from_folder(dir);
  const auto vocab = static_cast<int32_t>(model->config().vocab_size);

  Session with(*model, tok, 4096);
  const Turns t = conversation(with, vocab);
  const int64_t block = model::KvCache::kDefaultBlock;
  const int64_t deepest = static_cast<int64_t>(t.shared) / block * block;  // snapshots sit at block boundaries
  const int64_t prefilled = with.prefill(t.second);
  EXPECT_EQ(prefilled, static_cast<int64_t>(t.second.size()) - deepest);

  Session without(*model, tok, 4096);
  without.set_state_snapshots(0);
  ASSERT_EQ(conversation(without, vocab).second, t.second);
  const int64_t recomputed = without.prefill(t.second);
  EXPECT_EQ(recomputed, static_cast<int64_t>(t.second.size()));  // cut back to 0: all of it again

  Session fresh(*model, tok, 4096);
  EXPECT_EQ(fresh.prefill(t.second), static_cast<int64_t>(t.second.size()));
  std::printf("turn 2 of a %zu-token conversation: %lld tokens prefilled with state snapshots, %lld without\n",
              t.second.size(), static_cast<long long>(prefilled), static_cast<long long>(recomputed));
}

}  // namespace
}  // namespace ember::engine
