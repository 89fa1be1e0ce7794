// Phi-3 long-rope from GGUF: tiny-phi3-longrope-bf16 written as convert_hf_to_gguf writes a phi3 file
// (qkv_proj -> attn_qkv, gate_up_proj -> ffn_up, the config's short / long factors as the
// rope_factors_short / _long tensors, original_max_position_embeddings as
// rope.scaling.original_context_length, the attention scaling as rope.scaling.attn_factor) gives the
// golden's last logits of every case, those past the original context too.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf_golden.h"
#include "gguf_test_writer.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "test_paths.h"

namespace ember::model {
namespace {

constexpr uint32_t kF32 = 0, kBF16 = 30, kU32 = 4, kF32Value = 6;

// GGUF names of the folder's tensors (Hugging Face's Phi-3 names).
std::string gguf_name(const std::string& hf) {
  static const std::pair<const char*, const char*> kWhole[] = {
      {"model.embed_tokens.weight", "token_embd.weight"}, {"model.norm.weight", "output_norm.weight"}, {"lm_head.weight", "output.weight"}};
  for (const auto& [from, to] : kWhole)
    if (hf == from) return to;
  static const std::pair<const char*, const char*> kLayer[] = {
      {"input_layernorm", "attn_norm"},    {"post_attention_layernorm", "ffn_norm"}, {"self_attn.qkv_proj", "attn_qkv"},
      {"self_attn.o_proj", "attn_output"}, {"mlp.gate_up_proj", "ffn_up"},           {"mlp.down_proj", "ffn_down"}};
  const std::string prefix = "model.layers.";
  const size_t dot = hf.find('.', prefix.size());
  const std::string layer = hf.substr(prefix.size(), dot - prefix.size()), rest = hf.substr(dot + 1);
  for (const auto& [from, to] : kLayer)
    if (rest == std::string(from) + ".weight") return "blk." + layer + "." + to + ".weight";
  ADD_FAILURE() << "no GGUF name for " << hf;
  return hf;
}

std::string floats(const nlohmann::json& values) {
  std::string out;
  for (const auto& v : values) out += test::f32_bytes(v.get<float>());
  return out;
}

TEST(GgufLongRope, Phi3FileGivesTheGoldenLogits) {
  const std::string dir = test::model_dir("tiny-phi3-longrope-bf16");
  const nlohmann::json cfg = test::read_json(dir + "/config.json");
  const nlohmann::json golden = test::read_json(test::testdata("golden/rope/tiny-phi3-longrope-bf16.json"));
  const int64_t H = cfg["hidden_size"], heads = cfg["num_attention_heads"], head_dim = H / heads;
  const int64_t ctx = cfg["max_position_embeddings"], original = cfg["original_max_position_embeddings"];

  test::GgufWriter w;
  w.kv_string("general.architecture", "phi3");
  w.kv_u32("phi3.embedding_length", static_cast<uint32_t>(H));
  w.kv_u32("phi3.feed_forward_length", cfg["intermediate_size"].get<uint32_t>());
  w.kv_u32("phi3.block_count", cfg["num_hidden_layers"].get<uint32_t>());
  w.kv_u32("phi3.attention.head_count", static_cast<uint32_t>(heads));
  w.kv_u32("phi3.attention.head_count_kv", cfg["num_key_value_heads"].get<uint32_t>());
  w.kv_u32("phi3.context_length", static_cast<uint32_t>(ctx));
  w.kv_u32("phi3.rope.dimension_count",
           static_cast<uint32_t>(static_cast<double>(head_dim) * cfg["partial_rotary_factor"].get<double>()));
  w.kv("phi3.attention.layer_norm_rms_epsilon", kF32Value, test::f32_bytes(cfg["rms_norm_eps"].get<float>()));
  w.kv("phi3.rope.freq_base", kF32Value, test::f32_bytes(cfg["rope_theta"].get<float>()));
  w.kv_u32("phi3.rope.scaling.original_context_length", static_cast<uint32_t>(original));
  const double scale = static_cast<double>(ctx) / static_cast<double>(original);  // as the converter computes it
  w.kv("phi3.rope.scaling.attn_factor", kF32Value,
       test::f32_bytes(static_cast<float>(std::sqrt(1 + std::log(scale) / std::log(static_cast<double>(original))))));
  w.kv("phi3.attention.sliding_window", kU32, test::le(0, 4));
  std::vector<std::string> tokens;
  for (int64_t i = 0; i < cfg["vocab_size"].get<int64_t>(); ++i) tokens.push_back("t" + std::to_string(i));
  w.kv_strings("tokenizer.ggml.tokens", tokens);

  const SafetensorsFile st(dir + "/model.safetensors");
  for (const auto& [name, t] : st.tensors()) {
    ASSERT_EQ(t.dtype, DType::BF16) << name;
    std::vector<uint64_t> dims(t.shape.rbegin(), t.shape.rend());
    w.tensor(gguf_name(name), dims, kBF16, std::string(static_cast<const char*>(t.data), t.size_bytes));
  }
  const nlohmann::json& scaling = cfg["rope_scaling"];
  const test::TempFolder tmp;
  // Without the long factors: refused, naming the tensor.
  w.tensor("rope_factors_short.weight", {scaling["short_factor"].size()}, kF32, floats(scaling["short_factor"]));
  try {
    Model::load(tmp.write("short-only.gguf", w.bytes()));
    ADD_FAILURE() << "a file with short factors alone loads";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rope_factors_long.weight is missing"), std::string::npos) << e.what();
  }
  w.tensor("rope_factors_long.weight", {scaling["long_factor"].size()}, kF32, floats(scaling["long_factor"]));
  const std::string path = tmp.write("phi3-longrope.gguf", w.bytes());

  auto m = Model::load(path, {.threads = 2, .progress = {}});
  EXPECT_EQ(m->config().rope.scaling, RopeScaling::LongRope);
  const nlohmann::json& tol = golden["tolerance"];
  size_t past_original = 0;
  for (const auto& c : golden["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto expected = c["last_logits"].get<std::vector<float>>();
    auto cache = m->make_cache(static_cast<int64_t>(ids.size()) + 1);
    KvSequence seq(*cache);
    const std::vector<float> logits = m->forward(seq, ids);
    ASSERT_EQ(logits.size(), expected.size());
    double max_abs = 0;
    for (float v : expected) max_abs = std::max(max_abs, std::fabs(double(v)));
    EXPECT_LE(test::max_abs_diff(logits, expected), tol["logits_abs"].get<double>() + tol["logits_rel_to_max"].get<double>() * max_abs);
    past_original += static_cast<int64_t>(ids.size()) > original;
  }
  EXPECT_GT(past_original, 0u) << "no case reaches the long factors";
}

}  // namespace
}  // namespace ember::model
