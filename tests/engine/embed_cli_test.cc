// `ember embed -m DIR --jsonl` as DESIGN.md's command-line contract states it, run as a user would:
// every golden case within tolerance, one case per run and all cases in one run; a bad line gets
// one error line and the rest go on.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "embedding_goldens.h"
#include "run_command.h"

namespace ember::test {
namespace {

using nlohmann::json;

// Runs `ember embed` on `lines` (stderr joined to the output when `with_stderr`).
Output embed(const std::string& model, const std::vector<json>& lines, bool with_stderr = false) {
  const auto path = std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "_embed_in.jsonl");
  {
    std::ofstream f(path);
    for (const json& l : lines) f << l.dump() << '\n';
  }
  Output o = run_command(ember_binary() + " embed -m " + model + " --jsonl < " + path.string() +
                         (with_stderr ? " 2>&1" : " 2>/dev/null"));
  std::filesystem::remove(path);
  return o;
}

std::vector<json> output_lines(const std::string& out) {
  std::vector<json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

// A case as an input line: text with its prompt_name (and keys the command ignores), or its ids.
json line_of(const json& c, bool as_ids) {
  if (as_ids) return {{"ids", c["ids"]}, {"name", c["name"]}};
  return {{"text", c["text"]}, {"prompt_name", c["prompt_name"]}, {"name", c["name"]}, {"n_tokens", c["n_tokens"]}};
}

TEST(EmbedCli, EveryGoldenCaseOnePerRun) {
  for (const auto& g : embedding_goldens())
    for (const auto& c : g.j["cases"])
      for (bool as_ids : {false, true}) {
        const Output o = embed(g.model(), {line_of(c, as_ids)});
        ASSERT_EQ(o.status, 0) << o.out;
        const auto lines = output_lines(o.out);
        ASSERT_EQ(lines.size(), 1u) << o.out;
        expect_matches(g, c, lines[0]["embedding"].get<std::vector<float>>(), as_ids ? "cli, ids" : "cli, text");
      }
}

TEST(EmbedCli, AllCasesInOneRunAndABadLineGoesOn) {
  for (const auto& g : embedding_goldens()) {
    const json& cases = g.j["cases"];
    std::vector<json> in;
    for (const auto& c : cases) in.push_back(line_of(c, false));
    in.push_back({{"text", "a"}, {"prompt_name", "no-such-prompt"}});
    in.push_back({{"ids", json::array()}});
    for (const auto& c : cases) in.push_back(line_of(c, true));
    const Output o = embed(g.model(), in);
    ASSERT_TRUE(WIFEXITED(o.status)) << o.out;
    EXPECT_EQ(WEXITSTATUS(o.status), 1) << o.out;  // a line failed
    const auto out = output_lines(o.out);
    ASSERT_EQ(out.size(), in.size()) << o.out;
    const size_t n = cases.size();
    for (size_t i = 0; i < n; ++i) {
      expect_matches(g, cases[i], out[i]["embedding"].get<std::vector<float>>(), "cli batch, text");
      expect_matches(g, cases[i], out[n + 2 + i]["embedding"].get<std::vector<float>>(), "cli batch, ids");
    }
    EXPECT_NE(out[n]["error"].get<std::string>().find("no-such-prompt"), std::string::npos) << out[n];
    EXPECT_NE(out[n + 1]["error"].get<std::string>().find("\"ids\""), std::string::npos) << out[n + 1];
  }
}

TEST(EmbedCli, CausalLmFolderIsAnErrorNamingWhatIsMissing) {
  const Output o = embed(model_dir("tiny-llama-f32"), {{{"text", "a"}}}, /*with_stderr=*/true);
  ASSERT_TRUE(WIFEXITED(o.status)) << o.out;
  EXPECT_EQ(WEXITSTATUS(o.status), 1) << o.out;
  EXPECT_NE(o.out.find("modules.json"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("1_Pooling/config.json"), std::string::npos) << o.out;
}

}  // namespace
}  // namespace ember::test
