// The Gated DeltaNet hybrids (Qwen3-Next, Qwen3.5): their config.json as the architecture table reads
// it (layer kinds, gated attention, partial rotary, the linear_* shape, Qwen3.5's text_config, the
// transformers v5 spellings), and their recurrent state in the cache: attention layers alone get KV
// blocks, forks carry the state, and a sequence cut back restarts from its deepest snapshot.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "config_testing.h"
#include "fuzz_util.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "model/safetensors_writer.h"
#include "model/synthetic.h"

namespace ember::model {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// The hybrid goldens' models: every file of golden/hybrid.
std::vector<json> hybrid_goldens() {
  std::vector<json> out;
  for (const std::string& path : test::golden_jsons("golden/hybrid"))
    out.push_back(json::parse(read_file(path)));
  return out;
}

// The settings object of a hybrid's config.json: Qwen3.5's text_config, else the top level.
const json& settings(const json& j) { return j.contains("text_config") ? j["text_config"] : j; }

TEST(HybridConfig, ReadsEveryHybridFolder) {
  const std::vector<json> goldens = hybrid_goldens();
  ASSERT_FALSE(goldens.empty());
  for (const json& g : goldens) {
    const std::string model = g["model"].get<std::string>();
    SCOPED_TRACE(model);
    const json j = test::model_config(model);
    const json& t = settings(j);
    const ModelConfig c = load_config(test::model_dir(model));
    ASSERT_EQ(c.layers.size(), g["layer_types"].size());
    for (size_t l = 0; l < c.layers.size(); ++l)
      EXPECT_EQ(c.layers[l].kind == LayerKind::kLinear, g["layer_types"][l] == "linear_attention") << "layer " << l;
    EXPECT_TRUE(c.attn_output_gate);
    EXPECT_TRUE(c.norm_plus_one);
    EXPECT_TRUE(c.qk_norm);
    EXPECT_EQ(c.head_dim, t["head_dim"].get<int64_t>());
    EXPECT_EQ(c.rotary_dim, static_cast<int64_t>(c.head_dim * t["partial_rotary_factor"].get<double>()));
    EXPECT_EQ(c.linear.conv_kernel, t["linear_conv_kernel_dim"].get<int64_t>());
    EXPECT_EQ(c.linear.key_heads, t["linear_num_key_heads"].get<int64_t>());
    EXPECT_EQ(c.linear.value_heads, t["linear_num_value_heads"].get<int64_t>());
    EXPECT_EQ(c.linear.key_dim, t["linear_key_head_dim"].get<int64_t>());
    EXPECT_EQ(c.linear.value_dim, t["linear_value_head_dim"].get<int64_t>());
    EXPECT_EQ(c.tie_word_embeddings, j["tie_word_embeddings"].get<bool>());
    EXPECT_EQ(c.shape(LayerMatrix::kQ)[0], 2 * c.num_attention_heads * c.head_dim);  // [query | gate]
    EXPECT_EQ(c.moe.num_experts, t.value("num_experts", int64_t{0}));
    EXPECT_EQ(c.moe.shared_intermediate_size, t.value("shared_expert_intermediate_size", int64_t{0}));
    EXPECT_EQ(c.moe.renormalize, t.value("norm_topk_prob", false));
  }
}

json qwen3next() { return test::model_config("tiny-qwen3next-bf16"); }

TEST(HybridConfig, FullAttentionIntervalWithoutLayerTypes) {
  json j = qwen3next();
  ASSERT_FALSE(j.contains("layer_types"));
  j["num_hidden_layers"] = 8;
  ModelConfig c = parse_config(j.dump(), "config.json");  // interval 4: layers 3 and 7 attend
  for (int64_t l = 0; l < 8; ++l)
    EXPECT_EQ(c.layers[static_cast<size_t>(l)].kind, (l + 1) % 4 == 0 ? LayerKind::kAttention : LayerKind::kLinear);
  EXPECT_EQ(c.attention_layers(), 2);
  j["full_attention_interval"] = 2;
  c = parse_config(j.dump(), "config.json");
  EXPECT_EQ(c.attention_layers(), 4);
  j.erase("full_attention_interval");  // transformers' default: 4
  EXPECT_EQ(parse_config(j.dump(), "config.json").attention_layers(), 2);
  j["layer_types"] = json::array();
  for (int l = 0; l < 8; ++l) j["layer_types"].push_back(l < 2 ? "full_attention" : "linear_attention");
  c = parse_config(j.dump(), "config.json");  // given: it rules
  EXPECT_EQ(c.layers[0].kind, LayerKind::kAttention);
  EXPECT_EQ(c.layers[3].kind, LayerKind::kLinear);
  EXPECT_EQ(c.attention_layers(), 2);
}

TEST(HybridConfig, TransformersV5Spellings) {
  json j = qwen3next();
  const double theta = j["rope_theta"].get<double>() * 2, factor = 0.5;
  j.erase("rope_theta");
  j.erase("partial_rotary_factor");
  j.erase("torch_dtype");
  j["dtype"] = "bfloat16";
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", theta}, {"partial_rotary_factor", factor}};
  const ModelConfig c = parse_config(j.dump(), "config.json");
  EXPECT_EQ(c.rope.theta, theta);
  EXPECT_EQ(c.rotary_dim, static_cast<int64_t>(c.head_dim * factor));
  j.erase("rope_parameters");  // transformers' defaults: a quarter of the head
  EXPECT_EQ(parse_config(j.dump(), "config.json").rotary_dim, c.head_dim / 4);
  j.erase("head_dim");  // Qwen3-Next's default head_dim is 256, not hidden / heads
  EXPECT_EQ(parse_config(j.dump(), "config.json").head_dim, 256);
}

TEST(HybridConfig, Qwen35ReadsTextConfig) {
  json j = test::model_config("tiny-qwen35-bf16");
  const ModelConfig c = parse_config(j.dump(), "config.json");
  EXPECT_EQ(c.model_type, "qwen3_5");
  EXPECT_EQ(c.hidden_size, j["text_config"]["hidden_size"].get<int64_t>());
  EXPECT_EQ(c.rope.theta, j["text_config"]["rope_parameters"]["rope_theta"].get<double>());
  j["tie_word_embeddings"] = false;  // the top level's is the one transformers reads
  EXPECT_FALSE(parse_config(j.dump(), "config.json").tie_word_embeddings);
  j["text_config"].erase("hidden_size");
  EXPECT_MENTIONS(test::config_error(j), "hidden_size");
  j.erase("text_config");
  EXPECT_MENTIONS(test::config_error(j), "text_config");
}

TEST(HybridConfig, MixtureOfExpertsLayers) {
  json j = qwen3next();
  j["mlp_only_layers"] = {1};
  ModelConfig c = parse_config(j.dump(), "config.json");
  EXPECT_TRUE(c.layers[0].sparse_mlp);
  EXPECT_FALSE(c.layers[1].sparse_mlp);
  j["mlp_only_layers"] = json::array();
  j["decoder_sparse_step"] = 2;
  c = parse_config(j.dump(), "config.json");
  EXPECT_FALSE(c.layers[0].sparse_mlp);
  EXPECT_TRUE(c.layers[1].sparse_mlp);
}

TEST(HybridConfig, BadValuesNameTheField) {
  json j = qwen3next();
  j["layer_types"] = {"linear_attention", "linear_attention", "mamba", "full_attention"};
  EXPECT_MENTIONS(test::config_error(j), "layer_types[2]");
  j.erase("layer_types");
  j["linear_num_value_heads"] = 3;  // not a multiple of the 2 key heads
  EXPECT_MENTIONS(test::config_error(j), "linear_num_value_heads");
  j = qwen3next();
  j.erase("linear_key_head_dim");
  EXPECT_MENTIONS(test::config_error(j), "linear_key_head_dim");
  j = qwen3next();
  j["full_attention_interval"] = 0;
  EXPECT_MENTIONS(test::config_error(j), "full_attention_interval");
}

TEST(HybridModel, MissingTensorNamesIt) {
  // Qwen3.5's folder told that its attention layer is a linear one: that layer's in_proj_qkv is missing.
  const fs::path dir = fs::temp_directory_path() / "ember_hybrid_missing_tensor";
  fs::create_directories(dir);
  json j = test::model_config("tiny-qwen35-bf16");
  const size_t last = j["text_config"]["layer_types"].size() - 1;
  j["text_config"]["layer_types"][last] = "linear_attention";
  std::ofstream(dir / "config.json") << j.dump();
  fs::remove(dir / "model.safetensors");
  fs::create_symlink(fs::path(test::model_dir("tiny-qwen35-bf16")) / "model.safetensors", dir / "model.safetensors");
  try {
    Model::load(dir.string(), {.threads = 1, .progress = {}});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_MENTIONS(std::string(e.what()), "layers." + std::to_string(last) + ".linear_attn.in_proj_qkv.weight");
  }
  fs::remove_all(dir);
}

// A Qwen3.5 MoE folder (model_type qwen3_5_moe) made from tiny-qwen35-bf16 with every MLP as a
// mixture that computes the same: one expert holding the dense MLP, chosen with weight 1, and a shared
// expert whose output rows are zero. Its experts stored one tensor each, or stacked as transformers 5
// saves them (gate_up_proj [E][2I][H], down_proj [E][H][I]); both give the dense golden's logits.
class Qwen35MoeFolder {
 public:
  explicit Qwen35MoeFolder(bool stacked) {
    const std::string src = test::model_dir("tiny-qwen35-bf16");
    const fs::path dir = dir_.path();
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"})
      fs::copy_file(fs::path(src) / f, dir / f, fs::copy_options::overwrite_existing);
    json config = test::model_config("tiny-qwen35-bf16");
    config["model_type"] = "qwen3_5_moe";
    json& t = config["text_config"];
    const int64_t H = t["hidden_size"], I = t["intermediate_size"];
    t["model_type"] = "qwen3_5_moe_text";
    t["num_experts"] = 1;
    t["num_experts_per_tok"] = 1;
    t["moe_intermediate_size"] = I;
    t["shared_expert_intermediate_size"] = I;
    t["norm_topk_prob"] = true;
    t["decoder_sparse_step"] = 1;
    t["mlp_only_layers"] = json::array();
    std::ofstream(dir / "config.json") << config.dump();
    const SafetensorsFile in(src + "/model.safetensors");
    InMemoryWeights w;
    auto add = [&w](const std::string& name, std::vector<int64_t> shape, std::vector<uint8_t> bytes,
                    DType dtype = DType::BF16) {  // the zeros are BF16, as the MLPs they stand beside
      TensorInfo t;
      t.name = name;
      t.dtype = dtype;
      t.shape = std::move(shape);
      t.size_bytes = bytes.size();
      w.tensors[name] = t;
      w.data[name] = std::move(bytes);
    };
    auto bytes = [](const TensorInfo& x) {
      const auto* p = static_cast<const uint8_t*>(x.data);
      return std::vector<uint8_t>(p, p + x.size_bytes);
    };
    const std::vector<uint8_t> zero_row(static_cast<size_t>(H) * 2, 0), zero_down(static_cast<size_t>(H * I) * 2, 0);
    for (const auto& [name, info] : in.tensors()) {
      const size_t at = name.find(".mlp.");
      if (at == std::string::npos) {
        add(name, info.shape, bytes(info), info.dtype);
        continue;
      }
      const std::string layer = name.substr(0, at) + ".mlp.", stem = name.substr(at + 5);
      if (stem != "gate_proj.weight") continue;  // the layer's other MLP tensors come with it
      const TensorInfo& up = in.tensors().at(layer + "up_proj.weight");
      const TensorInfo& down = in.tensors().at(layer + "down_proj.weight");
      if (stacked) {
        std::vector<uint8_t> gate_up = bytes(info);
        const std::vector<uint8_t> u = bytes(up);
        gate_up.insert(gate_up.end(), u.begin(), u.end());
        add(layer + "experts.gate_up_proj", {1, 2 * I, H}, std::move(gate_up), info.dtype);
        add(layer + "experts.down_proj", {1, H, I}, bytes(down), down.dtype);
      } else {
        add(layer + "experts.0.gate_proj.weight", info.shape, bytes(info), info.dtype);
        add(layer + "experts.0.up_proj.weight", up.shape, bytes(up), up.dtype);
        add(layer + "experts.0.down_proj.weight", down.shape, bytes(down), down.dtype);
      }
      add(layer + "gate.weight", {1, H}, zero_row);
      add(layer + "shared_expert.gate_proj.weight", info.shape, bytes(info), info.dtype);
      add(layer + "shared_expert.up_proj.weight", up.shape, bytes(up), up.dtype);
      add(layer + "shared_expert.down_proj.weight", down.shape, zero_down);
      add(layer + "shared_expert_gate.weight", {1, H}, zero_row);
    }
    write_safetensors(w, dir / "model.safetensors");
  }
  const std::string& path() const { return dir_.path(); }

 private:
  fuzz::TempDir dir_;
};

TEST(HybridMoe, Qwen35MoeFolderOfOneExpertIsTheDenseModel) {
  json golden;
  for (const std::string& path : test::golden_jsons("golden/hybrid")) {
    json j = json::parse(read_file(path));
    if (j["model"] == "tiny-qwen35-bf16") golden = j;
  }
  ASSERT_FALSE(golden.is_null()) << "golden/hybrid has no tiny-qwen35-bf16";
  const double abs_tol = golden["tolerance"]["logits_abs"], rel_tol = golden["tolerance"]["logits_rel_to_max"];
  for (const bool stacked : {false, true}) {
    SCOPED_TRACE(stacked ? "experts stacked" : "one tensor per expert");
    const Qwen35MoeFolder folder(stacked);
    auto m = Model::load(folder.path(), {.threads = 2, .progress = {}});
    ASSERT_EQ(m->config().model_type, "qwen3_5_moe");
    ASSERT_EQ(m->config().moe.num_experts, 1);
    size_t checked = 0;
    for (const json& c : golden["cases"]) {
      const auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
      const auto want = c["last_logits"].get<std::vector<float>>();
      auto cache = m->make_cache(static_cast<int64_t>(ids.size()));
      KvSequence seq(*cache);
      const std::vector<float> got = m->forward(seq, ids);
      ASSERT_EQ(got.size(), want.size());
      float top = 0;
      for (float v : want) top = std::max(top, std::fabs(v));
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_LE(std::fabs(got[i] - want[i]), abs_tol + rel_tol * top) << c["name"] << " logit " << i;
      ++checked;
    }
    EXPECT_GT(checked, 0u);
  }
}

// The bench shapes of the published hybrids parse, and random weights for every hybrid layout (the
// goldens' configs) load and run: each tensor the forward pass binds is generated with its shape.
TEST(HybridSynthetic, ShapesParseAndRandomWeightsRun) {
  const ModelConfig small = synthetic_config("qwen3.5-0.8b");
  EXPECT_EQ(small.attention_layers(), small.num_hidden_layers / 4);
  EXPECT_GT(KvCache::state_bytes(small), 0);
  const ModelConfig moe = synthetic_config("qwen3.6-35b-a3b-4l");
  EXPECT_EQ(moe.attention_layers(), 2);
  EXPECT_GT(moe.moe.shared_intermediate_size, 0);
  kernels::ThreadPool pool(1);
  for (const json& g : hybrid_goldens()) {
    SCOPED_TRACE(g["model"].get<std::string>());
    ModelConfig c = load_config(test::model_dir(g["model"].get<std::string>()));
    auto m = Model::from_memory(c, synthetic_weights(c, DType::BF16, 7, pool), {.threads = 1, .progress = {}});
    auto cache = m->make_cache(64);
    KvSequence seq(*cache);
    const std::vector<int32_t> ids = {1, 2, 3, 4, 5};
    for (float v : m->forward(seq, ids)) ASSERT_TRUE(std::isfinite(v));
  }
}

// A hybrid's caches: KV blocks for the attention layers only, the state per sequence beside them.
class HybridCache : public ::testing::Test {
 protected:
  void SetUp() override { model_ = Model::load(test::model_dir("tiny-qwen35-bf16"), {.threads = 2, .progress = {}}); }
  std::vector<int32_t> tokens(int64_t n) const {
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((i * 37 + 11) % model_->config().vocab_size));
    return ids;
  }
  std::unique_ptr<Model> model_;
};

TEST_F(HybridCache, AttentionLayersAloneHoldKeysAndValues) {
  const ModelConfig& c = model_->config();
  ASSERT_LT(c.attention_layers(), c.num_hidden_layers);
  EXPECT_EQ(KvCache::bytes_per_token(c, kernels::KvType::F32),
            2 * c.attention_layers() * c.num_key_value_heads * c.head_dim * 4);
  const RecurrentLayout layout(c);
  EXPECT_EQ(layout.layers, c.num_hidden_layers - c.attention_layers());
  EXPECT_EQ(layout.bytes(), layout.layers * 4 *
                                ((c.linear.conv_kernel - 1) * c.linear.conv_channels() +
                                 c.linear.value_heads * c.linear.key_dim * c.linear.value_dim));
  EXPECT_EQ(KvCache::state_bytes_with_snapshots(c), layout.bytes() * (1 + layout.snapshot_limit));
}

TEST_F(HybridCache, CutBackRestartsFromTheDeepestSnapshot) {
  const std::vector<int32_t> ids = tokens(45);
  auto cache = model_->make_cache(256, 8);
  KvSequence whole(*cache);
  const std::vector<float> expected = model_->forward(whole, ids);
  // Boundaries 8, 16, ..., 40 of this pass; the last snapshot_limit of them are kept.
  const std::vector<int64_t> held = whole.state().snapshot_positions();
  ASSERT_FALSE(held.empty());
  EXPECT_EQ(held.back(), 40);
  EXPECT_LE(static_cast<int64_t>(held.size()), cache->recurrent_layout().snapshot_limit);

  for (int64_t cut : {44, 40, 33, 20}) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    KvSequence seq = whole.fork();
    seq.truncate(cut);
    EXPECT_EQ(seq.length(), cut - cut % 8);  // the deepest boundary at or below the cut
    const std::vector<float> again = model_->forward(seq, std::span<const int32_t>(ids).subspan(static_cast<size_t>(seq.length())));
    EXPECT_EQ(again, expected);  // bit for bit: the state restored is the one the whole pass had there
  }
}

TEST_F(HybridCache, WithoutSnapshotsACutRecomputesFromZero) {
  const std::vector<int32_t> ids = tokens(30);
  auto cache = model_->make_cache(256, 8);
  cache->set_snapshot_limit(0);
  KvSequence seq(*cache);
  const std::vector<float> expected = model_->forward(seq, ids);
  EXPECT_TRUE(seq.state().snapshot_positions().empty());
  seq.truncate(29);
  EXPECT_EQ(seq.length(), 0);
  EXPECT_EQ(model_->forward(seq, ids), expected);
  seq.truncate(30);  // not below its length: nothing to cut
  EXPECT_EQ(seq.length(), 30);
}

TEST_F(HybridCache, SnapshotsAreBoundedOldestDroppedFirst) {
  auto cache = model_->make_cache(512, 4);
  cache->set_snapshot_limit(3);
  KvSequence seq(*cache);
  const std::vector<int32_t> ids = tokens(50);
  model_->forward(seq, std::span<const int32_t>(ids).first(30));
  EXPECT_EQ(seq.state().snapshot_positions(), (std::vector<int64_t>{20, 24, 28}));
  for (size_t i = 30; i < ids.size(); ++i) model_->forward(seq, std::span<const int32_t>(&ids[i], 1));
  EXPECT_EQ(seq.state().snapshot_positions(), (std::vector<int64_t>{40, 44, 48}));
}

TEST_F(HybridCache, ForksCarryTheState) {
  const std::vector<int32_t> ids = tokens(20);
  auto cache = model_->make_cache(256, 8);
  KvSequence a(*cache);
  model_->forward(a, ids);
  KvSequence b = a.fork(), c = a.copy();
  const std::vector<int32_t> next = {5};
  const std::vector<float> la = model_->forward(a, next);
  EXPECT_EQ(model_->forward(b, next), la);
  EXPECT_EQ(model_->forward(c, next), la);
  KvSequence d(*cache);  // a fresh sequence starts from zeros
  model_->forward(d, ids);
  EXPECT_EQ(model_->forward(d, next), la);
}

}  // namespace
}  // namespace ember::model
