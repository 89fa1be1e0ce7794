// GgufFile on the shared GGUF files and on small files written here: metadata of every value type,
// tensor infos in both dimension orders, and the dequantized rows of every block type against
// gguf-py's reference values in ../shared/testdata/gguf/*.json.
#include "model/gguf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <set>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "gguf_test_writer.h"
#include "model/gguf_tokenizer.h"
#include "model/safetensors.h"
#include "gguf_fixtures.h"
#include "gguf_golden.h"
#include "test_paths.h"

namespace ember::model {
namespace {

using kernels::GgmlType;

using test::gguf_path;

// Every JSON under testdata/gguf/, subfolders too (families/, hybrid/, gpt-oss/, ...), sorted.
std::vector<std::string> all_expectation_files() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(test::testdata("gguf")))
    if (e.is_regular_file() && e.path().extension() == ".json") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Every block type of every file in every expectation file: the first rows of the named tensor,
// dequantized, equal gguf-py's float32 values; and where a kernel keeps the type as stored
// (kernels::from_ggml_blocks), its repacked rows give the same values.
TEST(GgufDequantize, EveryBlockTypeMatchesTheReferenceRows) {
  size_t checked = 0, repacked = 0;
  std::set<std::string> types;
  kernels::ThreadPool pool(1);
  for (const auto& json_path : all_expectation_files()) {
    SCOPED_TRACE(json_path);
    std::ifstream in(json_path);
    const auto doc = nlohmann::json::parse(in);
    if (!doc.contains("files")) continue;
    for (const auto& [file, entry] : doc["files"].items()) {
      if (!entry.contains("dequantized_rows")) continue;
      SCOPED_TRACE(file);
      const GgufFile g(gguf_path(file));
      checked += test::check_dequantized_rows(g, entry);
      for (const auto& [type_name, ref] : entry["dequantized_rows"].items()) {
        types.insert(type_name);
        const GgufTensor& t = g.tensor(ref["tensor"].get<std::string>());
        if (!kernels::has_stored_kernel(t.type) || t.shape.size() != 2) continue;
        const auto& rows = ref["rows"];
        const int64_t n = static_cast<int64_t>(rows.size());
        std::vector<float> out(static_cast<size_t>(t.row_length()));
        const kernels::QuantizedMatrix m = kernels::from_ggml_blocks(t.type, t.data, n, t.row_length(), pool);
        for (int64_t r = 0; r < n; ++r) {
          const auto expected = rows[static_cast<size_t>(r)].get<std::vector<float>>();
          kernels::copy_row(m.view(), r, out.data());
          EXPECT_EQ(out, expected) << type_name << ": repacked row " << r;
        }
        ++repacked;
      }
    }
  }
  EXPECT_GE(checked, 10u);
  std::string seen;
  for (const std::string& t : types) seen += t + " ";
  std::printf("dequantized rows checked: %zu tensors of types %s(%zu through the stored-block kernels)\n", checked,
              seen.c_str(), repacked);
}

TEST(GgufFile, ReadsTheSharedFiles) {
  const GgufFile g(gguf_path("tiny-kq-llama-q4_k_m.gguf"));
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.alignment(), GgufFile::kDefaultAlignment);
  EXPECT_EQ(g.data_offset() % g.alignment(), 0u);
  EXPECT_EQ(g.get_string("general.architecture"), "llama");
  EXPECT_EQ(g.get_int("llama.block_count"), 2);
  EXPECT_GT(g.get_float("llama.attention.layer_norm_rms_epsilon"), 0.0);
  EXPECT_TRUE(g.get_bool("tokenizer.ggml.add_bos_token"));
  const auto tokens = g.get_string_array("tokenizer.ggml.tokens");
  EXPECT_EQ(static_cast<int64_t>(tokens.size()), g.get_int("llama.vocab_size"));
  EXPECT_EQ(g.get_float_array("tokenizer.ggml.scores").size(), tokens.size());
  EXPECT_EQ(g.get_int_array("tokenizer.ggml.token_type").size(), tokens.size());

  // A matrix: GGUF dims are [in, out], the Hugging Face shape [out, in].
  const GgufTensor& e = g.tensor("token_embd.weight");
  EXPECT_EQ(e.type, GgmlType::Q4_K);
  EXPECT_EQ(e.dims, (std::vector<int64_t>{g.get_int("llama.embedding_length"), g.get_int("llama.vocab_size")}));
  EXPECT_EQ(e.shape, (std::vector<int64_t>{e.dims[1], e.dims[0]}));
  EXPECT_EQ(e.rows(), e.dims[1]);
  EXPECT_EQ(e.size_bytes, static_cast<size_t>(e.rows()) * e.row_bytes());
  for (const GgufTensor& t : g.tensors()) {
    EXPECT_GE(t.offset, g.data_offset()) << t.name;
    EXPECT_LE(t.offset + t.size_bytes, g.file_size()) << t.name;
    EXPECT_EQ(&g.tensor(t.name), &t);
  }
  EXPECT_EQ(g.find_tensor("no.such.tensor"), nullptr);
}

TEST(GgufFile, EverySharedFileOpensAndItsMetadataDecodes) {
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(test::model_dir("gguf"))) {
    if (e.path().extension() != ".gguf") continue;
    const GgufFile g(e.path().string());
    for (const GgufKv& kv : g.metadata()) EXPECT_NO_THROW(g.get_json(kv.key)) << e.path() << " " << kv.key;
    EXPECT_FALSE(g.tensors().empty()) << e.path();
    // The small vocabularies here (the large ones are gguf_tokenizer_test's).
    if (g.find("tokenizer.ggml.tokens")->count <= 4096) {
      EXPECT_NO_THROW(gguf_tokenizer(g).encode("Once upon a time", true)) << e.path();
    }
    ++files;
  }
  EXPECT_GE(files, 10u);
}

// The layout the model loader must undo, shown on files converted from shared Hugging Face folders:
// GGUF rows are Hugging Face rows ([out, in] with dims reversed, same bytes), except that for arch
// llama the rows of attn_q / attn_k are permuted within each head: GGUF row 2i + j of a head is
// Hugging Face row j * head_dim/2 + i (llama.cpp rotates adjacent pairs). qwen2 keeps the order.
const uint8_t* hf_row(const TensorInfo& t, int64_t r) {
  return static_cast<const uint8_t*>(t.data) + r * t.shape[1] * static_cast<int64_t>(dtype_size(t.dtype));
}

TEST(GgufLayout, RowsAreHuggingFaceRowsWithLlamaQKPermutedPerHead) {
  const GgufFile g(gguf_path("tiny-kq-llama-f32.gguf"));
  const SafetensorsFile hf(test::model_dir("tiny-kq-llama-f32/model.safetensors"));
  auto same = [&](const char* gguf_name, const char* hf_name) {
    const GgufTensor& t = g.tensor(gguf_name);
    const TensorInfo& h = hf.tensors().at(hf_name);
    EXPECT_EQ(t.shape, h.shape) << gguf_name;
    ASSERT_EQ(t.size_bytes, h.size_bytes) << gguf_name;
    EXPECT_EQ(std::memcmp(t.data, h.data, t.size_bytes), 0) << gguf_name;
  };
  same("token_embd.weight", "model.embed_tokens.weight");
  same("blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight");
  same("blk.1.attn_v.weight", "model.layers.1.self_attn.v_proj.weight");
  const int64_t head_dim = g.get_int("llama.attention.key_length");
  auto permuted = [&](const char* gguf_name, const char* hf_name, int64_t heads) {
    const GgufTensor& t = g.tensor(gguf_name);
    const TensorInfo& h = hf.tensors().at(hf_name);
    ASSERT_EQ(t.shape, h.shape) << gguf_name;
    ASSERT_EQ(t.rows(), heads * head_dim);
    for (int64_t head = 0; head < heads; ++head)
      for (int64_t i = 0; i < head_dim / 2; ++i)
        for (int64_t j = 0; j < 2; ++j) {
          const int64_t gr = head * head_dim + 2 * i + j, hr = head * head_dim + j * head_dim / 2 + i;
          ASSERT_EQ(std::memcmp(t.data + gr * t.row_bytes(), hf_row(h, hr), t.row_bytes()), 0) << gguf_name << " row " << gr;
        }
  };
  permuted("blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight", g.get_int("llama.attention.head_count"));
  permuted("blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight", g.get_int("llama.attention.head_count_kv"));

  const GgufFile q(gguf_path("tiny-qwen2-bf16.gguf"));
  const SafetensorsFile qhf(test::model_dir("tiny-qwen2-bf16/model.safetensors"));
  const GgufTensor& qq = q.tensor("blk.0.attn_q.weight");
  const TensorInfo& qh = qhf.tensors().at("model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(qq.type, GgmlType::BF16);
  ASSERT_EQ(qq.size_bytes, qh.size_bytes);
  EXPECT_EQ(std::memcmp(qq.data, qh.data, qq.size_bytes), 0);
}

TEST(GgufFile, MovingKeepsTheTensorBytes) {
  GgufFile a(gguf_path("tiny-qwen3-q8_0.gguf"));
  const uint8_t* data = a.tensor("token_embd.weight").data;
  const GgufFile b(std::move(a));
  EXPECT_EQ(b.tensor("token_embd.weight").data, data);
  EXPECT_EQ(b.get_string("general.architecture"), "qwen3");
}

TEST(GgufFile, EveryMetadataTypeAndNestedArrays) {
  using test::le;
  test::GgufWriter w(2);  // version 2 has the same layout as 3
  w.kv("t.u8", 0, le(200, 1));
  w.kv("t.i8", 1, le(0xF6, 1));  // -10
  w.kv("t.u16", 2, le(60000, 2));
  w.kv("t.i16", 3, le(0x8000, 2));  // -32768
  w.kv_u32("t.u32", 4000000000u);
  w.kv("t.i32", 5, le(0xFFFFFFFFu, 4));  // -1
  w.kv("t.f32", 6, test::f32_bytes(0.25f));
  w.kv_bool("t.bool", true);
  w.kv_string("t.str", "héllo");
  w.kv("t.u64", 10, le(1ull << 40, 8));
  w.kv("t.i64", 11, le(static_cast<uint64_t>(-5), 8));
  w.kv("t.f64", 12, test::f64_bytes(-1.5));
  w.kv("t.big", 10, le(~0ull, 8));
  w.kv("t.ints", 9, test::GgufWriter::array_of(5, 3) + le(1, 4) + le(0xFFFFFFFEu, 4) + le(7, 4));
  w.kv("t.floats", 9, test::GgufWriter::array_of(6, 2) + test::f32_bytes(1.0f) + test::f32_bytes(-0.5f));
  w.kv_strings("t.strs", {"a", "", "ccc"});
  // [[1, 2], [], [true]]: an array of arrays of different element types.
  w.kv("t.nested", 9,
       test::GgufWriter::array_of(9, 3) + test::GgufWriter::array_of(0, 2) + le(1, 1) + le(2, 1) +
           test::GgufWriter::array_of(8, 0) + test::GgufWriter::array_of(7, 1) + le(1, 1));
  w.kv_u32("general.alignment", 64);
  w.tensor("a", {4}, 0, std::string(16, '\1'));
  w.tensor("b", {32, 2}, 8, std::string(68, '\2'));
  const test::TempFolder dir;
  const GgufFile g(dir.write("all.gguf", w.bytes(64)));
  EXPECT_EQ(g.version(), 2u);
  EXPECT_EQ(g.alignment(), 64u);
  EXPECT_EQ(g.get_int("t.u8"), 200);
  EXPECT_EQ(g.get_int("t.i8"), -10);
  EXPECT_EQ(g.get_int("t.u16"), 60000);
  EXPECT_EQ(g.get_int("t.i16"), -32768);
  EXPECT_EQ(g.get_int("t.u32"), 4000000000ll);
  EXPECT_EQ(g.get_int("t.i32"), -1);
  EXPECT_EQ(g.get_float("t.f32"), 0.25);
  EXPECT_TRUE(g.get_bool("t.bool"));
  EXPECT_EQ(g.get_string("t.str"), "héllo");
  EXPECT_EQ(g.get_int("t.u64"), 1ll << 40);
  EXPECT_EQ(g.get_int("t.i64"), -5);
  EXPECT_EQ(g.get_float("t.f64"), -1.5);
  EXPECT_EQ(g.get_json("t.big").get<uint64_t>(), ~0ull);
  EXPECT_THROW(g.get_int("t.big"), Error);  // does not fit an int64
  EXPECT_EQ(g.get_int_array("t.ints"), (std::vector<int64_t>{1, -2, 7}));
  EXPECT_EQ(g.get_float_array("t.floats"), (std::vector<double>{1.0, -0.5}));
  EXPECT_EQ(g.get_string_array("t.strs"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(g.get_json("t.nested"), nlohmann::json::parse("[[1, 2], [], [true]]"));
  EXPECT_EQ(g.get_int_or("absent", 9), 9);
  EXPECT_EQ(g.get_string_or("absent", "x"), "x");
  ASSERT_EQ(g.tensors().size(), 2u);
  EXPECT_EQ(g.tensor("b").offset % 64, 0u);
  EXPECT_EQ(g.tensor("b").size_bytes, 68u);
  EXPECT_EQ(g.tensor("b").shape, (std::vector<int64_t>{2, 32}));
  EXPECT_EQ(g.tensor("a").data[0], 1);
}

// Accessor errors name the file and the key, and what the key holds.
TEST(GgufFile, AccessorErrorsNameTheKey) {
  const GgufFile g(gguf_path("tiny-qwen2-q4_0.gguf"));
  auto message = [&](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string missing = message([&] { g.get_int("qwen2.no_such_key"); });
  EXPECT_NE(missing.find("qwen2.no_such_key"), std::string::npos) << missing;
  EXPECT_NE(missing.find("tiny-qwen2-q4_0.gguf"), std::string::npos) << missing;
  const std::string wrong = message([&] { g.get_int("general.architecture"); });
  EXPECT_NE(wrong.find("general.architecture"), std::string::npos) << wrong;
  EXPECT_NE(wrong.find("holds string"), std::string::npos) << wrong;
  EXPECT_NE(wrong.find("offset"), std::string::npos) << wrong;
  const std::string arr = message([&] { g.get_float_array("tokenizer.ggml.tokens"); });
  EXPECT_NE(arr.find("array of string"), std::string::npos) << arr;
  const std::string tensor = message([&] { g.tensor("blk.9.attn_q.weight"); });
  EXPECT_NE(tensor.find("blk.9.attn_q.weight"), std::string::npos) << tensor;
}

}  // namespace
}  // namespace ember::model
