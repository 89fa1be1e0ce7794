// -m FILE.gguf for every family Ember runs from Hugging Face folders: each file of every expectation in
// ../shared/testdata/gguf/families/ (README there: gemma2, gemma3, phi3, smollm3, qwen3moe, and Mistral
// and Mixtral as arch llama) loads through Model::load and gives its golden logits within the README's
// tolerance and its greedy_short_16: exactly for float files, along the golden path within the
// tolerance for quantized ones (test::Greedy::kForced). A file the loader cannot yet run as stored is skipped with
// the block types at fault, which the skip reads from the file and the load (never from a list here),
// so that it ends by itself once their kernels exist.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf_fixtures.h"
#include "gguf_golden.h"
#include "kernels/gguf_quants.h"
#include "model/gguf.h"
#include "model/load_tokenizer.h"
#include "model/model.h"
#include "test_paths.h"

namespace ember::model {
namespace {

using FamilyFile = test::GgufCase;

// Every file entry of every JSON in ../shared/testdata/gguf/families, in sorted order.
std::vector<FamilyFile> family_files() { return test::gguf_cases("gguf/families"); }

// The block types among the file's tensors that Ember cannot read at all, comma-separated.
std::string unreadable_types(const GgufFile& g) {
  std::vector<std::string> out;
  for (const GgufTensor& t : g.tensors()) {
    const std::string name = kernels::ggml_type_name(t.type);
    if (!kernels::can_dequantize(t.type) && std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  }
  std::string s;
  for (const std::string& n : out) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// The case lists read only the "files" keys of each expectation (test::files_keys, fast at start-up):
// they must name exactly the entries a full parse finds, in every folder of testdata/gguf.
TEST(GgufCases, ListTheFilesAFullParseFinds) {
  int checked = 0;
  for (const auto& dir : std::filesystem::directory_iterator(test::testdata("gguf"))) {
    if (!dir.is_directory()) continue;
    const std::string folder = "gguf/" + dir.path().filename().string();
    std::vector<std::string> listed, parsed;
    for (const FamilyFile& c : test::gguf_cases(folder)) listed.push_back(c.expectation + " " + c.file);
    for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
      if (e.path().extension() != ".json") continue;
      const nlohmann::json j = test::read_json(e.path().string());
      for (const auto& [file, entry] : j.at("files").items()) parsed.push_back(e.path().string() + " " + file);
    }
    std::sort(listed.begin(), listed.end());
    std::sort(parsed.begin(), parsed.end());
    EXPECT_EQ(listed, parsed) << folder;
    checked += static_cast<int>(parsed.size());
  }
  EXPECT_GT(checked, 0);
  // Escapes in a key are decoded; keys of nested objects and of other top-level members are not files.
  const std::string text = R"({"source": {"a.gguf": 1}, "files": {"x\\\"y.gguf": {"files": {"z": [1, {"w": 2}]}}, "b.gguf": []}})";
  EXPECT_EQ(test::files_keys(text, "t.json"), (std::vector<std::string>{"x\\\"y.gguf", "b.gguf"}));
  EXPECT_THROW(test::files_keys(R"({"files": {"a)", "t.json"), std::runtime_error);
}

class GgufFamilies : public ::testing::TestWithParam<FamilyFile> {};

TEST_P(GgufFamilies, MatchesItsGolden) {
  const FamilyFile& p = GetParam();
  const nlohmann::json e = test::read_json(p.expectation);
  const nlohmann::json& f = e["files"][p.file];
  const std::string path = test::gguf_path(p.file);
  {
    const GgufFile g(path);
    if (const std::string missing = unreadable_types(g); !missing.empty())
      GTEST_SKIP() << p.file << ": no kernel reads " << missing << " blocks yet";
    // The file's tokenizer (tokenizer.ggml.model "llama": SentencePiece-style) loads with its BOS token,
    // which text names as one special token.
    const tokenizer::Tokenizer tok = load_tokenizer(path);
    const std::vector<std::string> tokens = g.get_string_array("tokenizer.ggml.tokens");
    const auto bos = static_cast<int32_t>(g.get_int("tokenizer.ggml.bos_token_id"));
    EXPECT_EQ(tok.config().bos_token, tokens.at(static_cast<size_t>(bos)));
    EXPECT_TRUE(tok.is_special(bos));
    EXPECT_EQ(tok.encode(tokens.at(static_cast<size_t>(bos)), false), std::vector<int32_t>{bos});
  }
  auto m = Model::load(path, {.threads = 2, .progress = {}});
  const bool float_file = test::is_float_file(f["tensor_types"]);
  const test::GoldenResult r = test::run_golden(*m, e, f, float_file ? test::Greedy::kExact : test::Greedy::kForced);
  std::printf("%-30s %-40s %.2f of the tolerance\n", p.file.c_str(), f["tensor_types"].dump().c_str(), r.worst_ratio());
  // Matrices of a block type without a kernel are requantized to Q8_0 at load (the model's load note
  // names those types): that rounding is Ember's, not the file's, so the golden binds only once they
  // run as stored.
  if (!m->load_note().empty() && !(r.within_tolerance() && r.greedy_ok()))
    GTEST_SKIP() << p.file << ": " << m->load_note() << "; meanwhile " << r.worst_ratio() << " of the tolerance";
  test::expect_golden(r);
}

INSTANTIATE_TEST_SUITE_P(Files, GgufFamilies, ::testing::ValuesIn(family_files()), test::gguf_case_name);

TEST(GgufFamiliesFolder, HasFiles) { EXPECT_FALSE(family_files().empty()); }

}  // namespace
}  // namespace ember::model
