// ember convert: every folder of ../shared/models whose model_type convert writes (found by walking
// the folder) is written as GGUF and read back by Ember: the same last-position logits as the folder
// (within float rounding as stored, close as Q8_0), the same token ids from the GGUF's tokenizer, and
// llama.cpp's logits on the file within testdata/gguf/README.md's float tolerance (skipped where
// llama.cpp is not built). Refusals name what they refuse; a failed write leaves no file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "base/error.h"
#include "base/mapped_file.h"
#include "fuzz_util.h"
#include "kernels/gguf_quants.h"
#include "model/gguf.h"
#include "model/gguf_architecture.h"
#include "model/gguf_convert.h"
#include "model/gguf_tokenizer.h"
#include "model/gguf_writer.h"
#include "model/load_tokenizer.h"
#include "model/model.h"
#include "run_command.h"
#include "test_paths.h"

namespace ember::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Every model folder whose config.json's model_type convert writes, sorted.
std::vector<std::string> convertible_folders() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(test::model_dir(""))) {
    const fs::path config = e.path() / "config.json";
    if (!fs::exists(config)) continue;
    const json c = json::parse(read_file(config.string()));
    if (c.contains("model_type") && gguf_architecture_to_write(c["model_type"].get<std::string>()) != nullptr)
      out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The message convert_to_gguf fails with on the model folder at `path`, "" when it writes `out`.
std::string convert_error(const std::string& path, const std::string& out, const ConvertOptions& o = {}) {
  try {
    convert_to_gguf(path, out, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Converts `folder` into `dir`; "" with `refusal` set when convert refuses it.
std::string convert(const std::string& folder, const fuzz::TempDir& dir, const std::string& type, std::string& refusal) {
  const std::string out = dir.path() + "/" + folder + "-" + (type.empty() ? "stored" : type) + ".gguf";
  ConvertOptions o;
  if (!type.empty()) o.type = parse_convert_type(type);
  refusal = convert_error(test::model_dir(folder), out, o);
  return refusal.empty() ? out : "";
}

// A prompt of the folder's own tokenizer: 12 tokens at most, within every tiny model's window (16).
std::vector<int32_t> prompt_ids(const std::string& folder) {
  std::vector<int32_t> ids = load_tokenizer(test::model_dir(folder)).encode("Once upon a time, a little girl found a red ball.", true);
  if (ids.size() > 12) ids.resize(12);
  return ids;
}

std::vector<float> convert_logits(const std::string& path, const std::vector<int32_t>& ids,
                                  kernels::QType quantize = kernels::QType::None) {
  auto m = Model::load(path, {.threads = 2, .progress = {}, .quantize = quantize});
  auto cache = m->make_cache(static_cast<int64_t>(ids.size()) + 1);
  KvSequence seq(*cache);
  return m->forward(seq, ids);
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
  return m;
}

// testdata/gguf/README.md's tolerance for float files.
double float_tolerance(const std::vector<float>& expected) { return 1e-3 + 1e-4 * max_abs(expected); }

// A refusal names the config.json field at fault.
void expect_refused_by_field(const std::string& folder, const std::string& refusal) {
  EXPECT_NE(refusal.find("config.json: "), std::string::npos) << folder << ": " << refusal;
}

// Each Q8_0 tensor of `quantized` against the same tensor of `plain` (a float file): the matrices
// quantized, their blocks rounding each weight to the nearest step; the rest float.
void expect_blocks_round_the_floats(const std::string& quantized, const std::string& plain) {
  const GgufFile q(quantized), f(plain);
  ASSERT_EQ(q.tensors().size(), f.tensors().size());
  int64_t blocks = 0;
  for (const GgufTensor& t : q.tensors()) {
    const GgufTensor& ft = f.tensor(t.name);
    ASSERT_EQ(t.dims, ft.dims) << t.name;
    if (t.dims.size() == 1 || t.name == "token_embd.weight" || t.name.find("ffn_gate_inp") != std::string::npos) {
      EXPECT_TRUE(t.type == kernels::GgmlType::F32 || t.type == ft.type) << t.name << " is not float";
      continue;
    }
    if (t.type != kernels::GgmlType::Q8_0) {
      EXPECT_NE(t.row_length() % 32, 0) << t.name << ": rows of whole blocks stay " << kernels::ggml_type_name(t.type);
      continue;
    }
    std::vector<float> a(static_cast<size_t>(t.row_length())), b(a.size());
    for (int64_t r = 0; r < t.rows(); ++r) {
      kernels::dequantize_row(t.type, t.data + r * t.row_bytes(), t.row_length(), a.data());
      kernels::dequantize_row(ft.type, ft.data + r * ft.row_bytes(), ft.row_length(), b.data());
      for (int64_t k = 0; k < t.row_length(); k += 32, ++blocks) {
        float amax = 0;
        for (int64_t j = k; j < k + 32; ++j) amax = std::max(amax, std::fabs(b[static_cast<size_t>(j)]));
        const float step = amax / 127.0f;
        for (int64_t j = k; j < k + 32; ++j)
          ASSERT_LE(std::fabs(a[static_cast<size_t>(j)] - b[static_cast<size_t>(j)]), 0.6f * step + 1e-30f)
              << t.name << " row " << r << " column " << j;
      }
    }
  }
  EXPECT_GT(blocks, 0) << quantized << " has no Q8_0 blocks";
}

class GgufConvert : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufConvert, SameLogitsAsTheFolder) {
  const std::string& folder = GetParam();
  fuzz::TempDir dir;
  std::string refusal;
  const std::string stored = convert(folder, dir, "", refusal);
  if (stored.empty()) {
    expect_refused_by_field(folder, refusal);
    GTEST_SKIP() << "convert refuses " << folder << ": " << refusal;
  }
  const std::vector<int32_t> ids = prompt_ids(folder);
  const std::vector<float> want = convert_logits(test::model_dir(folder), ids);
  const std::vector<float> got = convert_logits(stored, ids);
  ASSERT_EQ(got.size(), want.size());
  const double d = max_abs_diff(got, want), tol = float_tolerance(want);
  std::printf("%-28s as stored: max|d| %.3g (tolerance %.3g)\n", folder.c_str(), d, tol);
  EXPECT_LE(d, tol) << folder;

  // Q8_0: every weight of every Q8_0 block within half a step (and the float16 scale's rounding) of
  // the float file's; the embedding and 1-D tensors float; the logits close to the folder's: Q8_0 moves
  // these deliberately peaked random models' logits by 1-10% of the largest (llama.cpp's own Q8_0 files
  // by as much: up to 21% on the 4-layer smollm3, testdata/gguf/README.md).
  const std::string q8 = convert(folder, dir, "q8_0", refusal);
  ASSERT_FALSE(q8.empty()) << refusal;
  expect_blocks_round_the_floats(q8, stored);
  const std::vector<float> q = convert_logits(q8, ids);
  const double dq = max_abs_diff(q, want), tolq = 1e-3 + 0.15 * max_abs(want);
  std::printf("%-28s q8_0:      max|d| %.3g (%.1f%% of the largest logit)\n", folder.c_str(), dq, 100 * dq / max_abs(want));
  EXPECT_LE(dq, tolq) << folder;
}

TEST_P(GgufConvert, TokenizerFromTheFileGivesTheFolderIds) {
  const std::string& folder = GetParam();
  fuzz::TempDir dir;
  std::string refusal;
  const std::string path = convert(folder, dir, "", refusal);
  if (path.empty()) GTEST_SKIP() << "convert refuses " << folder << ": " << refusal;
  const tokenizer::Tokenizer hf = load_tokenizer(test::model_dir(folder)), gguf = load_tokenizer(path);
  for (const char* text : {"Once upon a time, there was a little girl named Lily.", "Hello world!\n\n  Tabs\tand 123 numbers",
                           "caf\xC3\xA9 na\xC3\xAFve \xE2\x80\x94 emoji \xF0\x9F\x98\x80 done.", "  leading spaces", ""})
    for (bool special : {true, false})
      EXPECT_EQ(gguf.encode(text, special), hf.encode(text, special)) << folder << ": \"" << text << "\"";
  EXPECT_EQ(gguf.config().bos_token, hf.config().bos_token);
  EXPECT_EQ(gguf.config().eos_token, hf.config().eos_token);
  EXPECT_EQ(gguf.config().chat_template, hf.config().chat_template);
}

// The tokenizer alone, from every folder of ../shared/tokenizers with expected ids in
// testdata/tokenizer: written as tokenizer.ggml.*, read back by Ember, the ids Hugging Face gives.
TEST(GgufConvertTokenizer, RealVocabulariesKeepTheirIds) {
  fuzz::TempDir dir;
  int folders = 0;
  for (const auto& e : fs::directory_iterator(test::shared_dir() + "/tokenizers")) {
    const std::string name = e.path().filename().string(), cases = test::testdata("tokenizer/" + name + ".jsonl");
    if (!fs::exists(cases) || !fs::exists(e.path() / "tokenizer.json")) continue;
    GgufWriter w;
    w.kv_string("general.architecture", "llama");
    try {
      write_gguf_tokenizer(w, e.path().string(), 0);
    } catch (const Error& err) {  // a pre-tokenizer llama.cpp has no name for Ember to write
      std::printf("%-28s refused: %s\n", name.c_str(), err.what());
      EXPECT_NE(std::string(err.what()).find("pre_tokenizer"), std::string::npos) << err.what();
      continue;
    }
    const GgufFile g(dir.write(name + ".gguf", w.bytes()));
    const tokenizer::Tokenizer tok = gguf_tokenizer(g);
    std::ifstream in(cases);
    int total = 0, same = 0;
    for (std::string line; std::getline(in, line); ++total) {
      const json c = json::parse(line);
      const bool ok = tok.encode(c["text"].get<std::string>(), c["add_special_tokens"].get<bool>()) == c["ids"].get<std::vector<int32_t>>();
      same += ok;
    }
    std::printf("%-28s %s: %d of %d cases\n", name.c_str(), g.get_string("tokenizer.ggml.model").c_str(), same, total);
    // What tokenizer.ggml.* cannot carry: added tokens matched after normalization (a text that starts
    // with one gets the prefix space in front of it) and Metaspace's prepend_scheme "first" (no prefix
    // on a text that starts with a space, none after a special token). Elsewhere every case agrees.
    const json t = json::parse(read_file((e.path() / "tokenizer.json").string()));
    bool normalized_added = false;
    for (const json& a : t["added_tokens"]) normalized_added = normalized_added || a.value("normalized", false);
    if (normalized_added || t["pre_tokenizer"].dump().find("Metaspace") != std::string::npos)
      EXPECT_GE(same, total * 85 / 100) << name;
    else
      EXPECT_EQ(same, total) << name;
    ++folders;
  }
  EXPECT_GT(folders, 0);
}

INSTANTIATE_TEST_SUITE_P(Folders, GgufConvert, ::testing::ValuesIn(convertible_folders()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param;
                           for (char& ch : s)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

TEST(GgufConvertFolders, HasFolders) { EXPECT_FALSE(convertible_folders().empty()); }

// llama.cpp's last-position logits on `path` for `ids` (../shared/peer/llama-peer.sh logits).
std::vector<float> llama_cpp_logits(const std::string& path, const std::vector<int32_t>& ids, const fuzz::TempDir& dir) {
  std::string line = "{\"ids\": [";
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? ", " : "") + std::to_string(ids[i]);
  const std::string ids_file = dir.write("ids.jsonl", line + "]}\n");
  const test::Output o =
      test::run_command("bash '" + test::shared_dir() + "/peer/llama-peer.sh' logits '" + path + "' < '" + ids_file + "'");
  if (o.status != 0) ADD_FAILURE() << path << ": " << o.out;
  return o.status == 0 ? json::parse(o.out)["logits"].get<std::vector<float>>() : std::vector<float>{};
}

// llama.cpp's logits on each converted file against Ember's on the same file. All F32: the float rule
// of testdata/gguf/README.md, widened for the GELU-tanh archs (gemma) to 1.5 times llama.cpp's own
// deviation there (4.4e-4 of the largest logit: its GELU reads an f16 table). Q8_0: both engines
// round activations to 8 bits as ggml does, within 5% of the largest logit.
TEST(GgufConvertPeer, LlamaCppGivesTheSameLogits) {
  const char* peer_env = std::getenv("EMBER_PEER");
  const char* home = std::getenv("HOME");
  const std::string peer = peer_env != nullptr ? peer_env : std::string(home != nullptr ? home : "") + "/.cache/ember-peer";
  if (!fs::exists(peer + "/llama.cpp/build/bin/llama_logits"))
    GTEST_SKIP() << "llama.cpp is not built here (" << peer << "/llama.cpp/build/bin/llama_logits is missing: run "
                 << test::shared_dir() << "/peer/llama-peer.sh build)";
  fuzz::TempDir dir;
  int compared = 0;
  for (const std::string& folder : convertible_folders())
    for (const char* type : {"f32", "q8_0"}) {
      std::string refusal;
      const std::string path = convert(folder, dir, type, refusal);
      if (path.empty()) continue;
      const GgufFile g(path);
      const std::string arch = g.get_string("general.architecture");
      std::vector<int32_t> ids = prompt_ids(folder);
      // Long-rope: llama.cpp picks the factors by its context size (256 at least), Ember by the
      // sequence's length; past the original context both take the long ones.
      if (g.find_tensor("rope_factors_long.weight") != nullptr)
        for (size_t i = 0; static_cast<int64_t>(ids.size()) <= g.get_int(arch + ".rope.scaling.original_context_length"); ++i)
          ids.push_back(ids[i]);
      const std::vector<float> ember = convert_logits(path, ids), llama = llama_cpp_logits(path, ids, dir);
      ASSERT_EQ(llama.size(), ember.size()) << folder;
      const bool gelu = find_gguf_architecture(arch)->activation == Activation::kGeluTanh;
      const double tol = std::string(type) == "q8_0" ? 1e-3 + 0.05 * max_abs(ember)
                                                     : std::max(float_tolerance(ember), gelu ? 1.5 * 4.4e-4 * max_abs(ember) : 0.0);
      const double d = max_abs_diff(llama, ember);
      std::printf("%-28s %-5s llama.cpp: max|d| %.3g (tolerance %.3g)\n", folder.c_str(), type, d, tol);
      EXPECT_LE(d, tol) << folder << " " << type;
      ++compared;
    }
  EXPECT_GT(compared, 0);
}

TEST(GgufConvertErrors, RefusesAModelTypeItCannotWriteByName) {
  fuzz::TempDir dir;
  const std::string what = convert_error(test::model_dir("tiny-gptoss-bf16"), dir.path() + "/out.gguf");
  EXPECT_NE(what.find("model_type \"gpt_oss\""), std::string::npos) << what;
  EXPECT_NE(what.find(writable_model_types()), std::string::npos) << what;
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

// A shared folder whose config.json is edited, in `dir` (the other files linked).
std::string edited_folder(const std::string& folder, const fuzz::TempDir& dir, const std::function<void(json&)>& edit) {
  const fs::path out = fs::path(dir.path()) / folder;
  fs::create_directory(out);
  for (const auto& e : fs::directory_iterator(test::model_dir(folder)))
    if (e.path().filename() != "config.json") fs::create_symlink(e.path(), out / e.path().filename());
  json c = json::parse(read_file(test::model_dir(folder) + "/config.json"));
  edit(c);
  std::ofstream(out / "config.json") << c.dump();
  return out.string();
}

// Settings llama.cpp would run otherwise are refused by their config.json field, and nothing is written.
TEST(GgufConvertErrors, RefusesWhatGgufCannotSayByField) {
  fuzz::TempDir dir;
  const struct {
    const char* folder;
    const char* field;
    std::function<void(json&)> edit;
  } cases[] = {
      {"tiny-smollm3-bf16", "no_rope_layers", [](json& c) { c["no_rope_layers"] = {1, 0, 1, 1}; }},
      {"tiny-qwen3moe-bf16", "norm_topk_prob", [](json& c) { c["norm_topk_prob"] = false; }},
      {"tiny-qwen3moe-bf16", "mlp_only_layers", [](json& c) { c["mlp_only_layers"] = {1}; }},
  };
  for (const auto& k : cases) {
    fuzz::TempDir work;
    const std::string out = dir.path() + "/out.gguf";
    const std::string what = convert_error(edited_folder(k.folder, work, k.edit), out);
    EXPECT_NE(what.find(std::string("config.json: ") + k.field), std::string::npos) << k.folder << ": " << what;
    EXPECT_TRUE(fs::is_empty(dir.path())) << k.folder;
  }
}

TEST(GgufConvertErrors, UnwritableOutputNamesThePathAndLeavesNothing) {
  fuzz::TempDir dir;
  const std::string missing = dir.path() + "/no/such/folder/out.gguf";
  const std::string what = convert_error(test::model_dir("tiny-llama-f32"), missing);
  EXPECT_NE(what.find(missing), std::string::npos) << what;
  // A tensor that cannot be made fails the write: no file, no temporary file.
  GgufWriter w;
  w.kv_string("general.architecture", "llama");
  w.tensor("a", {4}, 0, 16, [] { return std::string(16, '\0'); });
  w.tensor("b", {4}, 0, 16, []() -> std::string { throw Error("tensor b: made up failure"); });
  const std::string out = dir.path() + "/out.gguf";
  EXPECT_THROW(w.write(out), Error);
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(GgufConvertErrors, UnknownQuantizeTypeIsNamed) {
  try {
    parse_convert_type("q3_k");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q3_k"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(convert_type_names()), std::string::npos);
  }
}

// The command: progress lines per tensor on stderr, the file loadable, an error exit on a refusal.
TEST(GgufConvertCli, WritesWithProgressAndRefusesByName) {
  fuzz::TempDir dir;
  const std::string out = dir.path() + "/llama-q4_k.gguf";
  const test::Output ok = test::run_command("'" + test::ember_binary() + "' convert -m '" + test::model_dir("tiny-llama-f32") +
                                            "' -o '" + out + "' --quantize q4_k 2>&1");
  ASSERT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("[1/"), std::string::npos) << ok.out;
  const GgufFile g(out);
  EXPECT_EQ(ok.out.find("[" + std::to_string(g.tensors().size()) + "/" + std::to_string(g.tensors().size()) + "]") == std::string::npos,
            false)
      << ok.out;
  const test::Output bad = test::run_command("'" + test::ember_binary() + "' convert -m '" + test::model_dir("tiny-gptoss-bf16") +
                                             "' -o '" + dir.path() + "/x.gguf' 2>&1");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("gpt_oss"), std::string::npos) << bad.out;
  EXPECT_FALSE(fs::exists(dir.path() + "/x.gguf"));
}

// -o naming a directory or a fifo is refused before any work, naming the path, and leaves it as it
// was: the finished file used to be renamed over whatever was there (as root, over /dev/full).
TEST(GgufConvertCli, RefusesAnOutputThatIsNotARegularFile) {
  fuzz::TempDir dir;
  const std::string folder = dir.path() + "/a-folder", fifo = dir.path() + "/a-fifo";
  fs::create_directory(folder);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const auto& [out, kind] : {std::pair{folder, "a directory"}, std::pair{fifo, "a fifo"}}) {
    const test::Output o = test::run_command("'" + test::ember_binary() + "' convert -m '" +
                                             test::model_dir("tiny-llama-f32") + "' -o '" + out + "' 2>&1");
    ASSERT_TRUE(WIFEXITED(o.status)) << o.out;
    EXPECT_EQ(WEXITSTATUS(o.status), 1) << o.out;
    EXPECT_NE(o.out.find(out + ": exists and is " + kind), std::string::npos) << o.out;
    EXPECT_EQ(o.out.find("tensors"), std::string::npos) << o.out;  // refused before any work
  }
  EXPECT_TRUE(fs::is_directory(folder));
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 2);  // no .tmp left
}

// -m naming a GGUF file (or any file) says convert reads a folder, not that FILE/config.json is missing.
TEST(GgufConvertCli, RefusesAFileAsTheModel) {
  fuzz::TempDir dir;
  const std::string gguf = test::model_dir("gguf/story-656k-f32.gguf");
  const test::Output o = test::run_command("'" + test::ember_binary() + "' convert -m '" + gguf + "' -o '" +
                                           dir.path() + "/x.gguf' 2>&1");
  EXPECT_EQ(WEXITSTATUS(o.status), 1) << o.out;
  EXPECT_NE(o.out.find(gguf + ": convert reads a Hugging Face model folder; this is a file"), std::string::npos) << o.out;
  EXPECT_FALSE(fs::exists(dir.path() + "/x.gguf"));
}

}  // namespace
}  // namespace ember::model
