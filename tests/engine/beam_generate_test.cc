// Beam search on story-656k: one beam is greedy, four beams find sequences the model scores at least
// as high, the scores it reports are the model's, and sharing cache blocks changes nothing.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "engine/beam_generate.h"
#include "engine/session.h"
#include "sequence_score.h"
#include "test_paths.h"

namespace ember::engine {
namespace {

struct Fixture {
  std::string dir = test::model_dir("story-656k");
  std::unique_ptr<model::Model> model = model::Model::load(dir, {.threads = 1, .progress = {}});
  tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_folder(dir);

  sampling::SamplingParams params(int32_t beams, int32_t max_new) const {
    sampling::SamplingParams p = sampling::from_generation_config(dir);
    sampling::merge_eos(p, model->config().eos_token_ids);
    p.do_sample = false;
    p.num_beams = beams;
    p.max_new_tokens = max_new;
    return p;
  }

  // Sum of log P(tokens[i] | prompt, tokens[<i]) from one fresh full pass.
  double score(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens) const {
    return test::sequence_logprob(*model, prompt, tokens);
  }
};

const char* const kPrompts[] = {"Once upon a time", "The little dog", "Tom and Sue went to the park. They",
                                "One day, a bird"};

TEST(BeamGenerate, OneBeamIsGreedy) {
  Fixture f;
  for (const char* text : kPrompts) {
    const std::vector<int32_t> prompt = f.tok.encode(text, true);
    Session session(*f.model, f.tok);
    const GenerationResult greedy = session.generate(prompt, f.params(1, 48));
    const BeamGenerateResult beam = beam_generate(*f.model, prompt, f.params(1, 48));
    ASSERT_EQ(beam.sequences.size(), 1u);
    EXPECT_EQ(beam.sequences[0].tokens, greedy.tokens) << text;
  }
}

TEST(BeamGenerate, FourBeamsScoreAtLeastGreedyAndReportTheModelsScore) {
  Fixture f;
  for (const char* text : kPrompts) {
    const std::vector<int32_t> prompt = f.tok.encode(text, true);
    Session session(*f.model, f.tok);
    sampling::SamplingParams p = f.params(4, 32);
    p.length_penalty = 0.0f;  // rank by total log-probability, the quantity compared
    const GenerationResult greedy = session.generate(prompt, f.params(1, 32));
    const BeamGenerateResult beam = beam_generate(*f.model, prompt, p);
    ASSERT_FALSE(beam.sequences.empty());
    const sampling::BeamHypothesis& best = beam.sequences[0];
    const double best_score = f.score(prompt, best.tokens);
    const double greedy_score = f.score(prompt, greedy.tokens);
    EXPECT_GE(best_score, greedy_score - 1e-4) << text;
    // The cumulative log-probability the search tracked over forked caches is what a fresh pass gives.
    EXPECT_NEAR(best.sum_logprobs, best_score, 1e-3 * std::max(1.0, std::abs(best_score))) << text;
    std::printf("%-40s greedy %8.3f (%zu tokens)  4 beams %8.3f (%zu tokens)\n", text, greedy_score,
                greedy.tokens.size(), best_score, best.tokens.size());
  }
}

TEST(BeamGenerate, SharedBlocksGiveTheSameResultAsCopies) {
  Fixture f;
  const std::vector<int32_t> prompt = f.tok.encode("Once upon a time, there was a little girl named Lily. She", true);
  sampling::SamplingParams p = f.params(4, 40);
  p.num_return_sequences = 4;
  const BeamGenerateResult shared = beam_generate(*f.model, prompt, p, {.share_blocks = true});
  const BeamGenerateResult copied = beam_generate(*f.model, prompt, p, {.share_blocks = false});
  ASSERT_EQ(shared.sequences.size(), 4u);
  ASSERT_EQ(copied.sequences.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(shared.sequences[i].tokens, copied.sequences[i].tokens) << i;
    EXPECT_EQ(shared.sequences[i].sum_logprobs, copied.sequences[i].sum_logprobs) << i;
  }
  // The prompt's blocks are held once, not once per beam.
  EXPECT_LT(shared.peak_cache_blocks, copied.peak_cache_blocks);
  std::printf("peak KV blocks: shared %lld, copied %lld\n", static_cast<long long>(shared.peak_cache_blocks),
              static_cast<long long>(copied.peak_cache_blocks));
}

TEST(BeamGenerate, RepetitionPenaltyActsOnTheBeams) {
  Fixture f;
  const std::vector<int32_t> prompt = f.tok.encode("Once upon a time", true);
  sampling::SamplingParams p = f.params(3, 60);
  const BeamGenerateResult plain = beam_generate(*f.model, prompt, p);
  p.repetition_penalty = 5.0f;
  const BeamGenerateResult penalised = beam_generate(*f.model, prompt, p);
  // A strong penalty on log-probabilities (all negative: multiplied) keeps tokens from recurring.
  auto repeats = [](const std::vector<int32_t>& t) {
    std::vector<int32_t> s = t;
    std::sort(s.begin(), s.end());
    return static_cast<size_t>(s.end() - std::unique(s.begin(), s.end()));
  };
  EXPECT_LT(repeats(penalised.sequences[0].tokens), repeats(plain.sequences[0].tokens));
}

TEST(BeamGenerate, UnsupportedOptionsAndLongPromptsAreClearErrors) {
  Fixture f;
  const std::vector<int32_t> prompt = f.tok.encode("Once upon a time", true);
  sampling::SamplingParams p = f.params(2, 8);
  p.do_sample = true;
  p.temperature = 0.8f;
  EXPECT_THROW(beam_generate(*f.model, prompt, p), Error);
  p = f.params(2, 8);
  p.stop_strings = {"."};
  EXPECT_THROW(beam_generate(*f.model, prompt, p), Error);
  p = f.params(2, 8);
  try {
    beam_generate(*f.model, prompt, p, {.share_blocks = true, .context_tokens = 3});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ember::engine
