// llama.cpp's Q4_K_M / Q5_K_M mixes: the per-tensor rule on a few layer counts, the rule and ggml's
// reference quantizers against the files llama-quantize made of tiny-kq-llama (types and bytes), and
// the types a model loaded with --quantize q4_k_m / q5_k_m holds.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/gguf_quants.h"
#include "kernels/quant.h"
#include "kernels/quant_mix.h"
#include "model/gguf.h"
#include "model/gguf_convert.h"
#include "model/model.h"
#include "gguf_fixtures.h"
#include "test_paths.h"

namespace ember::model {
namespace {

using kernels::GgmlType;
using kernels::QuantMix;
using kernels::TensorRole;

// The layers (of n) whose attn_v and ffn_down take Q6_K, 4096 columns wide.
std::vector<int> q6_layers(QuantMix mix, TensorRole role, int n) {
  std::vector<int> out;
  for (int l = 0; l < n; ++l)
    if (kernels::mix_tensor_type(mix, role, l, n, 4096) == GgmlType::Q6_K) out.push_back(l);
  return out;
}

TEST(QuantMix, MoreBitsOnTheFirstAndLastEighthAndEveryThirdBetween) {
  for (QuantMix mix : {QuantMix::Q4_K_M, QuantMix::Q5_K_M})
    for (TensorRole role : {TensorRole::kAttnV, TensorRole::kFfnDown}) {
      EXPECT_EQ(q6_layers(mix, role, 2), (std::vector<int>{1}));
      EXPECT_EQ(q6_layers(mix, role, 5), (std::vector<int>{2, 4}));
      EXPECT_EQ(q6_layers(mix, role, 8), (std::vector<int>{0, 3, 6, 7}));
      EXPECT_EQ(q6_layers(mix, role, 32), (std::vector<int>{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}));
    }
  // The others keep the base type on every layer; the output always takes Q6_K.
  for (TensorRole role : {TensorRole::kAttnQ, TensorRole::kAttnK, TensorRole::kAttnOutput, TensorRole::kFfnGate,
                          TensorRole::kFfnUp, TensorRole::kOther}) {
    EXPECT_TRUE(q6_layers(QuantMix::Q4_K_M, role, 32).empty());
    EXPECT_EQ(kernels::mix_tensor_type(QuantMix::Q4_K_M, role, 0, 32, 4096), GgmlType::Q4_K);
    EXPECT_EQ(kernels::mix_tensor_type(QuantMix::Q5_K_M, role, 0, 32, 4096), GgmlType::Q5_K);
  }
  EXPECT_EQ(kernels::mix_tensor_type(QuantMix::Q4_K_M, TensorRole::kOutput, 0, 32, 4096), GgmlType::Q6_K);
  // A fused attn_qkv is attn_v to llama.cpp (category_is_attn_v).
  EXPECT_EQ(q6_layers(QuantMix::Q4_K_M, TensorRole::kAttnQkv, 8), (std::vector<int>{0, 3, 6, 7}));
  EXPECT_EQ(kernels::mix_tensor_type(QuantMix::Q5_K_M, TensorRole::kAttnQkv, 1, 8, 4096), GgmlType::Q5_K);
  // Eight experts: attn_v and attn_k in Q8_0, attn_output in Q5_K (Q4_K_M).
  EXPECT_EQ(kernels::mix_tensor_type(QuantMix::Q4_K_M, TensorRole::kAttnV, 5, 32, 4096, 8), GgmlType::Q8_0);
  EXPECT_EQ(kernels::mix_tensor_type(QuantMix::Q4_K_M, TensorRole::kAttnK, 5, 32, 4096, 8), GgmlType::Q8_0);
  EXPECT_EQ(kernels::mix_tensor_type(QuantMix::Q4_K_M, TensorRole::kAttnOutput, 5, 32, 4096, 8), GgmlType::Q5_K);
  EXPECT_EQ(kernels::mix_tensor_type(QuantMix::Q5_K_M, TensorRole::kAttnOutput, 5, 32, 4096, 8), GgmlType::Q5_K);
}

TEST(QuantMix, RowsNotWholeSuperBlocksFallBackAsLlamaCpp) {
  EXPECT_EQ(kernels::mix_tensor_type(QuantMix::Q4_K_M, TensorRole::kFfnUp, 0, 5, 640), GgmlType::Q5_0);
  EXPECT_EQ(kernels::mix_tensor_type(QuantMix::Q5_K_M, TensorRole::kFfnUp, 0, 5, 640), GgmlType::Q5_1);
  EXPECT_EQ(kernels::mix_tensor_type(QuantMix::Q4_K_M, TensorRole::kFfnDown, 2, 5, 640), GgmlType::Q8_0);
  EXPECT_EQ(kernels::mix_tensor_type(QuantMix::Q4_K_M, TensorRole::kOutput, 0, 5, 128), GgmlType::Q8_0);
  EXPECT_EQ(kernels::mix_tensor_type(QuantMix::Q4_K_M, TensorRole::kAttnQ, 0, 5, 48), GgmlType::F16);
  EXPECT_EQ(kernels::mix_tensor_type(QuantMix::Q4_K_M, TensorRole::kOutput, 0, 5, 48), GgmlType::F16);
}

TEST(QuantMix, NamesParse) {
  EXPECT_EQ(kernels::parse_quantization("q4_k_m"), kernels::Quantization(QuantMix::Q4_K_M));
  EXPECT_EQ(kernels::parse_quantization("q5_k_m"), kernels::Quantization(QuantMix::Q5_K_M));
  EXPECT_EQ(kernels::parse_quantization("q4_k"), kernels::Quantization(kernels::QType::Q4_K));
  EXPECT_EQ(kernels::quantization_name(QuantMix::Q5_K_M), "q5_k_m");
  EXPECT_ANY_THROW(kernels::parse_quantization("q3_k_m"));
  EXPECT_ANY_THROW(kernels::parse_qtype("q4_k_m"));  // one type for every matrix: not a mix
}

// A GGUF tensor name's role and layer ("blk.N.attn_v.weight"; -1: not a layer's).
TensorRole role_of(const std::string& name, int& layer) {
  layer = -1;
  std::sscanf(name.c_str(), "blk.%d.", &layer);
  const std::pair<const char*, TensorRole> roles[] = {
      {".attn_q.", TensorRole::kAttnQ},         {".attn_k.", TensorRole::kAttnK},     {".attn_v.", TensorRole::kAttnV},
      {".attn_output.", TensorRole::kAttnOutput}, {".ffn_gate.", TensorRole::kFfnGate}, {".ffn_up.", TensorRole::kFfnUp},
      {".ffn_down.", TensorRole::kFfnDown}};
  for (const auto& [stem, role] : roles)
    if (name.find(stem) != std::string::npos) return role;
  return name == "output.weight" ? TensorRole::kOutput : TensorRole::kOther;  // token_embd (untied): the base type
}

// Every quantized tensor of llama-quantize's Q4_K_M / Q5_K_M files of tiny-kq-llama has the rule's type,
// and ggml's reference quantizer makes its bytes from the F32 file's values.
TEST(QuantMix, TypesAndBlocksAreLlamaQuantizes) {
  const GgufFile f32(test::gguf_path("tiny-kq-llama-f32.gguf"));
  const int n_layers = static_cast<int>(f32.get_int("llama.block_count"));
  for (const auto& [file, mix] : {std::pair{"tiny-kq-llama-q4_k_m.gguf", QuantMix::Q4_K_M},
                                   std::pair{"tiny-kq-llama-q5_k_m.gguf", QuantMix::Q5_K_M}}) {
    const GgufFile q(test::gguf_path(file));
    int checked = 0;
    for (const GgufTensor& t : q.tensors()) {
      if (t.type == GgmlType::F32) continue;  // norms
      int layer = 0;
      const TensorRole role = role_of(t.name, layer);
      EXPECT_EQ(kernels::mix_tensor_type(mix, role, layer, n_layers, t.row_length()), t.type) << file << " " << t.name;
      const GgufTensor& src = f32.tensor(t.name);
      ASSERT_EQ(src.type, GgmlType::F32);
      std::vector<float> row(static_cast<size_t>(t.row_length()));
      std::vector<uint8_t> ours(t.row_bytes());
      int64_t same = 0;
      for (int64_t r = 0; r < t.rows(); ++r) {
        std::memcpy(row.data(), src.data + static_cast<size_t>(r) * src.row_bytes(), src.row_bytes());
        kernels::quantize_row_ref(t.type, row.data(), t.row_length(), ours.data());
        same += std::memcmp(ours.data(), t.data + static_cast<size_t>(r) * t.row_bytes(), t.row_bytes()) == 0 ? 1 : 0;
      }
      EXPECT_EQ(same, t.rows()) << file << " " << t.name << " " << kernels::ggml_type_name(t.type);
      ++checked;
    }
    EXPECT_GT(checked, 10) << file;
  }
}

// A folder loaded with --quantize q4_k_m / q5_k_m holds each matrix (the token embedding too) in the type
// of the same tensor in llama-quantize's file (tiny-kq-llama: whole super-blocks), and story-656k (128
// wide) in the fallbacks.
TEST(QuantMix, LoadedModelHoldsTheMixsTypes) {
  const LayerMatrix kMatrices[] = {LayerMatrix::kQ, LayerMatrix::kK, LayerMatrix::kV, LayerMatrix::kO,
                                   LayerMatrix::kGate, LayerMatrix::kUp, LayerMatrix::kDown};
  const char* kStems[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  for (const auto& [file, mix] : {std::pair{"tiny-kq-llama-q4_k_m.gguf", QuantMix::Q4_K_M},
                                   std::pair{"tiny-kq-llama-q5_k_m.gguf", QuantMix::Q5_K_M}}) {
    const GgufFile q(test::gguf_path(file));
    auto m = Model::load(test::model_dir("tiny-kq-llama-f32"), {.threads = 2, .progress = {}, .quantize = mix});
    for (int64_t l = 0; l < m->config().num_hidden_layers; ++l)
      for (size_t i = 0; i < std::size(kMatrices); ++i) {
        const std::string name = "blk." + std::to_string(l) + "." + kStems[i] + ".weight";
        EXPECT_EQ(m->matrix_qtype(l, kMatrices[i]), kernels::stored_qtype(q.tensor(name).type)) << file << " " << name;
      }
    EXPECT_EQ(m->lm_head_qtype(), kernels::stored_qtype(q.tensor("output.weight").type)) << file;
    EXPECT_EQ(m->embedding_qtype(), kernels::stored_qtype(q.tensor("token_embd.weight").type)) << file;  // untied
  }
  auto story = Model::load(test::model_dir("story-656k"), {.threads = 2, .progress = {}, .quantize = QuantMix::Q4_K_M});
  const int n = static_cast<int>(story->config().num_hidden_layers);
  for (int l = 0; l < n; ++l) {
    EXPECT_EQ(story->matrix_qtype(l, LayerMatrix::kQ), kernels::QType::Q5_0);
    const bool more = kernels::use_more_bits(l, n);
    EXPECT_EQ(story->matrix_qtype(l, LayerMatrix::kV), more ? kernels::QType::Q8_0 : kernels::QType::Q5_0) << l;
    EXPECT_EQ(story->matrix_qtype(l, LayerMatrix::kDown), more ? kernels::QType::Q8_0 : kernels::QType::Q5_0) << l;
  }
  EXPECT_EQ(story->lm_head_qtype(), kernels::QType::Q8_0);  // tied, 128 wide
  EXPECT_EQ(story->embedding_qtype(), kernels::QType::Q8_0);  // the lookups read the output's blocks
}

// The float GGUF files of the K-quant families loaded with --quantize q4_k_m hold each layer matrix
// and the embedding in the type of the same tensor in llama-quantize's Q4_K_M file of them (Phi-3's
// q, k and v: its fused attn_qkv, gate and up: its fused ffn_up; Mixtral's experts not compared).
TEST(QuantMix, FamiliesHoldLlamaQuantizesTypes) {
  const LayerMatrix kMatrices[] = {LayerMatrix::kQ, LayerMatrix::kK, LayerMatrix::kV, LayerMatrix::kO,
                                   LayerMatrix::kGate, LayerMatrix::kUp, LayerMatrix::kDown};
  const char* kStems[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  const char* kFused[] = {"attn_qkv", "attn_qkv", "attn_qkv", "attn_output", "ffn_up", "ffn_up", "ffn_down"};
  for (const auto& [family, source] : {std::pair<std::string, std::string>{"gemma2", "bf16"}, {"gemma3", "bf16"},
                                       {"mistral", "f16"}, {"mixtral", "bf16"}, {"phi3", "bf16"}}) {
    const GgufFile q(test::gguf_path("tiny-kq-" + family + "-q4_k_m.gguf"));
    auto m = Model::load(test::gguf_path("tiny-kq-" + family + "-" + source + ".gguf"),
                         {.threads = 2, .progress = {}, .quantize = QuantMix::Q4_K_M});
    int checked = 0;
    for (int64_t l = 0; l < m->config().num_hidden_layers; ++l)
      for (size_t i = 0; i < std::size(kMatrices); ++i) {
        const std::string prefix = "blk." + std::to_string(l) + ".";
        const GgufTensor* t = q.find_tensor(prefix + kStems[i] + ".weight");
        if (t == nullptr) t = q.find_tensor(prefix + kFused[i] + ".weight");
        if (t == nullptr) continue;  // Mixtral's MLP: experts only
        EXPECT_EQ(m->matrix_qtype(l, kMatrices[i]), kernels::stored_qtype(t->type)) << family << " " << t->name;
        ++checked;
      }
    EXPECT_GT(checked, 0) << family;
    const GgufTensor* out = q.find_tensor("output.weight");
    if (out != nullptr) {
      EXPECT_EQ(m->lm_head_qtype(), kernels::stored_qtype(out->type)) << family;
    }
    EXPECT_EQ(m->embedding_qtype(), kernels::stored_qtype(q.tensor("token_embd.weight").type)) << family;
  }
}

// `ember convert --quantize q4_k_m / q5_k_m` of tiny-kq-llama writes llama-quantize's file: every
// tensor (the token embedding too) in the same type with the same bytes, and the same file type.
TEST(QuantMix, ConvertWritesLlamaQuantizesFile) {
  for (const auto& [file, mix] : {std::pair{"tiny-kq-llama-q4_k_m.gguf", QuantMix::Q4_K_M},
                                   std::pair{"tiny-kq-llama-q5_k_m.gguf", QuantMix::Q5_K_M}}) {
    const std::string out = (std::filesystem::temp_directory_path() / ("ember-mix-" + std::string(file))).string();
    ConvertOptions o;
    set_convert_quantize(o, kernels::quant_mix_name(mix));
    ASSERT_EQ(o.mix, mix);
    o.threads = 2;
    convert_to_gguf(test::model_dir("tiny-kq-llama-f32"), out, o);
    const GgufFile ours(out), theirs(test::gguf_path(file));
    EXPECT_EQ(ours.get_int("general.file_type"), theirs.get_int("general.file_type")) << file;
    ASSERT_EQ(ours.tensors().size(), theirs.tensors().size()) << file;
    for (const GgufTensor& t : theirs.tensors()) {
      const GgufTensor& o_t = ours.tensor(t.name);
      EXPECT_EQ(o_t.type, t.type) << file << " " << t.name;
      ASSERT_EQ(o_t.size_bytes, t.size_bytes) << file << " " << t.name;
      EXPECT_EQ(std::memcmp(o_t.data, t.data, t.size_bytes), 0) << file << " " << t.name;
    }
    std::filesystem::remove(out);
  }
}

}  // namespace
}  // namespace ember::model
