// -m FILE.gguf for the Gated DeltaNet hybrids (archs qwen3next and qwen35): each file of every
// expectation in ../shared/testdata/gguf/hybrid/ loads through Model::load with its matrices held as
// stored, gives its golden logits within the README's tolerance and its greedy_short_16 (exactly for
// float files, along the golden path within the tolerance for quantized ones), and its
// dequantized_rows. Beside it: the long prompt fed in chunks carries the state to the same logits, and
// the configuration the metadata gives is the one of the Hugging Face folder the file was written from;
// a chat's second turn restarts from the deepest state snapshot.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "error_of.h"
#include "gguf_fixtures.h"
#include "gguf_golden.h"
#include "gguf_rewrite.h"
#include "engine/session.h"
#include "kernels/gguf_quants.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/gguf_config.h"
#include "model/load_tokenizer.h"
#include "model/model.h"
#include "test_paths.h"

namespace ember::model {
namespace {

using HybridFile = test::GgufCase;

std::vector<HybridFile> hybrid_files() { return test::gguf_cases("gguf/hybrid"); }

class GgufHybrid : public ::testing::TestWithParam<HybridFile> {};

TEST_P(GgufHybrid, MatchesItsGolden) {
  const HybridFile& p = GetParam();
  const nlohmann::json e = test::read_json(p.expectation);
  const nlohmann::json& f = e["files"][p.file];
  const std::string path = test::gguf_path(p.file);
  auto m = Model::load(path, {.threads = 2, .progress = {}});
  EXPECT_EQ(m->load_note(), "");  // every block type runs as stored: nothing requantized at load
  const bool float_file = test::is_float_file(f["tensor_types"]);
  const test::GoldenResult r = test::run_golden(*m, e, f, float_file ? test::Greedy::kExact : test::Greedy::kForced);
  std::printf("%-30s %-24s %.2f of the tolerance\n", p.file.c_str(), f["tensor_types"].dump().c_str(), r.worst_ratio());
  ASSERT_FALSE(r.cases.empty());
  test::expect_golden(r);
}

// The first rows of one tensor of each block type, dequantized, equal gguf-py's float32 values.
TEST_P(GgufHybrid, DequantizedRows) {
  const HybridFile& p = GetParam();
  const nlohmann::json e = test::read_json(p.expectation);
  const nlohmann::json& f = e["files"][p.file];
  const GgufFile g(test::gguf_path(p.file));
  ASSERT_TRUE(f.contains("dequantized_rows"));
  for (const auto& [type_name, ref] : f["dequantized_rows"].items()) {
    SCOPED_TRACE(type_name);
    const GgufTensor& t = g.tensor(ref["tensor"].get<std::string>());
    ASSERT_STREQ(kernels::ggml_type_name(t.type), type_name.c_str());
    ASSERT_LE(static_cast<int64_t>(ref["rows"].size()), t.rows());
    std::vector<float> out(static_cast<size_t>(t.row_length()));
    for (size_t r = 0; r < ref["rows"].size(); ++r) {
      const auto expected = ref["rows"][r].get<std::vector<float>>();
      ASSERT_EQ(static_cast<int64_t>(expected.size()), t.row_length());
      kernels::dequantize_row(t.type, t.data + r * t.row_bytes(), t.row_length(), out.data());
      EXPECT_EQ(out, expected) << "row " << r;
    }
  }
}

// The long prompt fed in chunks (7 + 1 + 20 + the rest, as ../golden/hybrid's split_prefill), the
// state carried across them, gives the golden's logits of the whole prompt.
TEST_P(GgufHybrid, SplitPrefillCarriesTheState) {
  const HybridFile& p = GetParam();
  const nlohmann::json e = test::read_json(p.expectation);
  const nlohmann::json& f = e["files"][p.file];
  const auto ids = e["prompts"]["long"].get<std::vector<int32_t>>();
  ASSERT_GT(ids.size(), 28u);
  auto m = Model::load(test::gguf_path(p.file), {.threads = 2, .progress = {}});
  auto cache = m->make_cache(static_cast<int64_t>(ids.size()));
  KvSequence seq(*cache);
  std::vector<float> logits;
  size_t done = 0;
  for (const size_t n : {size_t{7}, size_t{1}, size_t{20}, ids.size() - 28}) {
    logits = m->forward(seq, std::span<const int32_t>(ids.data() + done, n));
    done += n;
  }
  size_t checked = 0;
  for (const auto& cs : f["cases"])
    if (cs["prompt"] == "long") {
      EXPECT_LE(test::max_abs_diff(logits, cs["logits"].get<std::vector<float>>()), test::tolerance(f, cs));
      ++checked;
    }
  EXPECT_EQ(checked, 1u);
}

// What the metadata gives equals what the source folder's config.json gives, where it is shipped.
TEST_P(GgufHybrid, ConfigMatchesTheFolder) {
  const HybridFile& p = GetParam();
  const nlohmann::json e = test::read_json(p.expectation);
  const std::string folder = test::model_dir(e["source_hf_folder"].get<std::string>());
  if (!std::filesystem::exists(folder + "/config.json")) GTEST_SKIP() << folder << " is not shipped";
  const ModelConfig hf = load_config(folder);
  const ModelConfig g = gguf_config(GgufFile(test::gguf_path(p.file)));
  EXPECT_EQ(g.model_type, hf.model_type);
  EXPECT_EQ(g.hidden_size, hf.hidden_size);
  EXPECT_EQ(g.head_dim, hf.head_dim);
  EXPECT_EQ(g.rope_dim(), hf.rope_dim());
  EXPECT_EQ(g.attn_output_gate, hf.attn_output_gate);
  EXPECT_EQ(g.linear.conv_kernel, hf.linear.conv_kernel);
  EXPECT_EQ(g.linear.key_heads, hf.linear.key_heads);
  EXPECT_EQ(g.linear.key_dim, hf.linear.key_dim);
  EXPECT_EQ(g.linear.value_heads, hf.linear.value_heads);
  EXPECT_EQ(g.linear.value_dim, hf.linear.value_dim);
  EXPECT_EQ(g.moe.num_experts, hf.moe.num_experts);
  EXPECT_EQ(g.moe.experts_per_tok, hf.moe.experts_per_tok);
  EXPECT_EQ(g.moe.intermediate_size, hf.moe.intermediate_size);
  EXPECT_EQ(g.moe.shared_intermediate_size, hf.moe.shared_intermediate_size);
  ASSERT_EQ(g.layers.size(), hf.layers.size());
  for (size_t l = 0; l < g.layers.size(); ++l) {
    EXPECT_EQ(g.layers[l].kind, hf.layers[l].kind) << l;
    EXPECT_EQ(g.layers[l].sparse_mlp, hf.layers[l].sparse_mlp) << l;
  }
  EXPECT_FALSE(g.norm_plus_one);  // stored as 1 + w
  EXPECT_TRUE(hf.norm_plus_one);
}

// A chat's next turn on a hybrid GGUF file: the snapshots of the recurrent state work from GGUF as from
// a folder. The second prompt shares all but the last 7 tokens of the first (a template re-rendering
// the reply), so it re-evaluates only what follows the deepest snapshot at or below the shared length;
// without snapshots the state cannot be cut back and the whole prompt runs again.
TEST(GgufHybridSession, SecondTurnRestartsFromTheDeepestSnapshot) {
  const std::string path = test::gguf_path("tiny-qwen35-q8_0.gguf");
  auto model = Model::load(path, {.threads = 2, .progress = {}});
  const tokenizer::Tokenizer tok = load_tokenizer(path);
  const auto vocab = static_cast<int32_t>(model->config().vocab_size);
  std::vector<int32_t> first, second;
  for (int i = 0; i < 1000; ++i) first.push_back(3 + (i * 29) % (vocab - 3));
  second.assign(first.begin(), first.end() - 7);
  const auto shared = static_cast<int64_t>(second.size());
  for (int i = 0; i < 500; ++i) second.push_back(3 + (i * 13) % (vocab - 3));
  for (const int64_t snapshots : {int64_t{-1}, int64_t{0}}) {
    engine::Session s(*model, tok, 4096);
    if (snapshots == 0) s.set_state_snapshots(0);
    EXPECT_EQ(s.prefill(first), static_cast<int64_t>(first.size()));
    const int64_t block = KvCache::kDefaultBlock;
    const int64_t expected = static_cast<int64_t>(second.size()) - (snapshots == 0 ? 0 : shared / block * block);
    const int64_t prefilled = s.prefill(second);
    EXPECT_EQ(prefilled, expected) << (snapshots == 0 ? "without snapshots" : "with snapshots");
    std::printf("turn 2 (%zu tokens): %lld prefilled %s state snapshots\n", second.size(),
                static_cast<long long>(prefilled), snapshots == 0 ? "without" : "with");
  }
}

// llama.cpp's converter writes Qwen3-Next's and Qwen3.5's multi-token-prediction block after the
// decoder's (block_count counts it, nextn_predict_layers says how many): a file with one, made here
// from each float file by appending a copy of its last layer's tensors and the block's own, gives the
// file's golden logits: the block is not run as a layer.
TEST(GgufHybridMtp, TrailingPredictionBlocksAreNotLayers) {
  size_t checked = 0;
  for (const HybridFile& p : hybrid_files()) {
    const nlohmann::json e = test::read_json(p.expectation);
    const nlohmann::json& f = e["files"][p.file];
    if (!test::is_float_file(f["tensor_types"])) continue;
    SCOPED_TRACE(p.file);
    const GgufFile g(test::gguf_path(p.file));
    const std::string arch = g.get_string("general.architecture");
    const int64_t blocks = g.get_int(arch + ".block_count");
    test::GgufEdits edits;
    edits.keys[arch + ".block_count"] = test::GgufValue{4, 0, blocks + 1};
    edits.keys[arch + ".nextn_predict_layers"] = test::GgufValue{4, 0, 1};
    if (g.has(arch + ".attention.recurrent_layers")) {
      nlohmann::json flags = g.get_json(arch + ".attention.recurrent_layers");
      flags.push_back(false);  // the block attends, as llama.cpp writes it
      edits.keys[arch + ".attention.recurrent_layers"] = test::GgufValue{9, 7, flags};
    }
    const std::string last = "blk." + std::to_string(blocks - 1) + ".", mtp = "blk." + std::to_string(blocks) + ".";
    for (const GgufTensor& t : g.tensors())
      if (t.name.rfind(last, 0) == 0) edits.copies.emplace_back(mtp + t.name.substr(last.size()), t.name);
    edits.copies.emplace_back(mtp + "nextn.enorm.weight", "output_norm.weight");
    edits.copies.emplace_back(mtp + "nextn.hnorm.weight", "output_norm.weight");
    const test::TempFolder dir;
    const std::string path = dir.write("mtp-" + p.file, test::rewrite_gguf(g, edits));
    EXPECT_EQ(gguf_config(GgufFile(path)).num_hidden_layers, blocks);
    auto m = Model::load(path, {.threads = 2, .progress = {}});
    const test::GoldenResult r = test::run_golden(*m, e, f, test::Greedy::kExact);
    ASSERT_FALSE(r.cases.empty());
    test::expect_golden(r);
    // As many prediction blocks as blocks leaves no decoder: refused by the key's name.
    edits.keys[arch + ".nextn_predict_layers"] = test::GgufValue{4, 0, blocks + 1};
    const std::string bad = dir.write("bad-" + p.file, test::rewrite_gguf(g, edits));
    const std::string err = test::error_of([&] { (void)gguf_config(GgufFile(bad)); });
    EXPECT_NE(err.find(arch + ".nextn_predict_layers"), std::string::npos) << err;
    ++checked;
  }
  EXPECT_GE(checked, 2u) << "qwen3next and qwen35 float files";
}

// Arch qwen35moe (Qwen3.6-35B-A3B's files): no shared file carries one, so one is made from each
// qwen35 float file with its MLPs as mixtures that compute the same: one expert holding the dense MLP
// (stacked as llama.cpp stores experts, chosen with weight 1) and a shared expert whose output rows are
// zero. The file must give the qwen35 file's golden logits through the experts' code path.
TEST(GgufHybridMoe, Qwen35MoeOfOneExpertIsTheDenseModel) {
  size_t checked = 0;
  for (const HybridFile& p : hybrid_files()) {
    const nlohmann::json e = test::read_json(p.expectation);
    const nlohmann::json& f = e["files"][p.file];
    const GgufFile g(test::gguf_path(p.file));
    if (!test::is_float_file(f["tensor_types"]) || g.get_string("general.architecture") != "qwen35") continue;
    SCOPED_TRACE(p.file);
    test::GgufEdits edits;
    for (const GgufKv& kv : g.metadata())
      if (kv.key.rfind("qwen35.", 0) == 0) {
        edits.keys[kv.key] = std::nullopt;
        edits.keys["qwen35moe." + kv.key.substr(7)] =
            test::GgufValue{static_cast<uint32_t>(kv.type), static_cast<uint32_t>(kv.element_type), g.get_json(kv.key)};
      }
    edits.keys["general.architecture"] = test::GgufValue{8, 0, "qwen35moe"};
    const int64_t width = g.get_int("qwen35.feed_forward_length"), hidden = g.get_int("qwen35.embedding_length");
    edits.keys["qwen35moe.expert_count"] = test::GgufValue{4, 0, 1};
    edits.keys["qwen35moe.expert_used_count"] = test::GgufValue{4, 0, 1};
    edits.keys["qwen35moe.expert_feed_forward_length"] = test::GgufValue{4, 0, width};
    edits.keys["qwen35moe.expert_shared_feed_forward_length"] = test::GgufValue{4, 0, width};
    const auto H = static_cast<uint64_t>(hidden), I = static_cast<uint64_t>(width);
    const int64_t blocks = g.get_int("qwen35.block_count");
    for (int64_t l = 0; l < blocks; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      edits.renames[b + "ffn_gate.weight"] = {b + "ffn_gate_exps.weight", {H, I, 1}};
      edits.renames[b + "ffn_up.weight"] = {b + "ffn_up_exps.weight", {H, I, 1}};
      edits.renames[b + "ffn_down.weight"] = {b + "ffn_down_exps.weight", {I, H, 1}};
      edits.zeros.push_back({b + "ffn_gate_inp.weight", {H, 1}});
      edits.zeros.push_back({b + "ffn_gate_inp_shexp.weight", {H}});
      edits.copies.emplace_back(b + "ffn_gate_shexp.weight", b + "ffn_gate.weight");
      edits.copies.emplace_back(b + "ffn_up_shexp.weight", b + "ffn_up.weight");
      edits.zeros.push_back({b + "ffn_down_shexp.weight", {I, H}});
    }
    const test::TempFolder dir;
    const std::string path = dir.write("moe-" + p.file, test::rewrite_gguf(g, edits));
    const ModelConfig c = gguf_config(GgufFile(path));
    EXPECT_EQ(c.model_type, "qwen3_5_moe");
    EXPECT_EQ(c.moe.num_experts, 1);
    auto m = Model::load(path, {.threads = 2, .progress = {}});
    const test::GoldenResult r = test::run_golden(*m, e, f, test::Greedy::kExact);
    ASSERT_FALSE(r.cases.empty());
    test::expect_golden(r);
    ++checked;
  }
  EXPECT_GE(checked, 1u) << "no qwen35 float file in gguf/hybrid";
}

INSTANTIATE_TEST_SUITE_P(Files, GgufHybrid, ::testing::ValuesIn(hybrid_files()),
                         test::gguf_case_name);

TEST(GgufHybridFolder, HasFiles) { EXPECT_FALSE(hybrid_files().empty()); }

}  // namespace
}  // namespace ember::model
