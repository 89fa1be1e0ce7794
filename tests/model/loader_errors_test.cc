// Malformed model folders get clear errors naming the file and tensor, never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "engine/scheduler.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "error_of.h"
#include "test_paths.h"

namespace ember::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("ember_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A safetensors file with the given header JSON and `data_bytes` zero bytes of data.
std::string safetensors(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + header + std::string(data_bytes, '\0');
}

using test::error_of;

TEST(SafetensorsErrors, TruncatedFile) {
  TempDir d;
  write_bytes(d.file("a.safetensors"), "abc");
  const std::string e = error_of([&] { SafetensorsFile f(d.file("a.safetensors")); });
  EXPECT_NE(e.find("a.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
}

TEST(SafetensorsErrors, HeaderLengthPastEnd) {
  TempDir d;
  std::string bytes = safetensors("{}", 0);
  bytes[0] = 100;  // claims a 100-byte header in a 10-byte file
  write_bytes(d.file("a.safetensors"), bytes);
  const std::string e = error_of([&] { SafetensorsFile f(d.file("a.safetensors")); });
  EXPECT_NE(e.find("past the end"), std::string::npos) << e;
}

TEST(SafetensorsErrors, HugeHeaderLength) {
  TempDir d;
  std::string bytes = safetensors("{}", 0);
  bytes[7] = 0x10;
  write_bytes(d.file("a.safetensors"), bytes);
  EXPECT_NE(error_of([&] { SafetensorsFile f(d.file("a.safetensors")); }).find("exceeds the limit"), std::string::npos);
}

TEST(SafetensorsErrors, InvalidJsonHeader) {
  TempDir d;
  write_bytes(d.file("a.safetensors"), safetensors("{not json", 0));
  EXPECT_NE(error_of([&] { SafetensorsFile f(d.file("a.safetensors")); }).find("not valid JSON"), std::string::npos);
}

TEST(SafetensorsErrors, RangeOutsideFile) {
  TempDir d;
  write_bytes(d.file("a.safetensors"),
              safetensors(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8));
  const std::string e = error_of([&] { SafetensorsFile f(d.file("a.safetensors")); });
  EXPECT_NE(e.find("\"w\""), std::string::npos) << e;
  EXPECT_NE(e.find("outside"), std::string::npos) << e;
}

TEST(SafetensorsErrors, OverlappingRanges) {
  TempDir d;
  write_bytes(d.file("a.safetensors"),
              safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12));
  const std::string e = error_of([&] { SafetensorsFile f(d.file("a.safetensors")); });
  EXPECT_NE(e.find("overlapping"), std::string::npos) << e;
  EXPECT_NE(e.find("\"a\""), std::string::npos) << e;
  EXPECT_NE(e.find("\"b\""), std::string::npos) << e;
}

TEST(SafetensorsErrors, DtypeShapeMismatch) {
  TempDir d;
  write_bytes(d.file("a.safetensors"),
              safetensors(R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,8]}})", 8));
  const std::string e = error_of([&] { SafetensorsFile f(d.file("a.safetensors")); });
  EXPECT_NE(e.find("needs 6 bytes"), std::string::npos) << e;
}

TEST(SafetensorsErrors, UnknownDtype) {
  TempDir d;
  write_bytes(d.file("a.safetensors"),
              safetensors(R"({"w":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8));
  EXPECT_NE(error_of([&] { SafetensorsFile f(d.file("a.safetensors")); }).find("unsupported dtype"), std::string::npos);
}

// A copy of shared model `src`'s config.json and tensors in `d`, each tensor under rename(name)
// ("": left out).
void copy_model(const std::string& src, const TempDir& d, const std::function<std::string(const std::string&)>& rename) {
  fs::copy_file(src + "/config.json", d.file("config.json"));
  SafetensorsFile orig(src + "/model.safetensors");
  json header = json::object();
  std::string data;
  for (const auto& [name, t] : orig.tensors()) {
    const std::string to = rename(name);
    if (to.empty()) continue;
    header[to] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.size_bytes}}};
    data.append(static_cast<const char*>(t.data), t.size_bytes);
  }
  const std::string h = header.dump();
  write_bytes(d.file("model.safetensors"), safetensors(h, 0) + data);
}

// A copy of a shared model folder with one tensor removed from its safetensors file.
TEST(ModelLoadErrors, MissingTensorIsNamed) {
  TempDir d;
  copy_model(test::model_dir("tiny-llama-f32"), d, [](const std::string& name) {
    return name == "model.layers.1.mlp.up_proj.weight" ? std::string() : name;
  });
  const std::string e = error_of([&] { Model::load(d.str()); });
  EXPECT_NE(e.find("model.layers.1.mlp.up_proj.weight"), std::string::npos) << e;
}

// The final-normed hidden states of every token of `ids` and the last token's logits (if the model has them).
std::pair<std::vector<float>, std::vector<float>> outputs(Model& m, const std::vector<int32_t>& ids, bool logits) {
  auto cache = m.make_cache(static_cast<int64_t>(ids.size()));
  KvSequence seq(*cache);
  std::vector<float> hidden(ids.size() * static_cast<size_t>(m.config().hidden_size));
  std::vector<float> out(logits ? static_cast<size_t>(m.config().vocab_size) : 0);
  ForwardItem item{&seq, ids, logits ? out.data() : nullptr, false};
  item.hidden = hidden.data();
  m.forward(std::span<ForwardItem>(&item, 1));
  return {hidden, out};
}

// A checkpoint of the base model alone (as sentence-transformers saves Qwen3-Embedding): no
// "model." prefix, and no lm_head where only hidden states are wanted.
TEST(ModelLoad, BaseModelCheckpointWithoutPrefixOrLmHead) {
  const std::string src = test::model_dir("tiny-llama-meanpool-f32");  // untied: lm_head.weight is its own tensor
  const std::vector<int32_t> ids = {1, 80, 147, 201, 282};
  auto reference = Model::load(src);
  const auto [hidden, logits] = outputs(*reference, ids, true);
  auto strip = [](const std::string& name) { return name.rfind("model.", 0) == 0 ? name.substr(6) : name; };
  {
    TempDir d;
    copy_model(src, d, strip);  // lm_head kept
    auto m = Model::load(d.str());
    EXPECT_EQ(outputs(*m, ids, true), std::make_pair(hidden, logits));
  }
  TempDir d;
  copy_model(src, d, [&](const std::string& name) { return name == "lm_head.weight" ? std::string() : strip(name); });
  const std::string e = error_of([&] { Model::load(d.str()); });
  EXPECT_NE(e.find("lm_head.weight"), std::string::npos) << e;
  LoadOptions hidden_only;
  hidden_only.lm_head = LoadOptions::LmHead::kNone;
  auto m = Model::load(d.str(), hidden_only);
  EXPECT_FALSE(m->has_logits());
  EXPECT_EQ(outputs(*m, ids, false).first, hidden);
  // A server loads it where stored: here it is not, so generation is refused by name.
  LoadOptions if_stored;
  if_stored.lm_head = LoadOptions::LmHead::kIfStored;
  auto served = Model::load(d.str(), if_stored);
  EXPECT_FALSE(served->has_logits());
  const auto tok = tokenizer::Tokenizer::from_folder(src);
  engine::Scheduler scheduler(*served, tok, {.max_parallel = 1, .context = 64});
  engine::GenerationRequest req;
  req.prompt = ids;
  EXPECT_NE(error_of([&] { scheduler.submit(req); }).find("lm_head"), std::string::npos);
  EXPECT_TRUE(Model::load(src, if_stored)->has_logits());
}

TEST(ModelLoadErrors, WrongShapeIsNamed) {
  TempDir d;
  const std::string src = test::model_dir("tiny-llama-f32");
  json cfg = json::parse(read_file(src + "/config.json"));
  cfg["intermediate_size"] = cfg["intermediate_size"].get<int>() + 1;
  std::ofstream(d.file("config.json")) << cfg.dump();
  fs::copy_file(src + "/model.safetensors", d.file("model.safetensors"));
  const std::string e = error_of([&] { Model::load(d.str()); });
  EXPECT_NE(e.find("has shape"), std::string::npos) << e;
  EXPECT_NE(e.find("gate_proj"), std::string::npos) << e;
}

TEST(ModelLoadErrors, NoWeightsInFolder) {
  TempDir d;
  fs::copy_file(test::model_dir("tiny-llama-f32") + "/config.json", d.file("config.json"));
  EXPECT_NE(error_of([&] { Model::load(d.str()); }).find("no model.safetensors"), std::string::npos);
}

TEST(ModelLoadErrors, ShardIndexNamesMissingTensor) {
  TempDir d;
  const std::string src = test::model_dir("tiny-llama-sharded-bf16");
  for (const auto& e : fs::directory_iterator(src)) fs::copy_file(e.path(), d.file(e.path().filename().string()));
  json index = json::parse(read_file(d.file("model.safetensors.index.json")));
  index["weight_map"]["model.layers.9.extra.weight"] = "model-00001-of-00002.safetensors";
  fs::remove(d.file("model.safetensors.index.json"));
  std::ofstream(d.file("model.safetensors.index.json")) << index.dump();
  const std::string e = error_of([&] { Model::load(d.str()); });
  EXPECT_NE(e.find("model.layers.9.extra.weight"), std::string::npos) << e;
}

}  // namespace
}  // namespace ember::model
