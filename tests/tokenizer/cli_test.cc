// `ember tokenize --jsonl` / `ember detokenize --jsonl` on every shared fixture file, piped in as it is.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "run_command.h"
#include "tokenizer_cases.h"

namespace ember::test {
namespace {

// ctest runs test cases in parallel processes: every temporary file name carries the process id.
std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/ember_" + std::to_string(::getpid()) + "_" + name;
}

// Runs `ember <args> < input > output` and returns the output lines.
std::vector<std::string> run_ember(const std::string& args, const std::string& input_path) {
  const std::string out_path = temp_path("cli_out.jsonl");
  const std::string cmd = "'" + ember_binary() + "' " + args + " < '" + input_path + "' > '" + out_path + "'";
  std::system(cmd.c_str());  // the exit status is 1 when a line fails; the lines say which
  std::vector<std::string> lines;
  std::ifstream in(out_path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class Cli : public ::testing::TestWithParam<std::string> {};

TEST_P(Cli, TokenizeAndDetokenizeEveryLine) {
  const std::string name = GetParam();
  const std::string model = "-m '" + tokenizer_dir(name) + "' --jsonl";
  const auto cases = read_jsonl(tokenizer_jsonl(name));
  ASSERT_FALSE(cases.empty());

  const auto ids = run_ember("tokenize " + model, tokenizer_jsonl(name));
  ASSERT_EQ(ids.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(nlohmann::json::parse(ids[i]), nlohmann::json({{"ids", cases[i]["ids"]}})) << cases[i]["case"];

  // The fixture as it is (no skip_special_tokens key: false), then with skipping asked for.
  const auto texts = run_ember("detokenize " + model, tokenizer_jsonl(name));
  ASSERT_EQ(texts.size(), cases.size());
  const std::string skip_path = temp_path("cli_skip.jsonl");
  {
    std::ofstream out(skip_path);
    for (const auto& c : cases)
      out << nlohmann::json({{"ids", c["ids"]}, {"skip_special_tokens", true}}).dump() << '\n';
  }
  const auto skipped = run_ember("detokenize " + model, skip_path);
  ASSERT_EQ(skipped.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(nlohmann::json::parse(texts[i]), nlohmann::json({{"text", cases[i]["decoded"]}})) << cases[i]["case"];
    EXPECT_EQ(nlohmann::json::parse(skipped[i]), nlohmann::json({{"text", cases[i]["decoded_skip_special"]}}))
        << cases[i]["case"];
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, Cli, ::testing::ValuesIn(tokenizer_case_names()), TokenizerParamName());

TEST(CliErrors, BadLineGivesOneErrorAndTheRestGoOn) {
  const std::string path = temp_path("cli_bad.jsonl");
  {
    std::ofstream out(path);
    out << R"({"text": "a b", "add_special_tokens": false})" << '\n'
        << "not json\n"
        << R"({"ids": "nope"})" << '\n'
        << R"({"text": "caf\u00e9", "add_special_tokens": false})" << '\n';
  }
  const auto lines = run_ember("tokenize -m '" + tokenizer_dir("gpt2") + "' --jsonl", path);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_TRUE(nlohmann::json::parse(lines[0]).contains("ids"));
  // The errors say what is wrong for a person, without nlohmann's exception ids.
  EXPECT_EQ(nlohmann::json::parse(lines[1])["error"].get<std::string>().rfind("line 2: invalid JSON: parse error at line 1, column 2", 0), 0u)
      << lines[1];
  EXPECT_EQ(nlohmann::json::parse(lines[2])["error"], "line 3: missing key 'text'") << lines[2];
  EXPECT_TRUE(nlohmann::json::parse(lines[3]).contains("ids"));

  {
    std::ofstream out(path);
    out << R"({"ids": [40, 1842]})" << '\n' << R"({"ids": [-3]})" << '\n' << R"({"ids": [2634]})" << '\n';
  }
  const auto texts = run_ember("detokenize -m '" + tokenizer_dir("gpt2") + "' --jsonl", path);
  ASSERT_EQ(texts.size(), 3u);
  EXPECT_TRUE(nlohmann::json::parse(texts[0]).contains("text"));
  EXPECT_TRUE(nlohmann::json::parse(texts[1]).contains("error"));
  EXPECT_TRUE(nlohmann::json::parse(texts[2]).contains("text"));
  // Non-ASCII text stays UTF-8 in the output, not \u escapes.
  EXPECT_EQ(texts[2].find("\\u"), std::string::npos) << texts[2];
}

// Ids are checked as logits and embed check them: 2^32 used to wrap to 0 ("!") and 1.9 to be cut to
// 1, with exit 0. Each bad line names its line and value; the exit is 1 after the good lines.
TEST(CliErrors, DetokenizeRefusesIdsThatAreNotTokenIds) {
  const std::string path = temp_path("cli_bad_ids.jsonl");
  {
    std::ofstream out(path);
    out << R"({"ids": [4294967296]})" << '\n'
        << R"({"ids": [4294976003]})" << '\n'
        << R"({"ids": [1.9]})" << '\n'
        << R"({"ids": [-3]})" << '\n'
        << R"({"ids": []})" << '\n'
        << R"({"ids": [9707, 0]})" << '\n';
  }
  const Output o = run_command("'" + ember_binary() + "' detokenize -m '" + tokenizer_dir("qwen3") + "' --jsonl < '" +
                               path + "'");
  ASSERT_TRUE(WIFEXITED(o.status));
  EXPECT_EQ(WEXITSTATUS(o.status), 1) << o.out;
  std::vector<nlohmann::json> lines;
  std::istringstream in(o.out);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 6u) << o.out;
  const char* values[] = {"4294967296", "4294976003", "1.9", "-3"};
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(lines[i], nlohmann::json({{"error", "line " + std::to_string(i + 1) + ": \"ids\" holds " + values[i] +
                                                     ", not a token id"}}));
  EXPECT_EQ(lines[4], nlohmann::json({{"text", ""}}));
  EXPECT_EQ(lines[5], nlohmann::json({{"text", "Hello!"}}));
}

}  // namespace
}  // namespace ember::test
