// -m FILE.gguf: every file of ../shared/testdata/gguf/*.json gives the expected logits within the
// README's tolerance and the golden greedy continuation (along the golden path for quantized files);
// the F32 GGUF and the folder it was written from agree; Q8_0 / Q4_0 blocks repack losslessly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/mapped_file.h"
#include "engine/generation.h"
#include "gguf_test_writer.h"
#include "kernels/gguf_quants.h"
#include "kernels/kquant.h"
#include "kernels/quant.h"
#include "model/gguf.h"
#include "model/gguf_architecture.h"
#include "model/gguf_config.h"
#include "model/load_tokenizer.h"
#include "model/model.h"
#include "gguf_fixtures.h"
#include "gguf_golden.h"
#include "test_paths.h"

namespace ember::model {
namespace {

using nlohmann::json;

using test::gguf_path;
using test::max_abs_diff;
using test::read_json;
std::vector<std::string> expectation_files() { return test::gguf_expectation_files(); }

TEST(GgufModel, EveryFileMatchesItsExpectedLogits) {
  size_t files = 0;
  for (const std::string& json_path : expectation_files()) {
    const json e = read_json(json_path);
    for (const auto& [file, f] : e["files"].items()) {
      SCOPED_TRACE(file);
      auto m = Model::load(gguf_path(file), {.threads = 2, .progress = {}});
      // The greedy path exactly for float files; for quantized ones, whose closest decisions are within
      // a quantized matmul's rounding, along the golden path (test::Greedy::kForced).
      const bool float_file = test::is_float_file(f["tensor_types"]);
      const test::GoldenResult r = test::run_golden(*m, e, f, float_file ? test::Greedy::kExact : test::Greedy::kForced);
      for (const test::CaseResult& c : r.cases) {
        SCOPED_TRACE(c.prompt);
        ASSERT_EQ(c.vocab, c.expected_vocab);
        EXPECT_LE(c.diff, c.tolerance);
      }
      std::printf("%-28s %-22s %.2f of the tolerance\n", file.c_str(), f["tensor_types"].dump().c_str(), r.worst_ratio());
      EXPECT_EQ(r.greedy, r.expected_greedy);
      EXPECT_LE(r.greedy_worst_gap, r.greedy_bound);
      ++files;
    }
  }
  EXPECT_GT(files, 0u);
}

// The F32 GGUF was written from this folder: same logits (up to float32 summation order) and the same
// chat rendering.
TEST(GgufModel, F32FileAgreesWithItsFolder) {
  const std::string dir = test::model_dir("tiny-kq-llama-f32"), file = gguf_path("tiny-kq-llama-f32.gguf");
  auto a = Model::load(dir, {.threads = 2, .progress = {}});
  auto b = Model::load(file, {.threads = 2, .progress = {}});
  EXPECT_EQ(a->config().vocab_size, b->config().vocab_size);
  EXPECT_EQ(a->config().head_dim, b->config().head_dim);
  EXPECT_EQ(a->config().tie_word_embeddings, b->config().tie_word_embeddings);
  const std::vector<int32_t> ids = {1, 15, 300, 42, 7, 1000, 3};
  auto ca = a->make_cache(16), cb = b->make_cache(16);
  KvSequence sa(*ca), sb(*cb);
  EXPECT_LE(max_abs_diff(a->forward(sa, ids), b->forward(sb, ids)), 1e-3);

  // The same end tokens (the folder's generation_config.json, the GGUF's eos id), and neither has a chat
  // template to render (the chat rendering of a GGUF is compared with its folder's in gguf_cli_test).
  EXPECT_EQ(engine::default_params(dir, a->config()).eos_token_ids, engine::default_params(file, b->config()).eos_token_ids);
  const auto ta = load_tokenizer(dir), tb = load_tokenizer(file);
  EXPECT_EQ(ta.config().chat_template, tb.config().chat_template);
  EXPECT_EQ(ta.config().bos_token, tb.config().bos_token);
  EXPECT_EQ(ta.config().eos_token, tb.config().eos_token);
}

// Every matrix of every shared GGUF file whose block type has a kernel (kernels::has_stored_kernel),
// repacked: every weight of every row equals the reference dequantization.
TEST(GgufModel, BlockRepackIsLossless) {
  kernels::ThreadPool pool(2);
  size_t checked = 0;
  std::set<kernels::GgmlType> types;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(test::shared_path("models", "gguf")))
    if (e.path().extension() == ".gguf") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    const GgufFile g(file);
    for (const GgufTensor& t : g.tensors()) {
      if (!kernels::has_stored_kernel(t.type) || t.shape.size() != 2) continue;
      types.insert(t.type);
      SCOPED_TRACE(t.name);
      const kernels::QuantizedMatrix q = kernels::from_ggml_blocks(t.type, t.data, t.rows(), t.row_length(), pool);
      std::vector<float> ref(static_cast<size_t>(t.row_length())), got(ref.size());
      for (int64_t r = 0; r < t.rows(); ++r) {
        kernels::dequantize_row(t.type, t.data + static_cast<size_t>(r) * t.row_bytes(), t.row_length(), ref.data());
        kernels::copy_row(q.view(), r, got.data());
        ASSERT_EQ(ref, got) << "row " << r;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 10u);
  using kernels::GgmlType;
  // The types the shared files hold (their README's table) that have kernels.
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::IQ4_NL, GgmlType::Q2_K,
                     GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS, GgmlType::IQ3_S})
    EXPECT_TRUE(types.contains(t)) << "no " << kernels::ggml_type_name(t) << " matrix checked";
}

std::string load_error(const std::string& path) {
  try {
    Model::load(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

#define EXPECT_HAS(message, part) EXPECT_NE((message).find(part), std::string::npos) << (message)

TEST(GgufModel, UnsupportedArchitectureAndOptionsNameFileAndKey) {
  const test::TempFolder dir;
  test::GgufWriter bert;
  bert.kv_string("general.architecture", "bert");
  const std::string a = load_error(dir.write("bert.gguf", bert.bytes()));
  EXPECT_HAS(a, "bert.gguf");
  EXPECT_HAS(a, "general.architecture");
  EXPECT_HAS(a, supported_gguf_architectures());

  test::GgufWriter longrope;
  longrope.kv_string("general.architecture", "llama");
  for (const char* k : {"llama.embedding_length", "llama.feed_forward_length", "llama.block_count"}) longrope.kv_u32(k, 64);
  longrope.kv_u32("llama.attention.head_count", 4);
  longrope.kv("llama.attention.layer_norm_rms_epsilon", 6, test::f32_bytes(1e-5f));
  longrope.kv_string("llama.rope.scaling.type", "longrope");
  const std::string b = load_error(dir.write("longrope.gguf", longrope.bytes()));
  EXPECT_HAS(b, "longrope.gguf");
  EXPECT_HAS(b, "llama.rope.scaling.type");
}

// YaRN as llama.cpp writes it: the keys of tiny-qwen3-yarn-bf16's config give its golden's
// frequencies and attention scaling; a key that would change llama.cpp's scaling is refused.
TEST(GgufModel, YarnKeysGiveTransformersFrequencies) {
  const nlohmann::json check =
      nlohmann::json::parse(read_file(test::testdata("golden/rope/tiny-qwen3-yarn-bf16.json")))["rope_check"];
  test::GgufWriter w;
  w.kv_string("general.architecture", "qwen3");
  for (const char* k : {"qwen3.embedding_length", "qwen3.feed_forward_length"}) w.kv_u32(k, 64);
  w.kv_u32("qwen3.block_count", 1);
  w.kv_u32("qwen3.attention.head_count", 4);
  w.kv_u32("qwen3.attention.key_length", 32);
  w.kv_u32("qwen3.context_length", 128);
  w.kv("qwen3.attention.layer_norm_rms_epsilon", 6, test::f32_bytes(1e-6f));
  w.kv("qwen3.rope.freq_base", 6, test::f32_bytes(1e6f));
  w.kv_string("qwen3.rope.scaling.type", "yarn");
  w.kv("qwen3.rope.scaling.factor", 6, test::f32_bytes(4.0f));
  w.kv_u32("qwen3.rope.scaling.original_context_length", 32);
  w.kv_strings("tokenizer.ggml.tokens", {"a", "b"});
  const test::TempFolder dir;
  const ModelConfig c = gguf_config(GgufFile(dir.write("yarn.gguf", w.bytes())));
  EXPECT_EQ(c.rope.scaling, RopeScaling::Yarn);
  EXPECT_NEAR(c.rope.attention_factor, check["attention_scaling"].get<double>(), 1e-15);
  const std::vector<double> got = rope_inv_freq(c, 1);
  ASSERT_EQ(got.size(), check["inv_freq"].size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], check["inv_freq"][i].get<double>(), 1e-13 * got[i]) << i;

  w.kv("qwen3.rope.scaling.yarn_log_multiplier", 6, test::f32_bytes(0.1f));
  EXPECT_HAS(load_error(dir.write("log.gguf", w.bytes())), "qwen3.rope.scaling.yarn_log_multiplier");
}

// Llama 3 scaling as llama.cpp stores it: rope_freqs.weight divides the plain inverse frequencies, which
// gives Hugging Face's llama3 frequencies when the divisors are their ratio.
TEST(GgufModel, RopeFreqsDivideTheInverseFrequencies) {
  ModelConfig l3;
  l3.head_dim = 64;
  l3.max_position_embeddings = 131072;
  l3.rope = RopeConfig{.theta = 500000.0, .scaling = RopeScaling::Llama3, .factor = 8.0, .low_freq_factor = 1.0,
                       .high_freq_factor = 4.0, .original_max_position_embeddings = 8192, .freq_divisors = {}};
  ModelConfig plain = l3;
  plain.rope.scaling = RopeScaling::None;
  const std::vector<double> want = rope_inv_freq(l3, 1), base = rope_inv_freq(plain, 1);
  std::string divisors;
  for (size_t i = 0; i < want.size(); ++i) divisors += test::f32_bytes(static_cast<float>(base[i] / want[i]));

  test::GgufWriter w;
  w.kv_string("general.architecture", "llama");
  for (const char* k : {"llama.embedding_length", "llama.feed_forward_length", "llama.attention.key_length"}) w.kv_u32(k, 64);
  w.kv_u32("llama.block_count", 1);
  w.kv_u32("llama.attention.head_count", 1);
  w.kv("llama.attention.layer_norm_rms_epsilon", 6, test::f32_bytes(1e-5f));
  w.kv("llama.rope.freq_base", 6, test::f32_bytes(500000.0f));
  w.kv_strings("tokenizer.ggml.tokens", {"a", "b"});
  w.tensor("rope_freqs.weight", {32}, 0, divisors);
  const test::TempFolder dir;
  ModelConfig c = gguf_config(GgufFile(dir.write("l3.gguf", w.bytes())));
  ASSERT_EQ(c.rope.freq_divisors.size(), want.size());
  const std::vector<double> got = rope_inv_freq(c, 1);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6 * want[i]) << i;  // float32 divisors
}

}  // namespace
}  // namespace ember::model
