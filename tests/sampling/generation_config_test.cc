#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "sampling/generation_config.h"
#include "test_paths.h"

namespace ember::sampling {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::vector<int32_t> id_list(const json& v) {
  if (v.is_array()) return v.get<std::vector<int32_t>>();
  return {v.get<int32_t>()};
}

// Every model folder of ../shared: the parsed values are the file's (or the defaults where absent).
TEST(GenerationConfig, ReadsEverySharedModel) {
  size_t seen = 0;
  for (const auto& entry : fs::directory_iterator(::ember::test::shared_dir() + "/models")) {
    const fs::path file = entry.path() / "generation_config.json";
    if (!fs::exists(file)) continue;
    ++seen;
    const json j = json::parse(std::ifstream(file));
    const SamplingParams p = from_generation_config(entry.path().string());
    const SamplingParams d;
    SCOPED_TRACE(file.string());
    EXPECT_EQ(p.do_sample, j.value("do_sample", d.do_sample));
    EXPECT_EQ(p.temperature, j.value("temperature", d.temperature));
    EXPECT_EQ(p.top_k, j.value("top_k", d.top_k));
    EXPECT_EQ(p.top_p, j.value("top_p", d.top_p));
    EXPECT_EQ(p.num_beams, j.value("num_beams", d.num_beams));
    if (j.contains("eos_token_id")) {
      EXPECT_EQ(p.eos_token_ids, id_list(j["eos_token_id"]));
    }
    if (j.contains("max_new_tokens")) {
      EXPECT_EQ(p.max_new_tokens, j["max_new_tokens"].get<int32_t>());
    }
    EXPECT_FALSE(p.sampling() && !j.value("do_sample", false));  // no do_sample -> greedy

    // config.json's eos ids are merged after generation_config.json's, without repeats.
    const json config = json::parse(std::ifstream(entry.path() / "config.json"));
    SamplingParams merged = p;
    if (config.contains("eos_token_id")) merge_eos(merged, id_list(config["eos_token_id"]));
    for (int32_t id : p.eos_token_ids) EXPECT_NE(std::find(merged.eos_token_ids.begin(), merged.eos_token_ids.end(), id),
                                                 merged.eos_token_ids.end());
    EXPECT_TRUE(std::equal(p.eos_token_ids.begin(), p.eos_token_ids.end(), merged.eos_token_ids.begin()));
    std::vector<int32_t> sorted = merged.eos_token_ids;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
  }
  EXPECT_GT(seen, 0u);
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ember_genconfig_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& text) { std::ofstream(dir_ / "generation_config.json") << text; }
  // Parses and returns the error message ("" when it parsed).
  std::string error_of(const std::string& text) {
    write(text);
    try {
      from_generation_config(dir_.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(TempDir, MissingFileGivesDefaults) {
  const SamplingParams p = from_generation_config(dir_.string());
  EXPECT_FALSE(p.do_sample);
  EXPECT_EQ(p.top_k, 50);
  EXPECT_TRUE(p.eos_token_ids.empty());
}

TEST_F(TempDir, ReadsAllKnownFields) {
  write(R"({"do_sample": true, "temperature": 0.6, "top_k": 20, "top_p": 0.95, "min_p": 0.0,
            "typical_p": 0.9, "repetition_penalty": 1.1, "max_new_tokens": 64, "eos_token_id": 7,
            "stop_strings": "###", "num_beams": 4, "length_penalty": 0.5, "early_stopping": "never",
            "num_return_sequences": 2, "pad_token_id": null, "unknown_field": [1, 2]})");
  const SamplingParams p = from_generation_config(dir_.string());
  EXPECT_TRUE(p.sampling());
  EXPECT_FLOAT_EQ(p.temperature, 0.6f);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);
  EXPECT_FLOAT_EQ(p.typical_p, 0.9f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
  EXPECT_EQ(p.max_new_tokens, 64);
  EXPECT_EQ(p.eos_token_ids, std::vector<int32_t>{7});
  EXPECT_EQ(p.stop_strings, std::vector<std::string>{"###"});
  EXPECT_EQ(p.num_beams, 4);
  EXPECT_FLOAT_EQ(p.length_penalty, 0.5f);
  EXPECT_EQ(p.early_stopping, EarlyStopping::kNever);
  EXPECT_EQ(p.num_return_sequences, 2);
  write(R"({"early_stopping": true, "top_k": null})");
  EXPECT_EQ(from_generation_config(dir_.string()).early_stopping, EarlyStopping::kTrue);
  EXPECT_EQ(from_generation_config(dir_.string()).top_k, 50);  // null = absent
}

TEST_F(TempDir, BadTypesNameTheFileAndField) {
  struct Bad {
    const char* json;
    const char* field;
  };
  const Bad cases[] = {
      {R"({"temperature": "hot"})", "temperature"},
      {R"({"do_sample": 1})", "do_sample"},
      {R"({"top_k": 2.5})", "top_k"},
      {R"({"eos_token_id": [1, "2"]})", "eos_token_id"},
      {R"({"eos_token_id": "2"})", "eos_token_id"},
      {R"({"stop_strings": [1]})", "stop_strings"},
      {R"({"early_stopping": "sometimes"})", "early_stopping"},
      {R"({"max_new_tokens": 1e12})", "max_new_tokens"},
      {R"({"top_p": 1.5})", "top_p"},
      {R"({"num_beams": 0})", "num_beams"},
  };
  for (const Bad& b : cases) {
    const std::string msg = error_of(b.json);
    EXPECT_NE(msg.find("generation_config.json"), std::string::npos) << b.json << " -> " << msg;
    EXPECT_NE(msg.find(b.field), std::string::npos) << b.json << " -> " << msg;
  }
  EXPECT_NE(error_of("{not json").find("generation_config.json"), std::string::npos);
  EXPECT_NE(error_of("[1, 2]").find("generation_config.json"), std::string::npos);
}

TEST(GenerationConfig, MergeEosKeepsOrderWithoutRepeats) {
  SamplingParams p;
  p.eos_token_ids = {2049, 2};
  merge_eos(p, std::vector<int32_t>{2049, 5, 5});
  EXPECT_EQ(p.eos_token_ids, (std::vector<int32_t>{2049, 2, 5}));
}

// Given the vocabulary size, validate() refuses a logit_bias id outside it before any logits exist.
TEST(SamplingParams, ValidateWithVocabBoundsLogitBias) {
  SamplingParams p;
  p.logit_bias[999999] = 5.0f;
  EXPECT_NO_THROW(p.validate());
  try {
    p.validate(2048);
    FAIL() << "an id outside the vocabulary passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("logit_bias: token id 999999 is outside the vocabulary of 2048"),
              std::string::npos) << e.what();
  }
  p.logit_bias = {{2047, 1.0f}};
  EXPECT_NO_THROW(p.validate(2048));
}

}  // namespace
}  // namespace ember::sampling
