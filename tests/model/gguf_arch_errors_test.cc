// The GGUF architectures beyond llama / qwen2 / qwen3, fuzzed: copies of the shared family files with a
// metadata key dropped, mistyped or out of range, or a tensor dropped or re-shaped, each refused with an
// ember::Error naming the file and the key or tensor. And the forms of gemma3's window pattern that no
// shared file has (a uint32 period, no key). Gemma 4: its per-layer arrays, pattern, KV sharing and
// per-layer embeddings; a file without attn_v using the keys as values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf_fixtures.h"
#include "gguf_rewrite.h"
#include "model/gguf.h"
#include "model/gguf_architecture.h"
#include "model/gguf_config.h"
#include "model/model.h"

namespace ember::model {
namespace {

using test::GgufEdits;
using test::GgufValue;

#define EXPECT_HAS(message, part) EXPECT_NE((message).find(part), std::string::npos) << (message)

GgufValue u32(int64_t v) { return {4, 0, v}; }
GgufValue i32(int64_t v) { return {5, 0, v}; }
GgufValue f32(double v) { return {6, 0, v}; }
GgufValue u32s(std::vector<int64_t> v) { return {9, 4, v}; }
GgufValue bools(std::vector<bool> v) { return {9, 7, v}; }

class GgufArchErrors : public ::testing::Test {
 protected:
  // `file` of ../shared/models/gguf with `edits`, written to a temporary folder.
  std::string copy(const std::string& file, const GgufEdits& edits) const {
    const GgufFile g(test::gguf_path(file));
    return dir_.write("edited-" + file, test::rewrite_gguf(g, edits));
  }
  // The message loading the edited copy gives (naming the copy), or "no error".
  std::string load_error(const std::string& file, const GgufEdits& edits) const {
    const std::string path = copy(file, edits);
    try {
      Model::load(path, {.threads = 1, .progress = {}});
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_HAS(m, path);
      return m;
    }
    return "no error";
  }
  // Loading `file` with `edits` fails naming `what` (the key or tensor) and saying `says`.
  void expect_refused(const std::string& file, const GgufEdits& edits, const std::string& what, const char* says) const {
    SCOPED_TRACE(file + " " + what);
    const std::string m = load_error(file, edits);
    EXPECT_HAS(m, what);
    EXPECT_HAS(m, says);
    std::printf("  %s\n", m.substr(m.find(": ") + 2).c_str());
  }
  // A key dropped (nullopt) or given another value; a tensor dropped (nullopt) or given other GGUF dims.
  struct KeyCase {
    const char* file;
    std::string key;
    std::optional<GgufValue> value;
    const char* says;  // besides the key
  };
  struct TensorCase {
    const char* file;
    std::string tensor;
    std::optional<std::vector<uint64_t>> dims;
    const char* says;
  };
  void refuse_keys(std::span<const KeyCase> cases) const {
    for (const KeyCase& c : cases) {
      GgufEdits edits;
      edits.keys[c.key] = c.value;
      expect_refused(c.file, edits, c.key, c.says);
    }
  }
  void refuse_tensors(std::span<const TensorCase> cases) const {
    for (const TensorCase& c : cases) {
      GgufEdits edits;
      edits.tensors[c.tensor] = c.dims;
      expect_refused(c.file, edits, c.tensor, c.says);
    }
  }
  test::TempFolder dir_;
};

TEST_F(GgufArchErrors, UneditedCopiesLoad) {
  for (const char* file : {"tiny-kq-gemma3-bf16.gguf", "tiny-kq-phi3-bf16.gguf", "tiny-kq-qwen3moe-bf16.gguf",
                           "tiny-gemma4-q8_0.gguf", "tiny-qwen3next-q8_0.gguf", "tiny-qwen35-q8_0.gguf"}) {
    SCOPED_TRACE(file);
    EXPECT_EQ(load_error(file, {}), "no error");
  }
}

TEST_F(GgufArchErrors, MetadataNamesTheKey) {
  const std::string supported = supported_gguf_architectures();
  const KeyCase cases[] = {
      {"tiny-kq-qwen3moe-bf16.gguf", "qwen3moe.expert_count", std::nullopt, "mixture of experts"},
      {"tiny-kq-qwen3moe-bf16.gguf", "qwen3moe.expert_used_count", std::nullopt, "missing"},
      {"tiny-kq-qwen3moe-bf16.gguf", "qwen3moe.expert_used_count", u32(5), "more than"},
      {"tiny-kq-qwen3moe-bf16.gguf", "qwen3moe.expert_feed_forward_length", std::nullopt, "missing"},
      {"tiny-kq-qwen3moe-bf16.gguf", "qwen3moe.expert_feed_forward_length", u32(0), "positive"},
      {"tiny-kq-mixtral-bf16.gguf", "llama.expert_used_count", std::nullopt, "missing"},
      {"tiny-kq-mixtral-bf16.gguf", "llama.expert_count", i32(-1), "negative"},
      {"tiny-qwen2-bf16.gguf", "qwen2.expert_count", u32(4), "no mixture-of-experts form"},
      {"tiny-kq-phi3-bf16.gguf", "phi3.rope.dimension_count", u32(47), "even"},
      {"tiny-kq-phi3-bf16.gguf", "phi3.rope.dimension_count", u32(72), "at most the head dimension"},
      {"tiny-kq-phi3-bf16.gguf", "phi3.attn_logit_softcapping", f32(50), "not supported for arch phi3"},
      {"tiny-kq-phi3-bf16.gguf", "phi3.attention.sliding_window_pattern", u32(2), "not supported for arch phi3"},
      {"tiny-kq-smollm3-bf16.gguf", "smollm3.rope.dimension_count", u32(32), "partial rotary"},
      {"tiny-kq-gemma2-bf16.gguf", "gemma2.attn_logit_softcapping", f32(-1), "positive"},
      {"tiny-kq-gemma2-bf16.gguf", "gemma2.final_logit_softcapping", GgufValue{8, 0, "30"}, "float"},
      {"tiny-kq-gemma2-bf16.gguf", "gemma2.attention.sliding_window", i32(-4), "negative"},
      {"tiny-kq-gemma3-bf16.gguf", "gemma3.attention.sliding_window_pattern", GgufValue{9, 7, {true}}, "1 entries for 2 layers"},
      {"tiny-kq-gemma3-bf16.gguf", "gemma3.attention.sliding_window_pattern", GgufValue{9, 4, {1, 0}}, "bools"},
      {"tiny-kq-gemma3-bf16.gguf", "gemma3.attention.sliding_window_pattern", u32(0), "positive period"},
      {"tiny-kq-gemma3-bf16.gguf", "gemma3.rope.freq_base_swa", f32(-1), "positive"},
      {"tiny-kq-gemma3-bf16.gguf", "gemma3.embedding_length", std::nullopt, "missing"},
      {"tiny-kq-smollm3-bf16.gguf", "general.architecture", GgufValue{8, 0, "smollm4"}, supported.c_str()},
      {"tiny-qwen3-bf16.gguf", "qwen3.feed_forward_length", u32s({96, 96}), "array per layer"},
      // They loaded, and every logit came out NaN ("sampler: no token has a finite logit").
      {"tiny-qwen3-bf16.gguf", "qwen3.rope.freq_base", f32(0), "must be positive (got 0)"},
      {"tiny-qwen3-bf16.gguf", "qwen3.rope.freq_base", f32(NAN), "must be positive (got nan)"},
      {"tiny-qwen3-bf16.gguf", "qwen3.attention.layer_norm_rms_epsilon", f32(-1), "must not be negative (got -1)"},
      // gemma4's own keys: the per-layer arrays, the pattern, the sliding head size, KV sharing by
      // llama.cpp's rule, the per-layer embeddings' width.
      {"tiny-gemma4-q8_0.gguf", "gemma4.feed_forward_length", u32s({128, 128, 128, 256, 256}), "5 entries for 6 layers"},
      {"tiny-gemma4-q8_0.gguf", "gemma4.feed_forward_length", u32s({128, 128, 0, 256, 256, 256}), "positive"},
      {"tiny-gemma4-q8_0.gguf", "gemma4.feed_forward_length", std::nullopt, "missing"},
      {"tiny-gemma4-q8_0.gguf", "gemma4.attention.head_count_kv", u32s({1, 1, 1, 1}), "4 entries for 6 layers"},
      {"tiny-gemma4-q8_0.gguf", "gemma4.attention.head_count_kv", u32s({1, 1, 3, 1, 1, 1}), "not a divisor of attention.head_count 4"},
      {"tiny-gemma4-q8_0.gguf", "gemma4.attention.sliding_window_pattern", bools({true, true, false, true, true}), "5 entries for 6 layers"},
      {"tiny-gemma4-q8_0.gguf", "gemma4.attention.sliding_window_pattern", u32s({1, 1, 0, 1, 1, 0}), "bools"},
      {"tiny-gemma4-q8_0.gguf", "gemma4.attention.sliding_window_pattern", std::nullopt, "missing"},
      {"tiny-gemma4-q8_0.gguf", "gemma4.attention.sliding_window_pattern", u32(3), "array of one bool per layer"},
      {"tiny-gemma4-q8_0.gguf", "gemma4.attention.sliding_window", std::nullopt, "missing"},
      {"tiny-gemma4-q8_0.gguf", "gemma4.attention.key_length_swa", u32(31), "even"},
      {"tiny-gemma4-q8_0.gguf", "gemma4.attention.value_length_swa", u32(16), "differs from attention.key_length_swa"},
      {"tiny-gemma4-q8_0.gguf", "gemma4.rope.dimension_count_swa", u32(16), "partial rotary"},
      {"tiny-gemma4-q8_0.gguf", "gemma4.attention.shared_kv_layers", u32(6), "must be in [0, block_count 6)"},
      {"tiny-gemma4-q8_0.gguf", "gemma4.attention.shared_kv_layers", u32(4), "another attention shape"},
      {"tiny-gemma4-q8_0.gguf", "gemma4.attention.shared_kv_layers", u32(5), "does not exist"},
      {"tiny-gemma4-q8_0.gguf", "gemma4.embedding_length_per_layer_input", std::nullopt, "per_layer_token_embd.weight is present"},
      {"tiny-gemma4-q8_0.gguf", "gemma4.expert_count", u32(4), "no mixture-of-experts form"},
      {"tiny-gemma4-q8_0.gguf", "gemma4.attn_logit_softcapping", f32(50), "not supported for arch gemma4"},
      {"tiny-gemma4-q8_0.gguf", "gemma4.final_logit_softcapping", f32(-30), "positive"},
  };
  refuse_keys(cases);
}

// llama.cpp reads a layer without attn_v as using its keys as values (Gemma 4's attention_k_eq_v),
// and so do the shared layers reading it; a file that drops it loads so.
TEST_F(GgufArchErrors, Gemma4WithoutAttnVUsesKeysAsValues) {
  const std::string file = "tiny-gemma4-q8_0.gguf";
  const ModelConfig as_stored = gguf_config(GgufFile(test::gguf_path(file)));
  const int64_t source = as_stored.kv_layer_of(as_stored.layers.size() - 1);
  GgufEdits edits;
  edits.tensors["blk." + std::to_string(source) + ".attn_v.weight"] = std::nullopt;
  const std::string path = copy(file, edits);
  const ModelConfig c = gguf_config(GgufFile(path));
  for (size_t l = 0; l < c.layers.size(); ++l) {
    EXPECT_FALSE(as_stored.layers[l].k_eq_v) << l;
    EXPECT_EQ(c.layers[l].k_eq_v, c.kv_layer_of(l) == source) << l;
  }
  auto m = Model::load(path, {.threads = 1, .progress = {}});
  auto cache = m->make_cache(8);
  KvSequence seq(*cache);
  const std::vector<int32_t> ids = {1, 80, 147};
  EXPECT_EQ(m->forward(seq, ids).size(), static_cast<size_t>(c.vocab_size));
}

TEST_F(GgufArchErrors, TensorTableNamesTheTensor) {
  const TensorCase cases[] = {
      {"tiny-kq-phi3-bf16.gguf", "blk.0.attn_qkv.weight", std::vector<uint64_t>{256, 500}, "expected [256, 512]"},
      {"tiny-kq-phi3-bf16.gguf", "blk.1.ffn_up.weight", std::nullopt, "missing"},
      {"tiny-kq-phi3-bf16.gguf", "blk.1.ffn_up.weight", std::vector<uint64_t>{256, 512}, "gate and up"},
      {"tiny-kq-qwen3moe-bf16.gguf", "blk.1.ffn_up_exps.weight", std::vector<uint64_t>{256, 256, 3}, "one expert per slab"},
      {"tiny-kq-qwen3moe-bf16.gguf", "blk.0.ffn_down_exps.weight", std::nullopt, "missing"},
      {"tiny-kq-qwen3moe-bf16.gguf", "blk.0.ffn_gate_exps.weight", std::vector<uint64_t>{256, 256}, "expected [256, 256, 4]"},
      {"tiny-kq-qwen3moe-bf16.gguf", "blk.0.ffn_gate_inp.weight", std::vector<uint64_t>{256, 3}, "expected [4, 256]"},
      {"tiny-kq-mixtral-bf16.gguf", "blk.1.ffn_gate_inp.weight", std::nullopt, "missing"},
      {"tiny-kq-mixtral-bf16.gguf", "blk.0.ffn_down_exps.weight", std::vector<uint64_t>{128, 256, 4}, "expected [256, 256, 4]"},
      {"tiny-kq-gemma2-bf16.gguf", "blk.0.post_ffw_norm.weight", std::nullopt, "missing"},
      {"tiny-kq-gemma3-bf16.gguf", "blk.1.attn_k_norm.weight", std::vector<uint64_t>{32}, "expected [64]"},
      // gemma4's: the per-layer embeddings' (the table read by the key's width), the scalars, the
      // widths and head sizes the arrays give, rope_freqs' length.
      {"tiny-gemma4-q8_0.gguf", "per_layer_token_embd.weight", std::nullopt, "missing"},
      {"tiny-gemma4-q8_0.gguf", "per_layer_token_embd.weight", std::vector<uint64_t>{64, 2048}, "expected [2048, 96]"},
      {"tiny-gemma4-q8_0.gguf", "per_layer_model_proj.weight", std::nullopt, "missing"},
      {"tiny-gemma4-q8_0.gguf", "per_layer_proj_norm.weight", std::vector<uint64_t>{8}, "expected [16]"},
      {"tiny-gemma4-q8_0.gguf", "blk.0.inp_gate.weight", std::nullopt, "missing"},
      {"tiny-gemma4-q8_0.gguf", "blk.4.proj.weight", std::nullopt, "missing"},
      {"tiny-gemma4-q8_0.gguf", "blk.5.post_norm.weight", std::nullopt, "missing"},
      {"tiny-gemma4-q8_0.gguf", "blk.2.layer_output_scale.weight", std::nullopt, "missing"},
      {"tiny-gemma4-q8_0.gguf", "blk.3.ffn_up.weight", std::vector<uint64_t>{64, 128}, "expected [256, 64]"},
      {"tiny-gemma4-q8_0.gguf", "blk.2.attn_k.weight", std::vector<uint64_t>{64, 32}, "expected [64, 64]"},
      {"tiny-gemma4-q8_0.gguf", "blk.1.attn_k_norm.weight", std::nullopt, "missing"},
      {"tiny-gemma4-q8_0.gguf", "rope_freqs.weight", std::vector<uint64_t>{16}, "32 float values"},
  };
  refuse_tensors(cases);
}

// The hybrids' own keys and tensors (qwen3next, qwen35), each refused naming it.
TEST_F(GgufArchErrors, HybridMetadataNamesTheKey) {
  const KeyCase cases[] = {
      {"tiny-qwen3next-f32.gguf", "qwen3next.ssm.conv_kernel", std::nullopt, "missing"},
      {"tiny-qwen3next-f32.gguf", "qwen3next.ssm.state_size", std::nullopt, "missing"},
      {"tiny-qwen35-f32.gguf", "qwen35.ssm.group_count", u32(0), "positive"},
      {"tiny-qwen35-f32.gguf", "qwen35.ssm.time_step_rank", u32(3), "multiple of qwen35.ssm.group_count"},
      {"tiny-qwen35-f32.gguf", "qwen35.ssm.inner_size", u32(66), "multiple of qwen35.ssm.time_step_rank"},
      {"tiny-qwen35-f32.gguf", "qwen35.ssm.inner_size", std::nullopt, "missing"},
      {"tiny-qwen3next-f32.gguf", "qwen3next.full_attention_interval", u32(0), "positive"},
      {"tiny-qwen3next-f32.gguf", "qwen3next.full_attention_interval", u32(2), "disagrees with qwen3next.attention.recurrent_layers"},
      {"tiny-qwen35-f32.gguf", "qwen35.attention.recurrent_layers", GgufValue{9, 7, {true, true, false}}, "one bool per layer"},
      {"tiny-qwen35-f32.gguf", "qwen35.attention.recurrent_layers", GgufValue{9, 4, {1, 1, 1, 0}}, "bools"},
      {"tiny-qwen35-f32.gguf", "qwen35.rope.dimension_sections", GgufValue{9, 5, {3, -3, 2, 0}}, "non-negative"},
      {"tiny-qwen35-f32.gguf", "qwen35.rope.dimension_count", u32(80), "at most the head dimension"},
      {"tiny-qwen3next-f32.gguf", "qwen3next.expert_shared_feed_forward_length", std::nullopt, "missing"},
      {"tiny-qwen3next-f32.gguf", "qwen3next.expert_count", std::nullopt, "mixture of experts"},
      {"tiny-qwen35-f32.gguf", "qwen35.expert_shared_feed_forward_length", u32(64), "not supported for arch qwen35"},
      {"tiny-kq-qwen3moe-bf16.gguf", "qwen3moe.ssm.conv_kernel", u32(4), "not supported for arch qwen3moe"},
  };
  refuse_keys(cases);
}

TEST_F(GgufArchErrors, HybridTensorTableNamesTheTensor) {
  const TensorCase cases[] = {
      {"tiny-qwen3next-f32.gguf", "blk.0.ssm_conv1d.weight", std::vector<uint64_t>{3, 128}, "expected [4, 128]"},
      {"tiny-qwen35-f32.gguf", "blk.1.ssm_conv1d.weight", std::vector<uint64_t>{4, 120}, "expected [4, 128]"},
      {"tiny-qwen35-f32.gguf", "blk.2.ssm_conv1d.weight", std::nullopt, "missing"},
      {"tiny-qwen3next-f32.gguf", "blk.1.ssm_ba.weight", std::vector<uint64_t>{64, 4}, "expected [64, 8]"},
      {"tiny-qwen3next-q8_0.gguf", "blk.2.ssm_ba.weight", std::nullopt, "missing"},
      {"tiny-qwen35-q8_0.gguf", "blk.0.ssm_beta.weight", std::nullopt, "missing"},
      {"tiny-qwen35-f32.gguf", "blk.0.ssm_alpha.weight", std::vector<uint64_t>{64, 2}, "expected [4, 64]"},
      {"tiny-qwen35-f32.gguf", "blk.0.ssm_a", std::vector<uint64_t>{3}, "expected [4]"},
      {"tiny-qwen3next-f32.gguf", "blk.2.ssm_a", std::nullopt, "missing"},
      {"tiny-qwen35-f32.gguf", "blk.1.ssm_dt.bias", std::nullopt, "missing"},
      {"tiny-qwen35-f32.gguf", "blk.0.attn_qkv.weight", std::vector<uint64_t>{64, 96}, "expected [128, 64]"},
      {"tiny-qwen35-f32.gguf", "blk.0.attn_gate.weight", std::nullopt, "missing"},
      {"tiny-qwen35-f32.gguf", "blk.1.ssm_norm.weight", std::vector<uint64_t>{32}, "expected [16]"},
      {"tiny-qwen3next-f32.gguf", "blk.0.ssm_out.weight", std::nullopt, "missing"},
      {"tiny-qwen3next-f32.gguf", "blk.3.attn_q.weight", std::vector<uint64_t>{64, 128}, "expected [256, 64]"},
      {"tiny-qwen3next-f32.gguf", "blk.1.ffn_up_shexp.weight", std::vector<uint64_t>{64, 32}, "expected [64, 64]"},
      {"tiny-qwen3next-f32.gguf", "blk.0.ffn_gate_inp_shexp.weight", std::nullopt, "missing"},
      {"tiny-qwen3next-f32.gguf", "blk.3.ffn_down_exps.weight", std::vector<uint64_t>{32, 64, 7}, "one expert per slab"},
  };
  refuse_tensors(cases);
}

// ssm_a holds -exp(A_log): a value that is not negative has no A_log.
TEST_F(GgufArchErrors, HybridPositiveSsmAIsRefused) {
  const GgufFile g(test::gguf_path("tiny-qwen35-f32.gguf"));
  std::string bytes = test::rewrite_gguf(g, {});
  const GgufTensor& a = g.tensor("blk.1.ssm_a");
  std::vector<float> v(static_cast<size_t>(a.numel()));
  std::memcpy(v.data(), a.data, v.size() * sizeof(float));
  const std::string stored(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  const size_t at = bytes.find(stored);
  ASSERT_NE(at, std::string::npos);
  const float positive = 0.5f;
  bytes.replace(at, sizeof(float), reinterpret_cast<const char*>(&positive), sizeof(float));
  const std::string path = dir_.write("positive-ssm-a.gguf", bytes);
  try {
    Model::load(path, {.threads = 1, .progress = {}});
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_HAS(std::string(e.what()), "blk.1.ssm_a");
    EXPECT_HAS(std::string(e.what()), "not negative");
  }
}

// gemma3.attention.sliding_window_pattern as a period: 2 is the shared file's [true, false], so the
// same model (the same logits); without the key, real Gemma 3's period 6 (here: both layers slide).
TEST_F(GgufArchErrors, Gemma3PatternAsPeriodOrAbsent) {
  const std::string file = "tiny-kq-gemma3-bf16.gguf";
  const GgufFile original(test::gguf_path(file));
  const ModelConfig as_stored = gguf_config(original);
  GgufEdits period;
  period.keys["gemma3.attention.sliding_window_pattern"] = u32(2);
  const std::string period_path = copy(file, period);
  const ModelConfig by_period = gguf_config(GgufFile(period_path));
  ASSERT_EQ(by_period.layers.size(), as_stored.layers.size());
  for (size_t l = 0; l < as_stored.layers.size(); ++l) {
    EXPECT_EQ(by_period.layers[l].sliding_window, as_stored.layers[l].sliding_window) << l;
    EXPECT_EQ(by_period.layers[l].rope, as_stored.layers[l].rope) << l;
  }
  auto a = Model::load(test::gguf_path(file), {.threads = 1, .progress = {}});
  auto b = Model::load(period_path, {.threads = 1, .progress = {}});
  const std::vector<int32_t> ids = {1, 80, 147, 201, 282, 330, 415, 87, 1024, 77, 5, 600, 1333, 44, 9, 46, 83, 120, 157, 194};
  auto ca = a->make_cache(32), cb = b->make_cache(32);
  KvSequence sa(*ca), sb(*cb);
  EXPECT_EQ(a->forward(sa, ids), b->forward(sb, ids));

  GgufEdits absent;
  absent.keys["gemma3.attention.sliding_window_pattern"] = std::nullopt;
  const ModelConfig by_default = gguf_config(GgufFile(copy(file, absent)));
  const int64_t window = original.get_int("gemma3.attention.sliding_window");
  for (size_t l = 0; l < by_default.layers.size(); ++l) {
    const bool slides = (l + 1) % 6 != 0;
    EXPECT_EQ(by_default.layers[l].sliding_window, slides ? window : 0) << l;
    EXPECT_EQ(by_default.layers[l].rope, slides ? LayerRope::kLocal : LayerRope::kGlobal) << l;
  }
}

// Arch llama has no window in llama.cpp, which attends to every position whatever key a converter
// wrote; so does Ember.
TEST_F(GgufArchErrors, WindowKeyOfArchLlamaIsIgnored) {
  GgufEdits edits;
  edits.keys["llama.attention.sliding_window"] = u32(4);
  const ModelConfig c = gguf_config(GgufFile(copy("tiny-kq-mistral-f16.gguf", edits)));
  EXPECT_FALSE(c.any_sliding_window());
}

// phi3's window, 0 in the shared files, applies to every layer when set (as transformers runs Phi-3).
TEST_F(GgufArchErrors, Phi3WindowCoversEveryLayer) {
  GgufEdits edits;
  edits.keys["phi3.attention.sliding_window"] = u32(8);
  const ModelConfig c = gguf_config(GgufFile(copy("tiny-kq-phi3-bf16.gguf", edits)));
  ASSERT_FALSE(c.layers.empty());
  for (const LayerSpec& l : c.layers) EXPECT_EQ(l.sliding_window, 8);
}

}  // namespace
}  // namespace ember::model
