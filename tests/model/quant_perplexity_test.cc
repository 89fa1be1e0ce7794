// Quantized weights and KV caches on a real trained model (story-656k): perplexity of a fixed text (every golden
// prompt followed by its greedy continuation) against float32, within the stated increase.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/model.h"
#include "test_paths.h"

namespace ember::model {
namespace {

double perplexity(Model& m, const nlohmann::json& golden) {
  double nll = 0;
  int64_t count = 0;
  const int64_t V = m.config().vocab_size;
  for (const auto& cs : golden["cases"]) {
    std::vector<int32_t> ids = cs["prompt_ids"].get<std::vector<int32_t>>();
    for (int32_t t : cs["greedy_ids"].get<std::vector<int32_t>>()) ids.push_back(t);
    auto cache = m.make_cache(static_cast<int64_t>(ids.size()));
    KvSequence seq(*cache);
    std::vector<float> logits(ids.size() * V);
    ForwardItem item{&seq, ids, logits.data(), true};
    m.forward(std::span<ForwardItem>(&item, 1));
    for (size_t p = 0; p + 1 < ids.size(); ++p) {
      const float* l = logits.data() + p * V;
      double mx = l[0], z = 0;
      for (int64_t i = 0; i < V; ++i) mx = std::max(mx, double(l[i]));
      for (int64_t i = 0; i < V; ++i) z += std::exp(double(l[i]) - mx);
      nll += std::log(z) + mx - l[ids[p + 1]];
      ++count;
    }
  }
  return std::exp(nll / static_cast<double>(count));
}

TEST(QuantizedModel, PerplexityIncreaseOnStory656kIsBounded) {
  std::ifstream in(test::testdata("golden/story-656k.json"));
  const nlohmann::json g = nlohmann::json::parse(in);
  const std::string dir = test::model_dir("story-656k");
  auto f32 = Model::load(dir, {.threads = 2, .progress = {}, .quantize = kernels::QType::None});
  auto q8 = Model::load(dir, {.threads = 2, .progress = {}, .quantize = kernels::QType::Q8_0});
  auto q4 = Model::load(dir, {.threads = 2, .progress = {}, .quantize = kernels::QType::Q4_0});
  EXPECT_LT(q8->decode_weight_bytes(), f32->decode_weight_bytes() / 3);
  EXPECT_LT(q4->decode_weight_bytes(), q8->decode_weight_bytes());
  const double p32 = perplexity(*f32, g), p8 = perplexity(*q8, g), p4 = perplexity(*q4, g);
  std::printf("story-656k perplexity: f32 %.4f  q8_0 %.4f (%+.2f%%)  q4_0 %.4f (%+.2f%%)\n", p32, p8,
              100 * (p8 / p32 - 1), p4, 100 * (p4 / p32 - 1));
  EXPECT_LT(p8, p32 * 1.01) << "q8_0 may raise perplexity by at most 1%";
  EXPECT_LT(p4, p32 * 1.10) << "q4_0 may raise perplexity by at most 10%";
}

// The KV cache types' cost on the same text: F16 (the commands' default) and Q8_0 against F32.
TEST(QuantizedKvCache, PerplexityIncreaseOnStory656kIsBounded) {
  std::ifstream in(test::testdata("golden/story-656k.json"));
  const nlohmann::json g = nlohmann::json::parse(in);
  const std::string dir = test::model_dir("story-656k");
  auto load = [&](kernels::KvType t) { return Model::load(dir, {.threads = 2, .progress = {}, .kv_dtype = t}); };
  auto f32 = load(kernels::KvType::F32), f16 = load(kernels::KvType::F16), q8 = load(kernels::KvType::Q8_0);
  EXPECT_LT(KvCache::bytes_per_token(q8->config(), kernels::KvType::Q8_0),
            KvCache::bytes_per_token(f16->config(), kernels::KvType::F16));
  const double p32 = perplexity(*f32, g), p16 = perplexity(*f16, g), p8 = perplexity(*q8, g);
  std::printf("story-656k perplexity by KV type: f32 %.4f  f16 %.4f (%+.3f%%)  q8_0 %.4f (%+.3f%%)\n", p32, p16,
              100 * (p16 / p32 - 1), p8, 100 * (p8 / p32 - 1));
  EXPECT_LT(std::fabs(p16 / p32 - 1), 0.001) << "f16 keys and values may move perplexity by at most 0.1%";
  EXPECT_LT(p8, p32 * 1.01) << "q8_0 keys and values may raise perplexity by at most 1%";
}

}  // namespace
}  // namespace ember::model
