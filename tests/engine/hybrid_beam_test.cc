// Beam search on the hybrid models: every beam forks the recurrent state with its blocks, so the
// scores the search tracks are a fresh pass's, one beam is the goldens' greedy path, and shared
// blocks give what copies give.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "../model/config_testing.h"
#include "engine/beam_generate.h"
#include "sequence_score.h"

namespace ember::engine {
namespace {

using nlohmann::json;

sampling::SamplingParams beams(int32_t n, int64_t max_new) {
  sampling::SamplingParams p;
  p.do_sample = false;
  p.num_beams = n;
  p.num_return_sequences = n;
  p.max_new_tokens = max_new;
  p.length_penalty = 0.0f;
  return p;
}

TEST(HybridBeams, ForkedStatesScoreAsAFreshPass) {
  for (const std::string& path : test::golden_jsons("golden/hybrid")) {
    const json g = json::parse(read_file(path));
    SCOPED_TRACE(g["model"].get<std::string>());
    auto m = model::Model::load(test::model_dir(g["model"].get<std::string>()), {.threads = 2, .progress = {}});
    for (const auto& cs : g["cases"]) {
      SCOPED_TRACE(cs["name"].get<std::string>());
      const auto prompt = cs["prompt_ids"].get<std::vector<int32_t>>();
      const auto greedy = cs["greedy_ids"].get<std::vector<int32_t>>();
      const int64_t n = std::min<int64_t>(12, static_cast<int64_t>(greedy.size()));
      EXPECT_EQ(beam_generate(*m, prompt, beams(1, n)).sequences.at(0).tokens,
                std::vector<int32_t>(greedy.begin(), greedy.begin() + n));
      const BeamGenerateResult shared = beam_generate(*m, prompt, beams(3, n), {.share_blocks = true});
      const BeamGenerateResult copied = beam_generate(*m, prompt, beams(3, n), {.share_blocks = false});
      ASSERT_EQ(shared.sequences.size(), copied.sequences.size());
      for (size_t i = 0; i < shared.sequences.size(); ++i) {
        EXPECT_EQ(shared.sequences[i].tokens, copied.sequences[i].tokens);
        const double fresh = test::sequence_logprob(*m, prompt, shared.sequences[i].tokens);
        EXPECT_NEAR(shared.sequences[i].sum_logprobs, fresh, 1e-3 * std::max(1.0, std::abs(fresh))) << i;
      }
    }
  }
}

}  // namespace
}  // namespace ember::engine
