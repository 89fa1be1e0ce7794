// Keys and values stored as F16, BF16 or Q8_0 against F32 on every golden model: the same logits within a
// tolerance sized by the format's rounding, and the same greedy choice wherever F32's top two logits
// are clearly apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "model/model.h"
#include "test_paths.h"

namespace ember::model {
namespace {

// --kv-dtype's names, its check and parse_kv_dtype's error come from one table.
TEST(KvTypeNames, EveryNameParsesBackAndTheErrorListsThem) {
  ASSERT_EQ(kernels::kv_type_names().size(), 4u);
  for (const char* name : kernels::kv_type_names()) EXPECT_STREQ(kernels::kv_type_name(parse_kv_dtype(name)), name);
  try {
    parse_kv_dtype("f8");
    FAIL() << "f8 parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must be f32, f16, bf16 or q8_0 (got 'f8')"), std::string::npos) << e.what();
  }
}

// Logits of every position of every golden prompt (prompt followed by its greedy continuation).
std::vector<std::vector<float>> all_logits(Model& m, const nlohmann::json& golden) {
  std::vector<std::vector<float>> out;
  for (const auto& cs : golden["cases"]) {
    std::vector<int32_t> ids = cs["prompt_ids"].get<std::vector<int32_t>>();
    for (int32_t t : cs["greedy_ids"].get<std::vector<int32_t>>()) ids.push_back(t);
    auto cache = m.make_cache(static_cast<int64_t>(ids.size()));
    KvSequence seq(*cache);
    out.emplace_back(ids.size() * static_cast<size_t>(m.config().vocab_size));
    ForwardItem item{&seq, ids, out.back().data(), true};
    m.forward(std::span<ForwardItem>(&item, 1));
  }
  return out;
}

TEST(KvDtype, HalfPrecisionCacheStaysCloseToFloat32) {
  for (const auto& entry : std::filesystem::directory_iterator(test::testdata("golden"))) {
    if (entry.path().extension() != ".json") continue;
    const std::string name = entry.path().stem().string();
    std::ifstream in(entry.path());
    const nlohmann::json g = nlohmann::json::parse(in);
    auto f32 = Model::load(test::model_dir(name), {.threads = 2, .progress = {}, .kv_dtype = kernels::KvType::F32});
    const auto ref = all_logits(*f32, g);
    // Relative rounding of the stored keys and values: 2^-11 (F16), 2^-8 (BF16); the bound allows
    // it to grow through the layers and the attention sums, scaled by the logits' magnitude.
    // Q8_0: half a step of 1/127 of each block's maximum, 2^-8 of the maximum rather than of each
    // value, so small values move relatively more: 2^-7.
    for (auto [type, unit] : {std::pair{kernels::KvType::F16, 0x1p-11}, std::pair{kernels::KvType::BF16, 0x1p-8},
                              std::pair{kernels::KvType::Q8_0, 0x1p-7}}) {
      auto m = Model::load(test::model_dir(name), {.threads = 2, .progress = {}, .kv_dtype = type});
      EXPECT_EQ(m->make_cache(1)->type(), type);
      const auto got = all_logits(*m, g);
      const int64_t V = m->config().vocab_size;
      double worst = 0, scale = 0;
      for (size_t c = 0; c < ref.size(); ++c)
        for (size_t i = 0; i < ref[c].size(); ++i) {
          worst = std::max(worst, std::fabs(double(got[c][i]) - ref[c][i]));
          scale = std::max(scale, std::fabs(double(ref[c][i])));
        }
      const double bound = 16 * unit * (1 + scale);
      std::printf("%s kv %s: max |logit diff| %.5f (bound %.5f)\n", name.c_str(), kernels::kv_type_name(type), worst, bound);
      EXPECT_LE(worst, bound) << name << " " << kernels::kv_type_name(type);
      for (size_t c = 0; c < ref.size(); ++c)
        for (size_t p = 0; p * V < ref[c].size(); ++p) {
          const float* r = ref[c].data() + p * V;
          std::vector<float> top(r, r + V);
          std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
          if (top[0] - top[1] <= 2 * bound) continue;
          const float* q = got[c].data() + p * V;
          EXPECT_EQ(std::max_element(q, q + V) - q, std::max_element(r, r + V) - r) << name << " case " << c << " pos " << p;
        }
    }
  }
}

}  // namespace
}  // namespace ember::model
