// engine::perplexity (llama-perplexity's measure) on the real story-656k model, against per-token
// probabilities computed another way (a fresh prefix pass per scored token), and `ember perplexity`.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "engine/perplexity.h"
#include "run_command.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace ember::engine {
namespace {

// Every golden case's prompt and greedy continuation, one after another: real story text.
std::vector<int32_t> story_tokens() {
  std::ifstream in(test::testdata("golden/story-656k.json"));
  const auto g = nlohmann::json::parse(in);
  std::vector<int32_t> out;
  for (const auto& c : g["cases"]) {
    for (int32_t t : c["prompt_ids"].get<std::vector<int32_t>>()) out.push_back(t);
    for (int32_t t : c["greedy_ids"].get<std::vector<int32_t>>()) out.push_back(t);
  }
  return out;
}

// log p(next | prefix) from the last position of a pass over the prefix alone.
double logprob(model::Model& m, const std::vector<int32_t>& prefix, int32_t next) {
  auto cache = m.make_cache(static_cast<int64_t>(prefix.size()));
  model::KvSequence seq(*cache);
  const std::vector<float> l = m.forward(seq, prefix);
  double top = l[0], z = 0;
  for (float v : l) top = std::max(top, double(v));
  for (float v : l) z += std::exp(double(v) - top);
  return double(l[static_cast<size_t>(next)]) - top - std::log(z);
}

TEST(Perplexity, ScoresTheSecondHalfOfEachWindowAsPrefixPassesDo) {
  auto m = model::Model::load(test::model_dir("story-656k"), {.threads = 1, .progress = {}});
  const std::vector<int32_t> tokens = story_tokens();
  constexpr int64_t kCtx = 24;
  ASSERT_GE(tokens.size(), 3 * kCtx);
  const int32_t bos = 1;
  std::vector<double> seen;
  const PerplexityResult r = perplexity(*m, tokens, kCtx, bos, [&](int64_t w, int64_t n, double ppl) {
    EXPECT_EQ(n, static_cast<int64_t>(tokens.size()) / kCtx);
    EXPECT_EQ(w, static_cast<int64_t>(seen.size()) + 1);
    seen.push_back(ppl);
  });
  EXPECT_EQ(r.windows, static_cast<int64_t>(tokens.size()) / kCtx);
  EXPECT_EQ(r.scored, r.windows * (kCtx - kCtx / 2 - 1));
  EXPECT_EQ(r.running, seen);
  double nll = 0;
  for (int64_t w = 0; w < r.windows; ++w) {
    std::vector<int32_t> window(tokens.begin() + w * kCtx, tokens.begin() + (w + 1) * kCtx);
    window[0] = bos;
    for (int64_t i = kCtx / 2; i < kCtx - 1; ++i)
      nll -= logprob(*m, std::vector<int32_t>(window.begin(), window.begin() + i + 1), window[static_cast<size_t>(i + 1)]);
  }
  EXPECT_NEAR(r.mean_nll, nll / static_cast<double>(r.scored), 1e-4);
  EXPECT_NEAR(r.ppl, std::exp(nll / static_cast<double>(r.scored)), 1e-3 * r.ppl);
  EXPECT_GT(r.ppl_error, 0);
  EXPECT_LT(r.ppl, 50) << "a trained model on its own greedy text";
  EXPECT_THROW(perplexity(*m, std::vector<int32_t>(tokens.begin(), tokens.begin() + kCtx - 1), kCtx, bos), ember::Error);
}

TEST(Perplexity, CommandPrintsProgressAndAJsonSummary) {
  const std::string dir = test::model_dir("story-656k");
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_folder(dir);
  const std::filesystem::path text = std::filesystem::temp_directory_path() / "ember-perplexity-story.txt";
  std::ofstream(text) << tok.decode(story_tokens(), /*skip_special_tokens=*/true);
  const test::Output o =
      test::run_command(test::ember_binary() + " perplexity -m " + dir + " -f " + text.string() + " --ctx 32 -t 1");
  ASSERT_EQ(o.status, 0) << o.out;
  const auto lines = o.out;
  const auto j = nlohmann::json::parse(lines.substr(lines.rfind('{')));
  EXPECT_EQ(j["ctx"], 32);
  EXPECT_EQ(j["windows"].get<int64_t>(), j["tokens"].get<int64_t>() / 32);
  EXPECT_GT(j["ppl"].get<double>(), 1.0);
  EXPECT_LT(j["ppl"].get<double>(), 50.0);
  const test::Output bad =
      test::run_command(test::ember_binary() + " perplexity -m " + dir + " -f " + text.string() + " --ctx 100000 2>&1");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("--ctx"), std::string::npos) << bad.out;
  std::filesystem::remove(text);
}

}  // namespace
}  // namespace ember::engine
