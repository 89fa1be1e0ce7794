// Numeric flags are checked when the command line is parsed, their range named in the error and in
// --help; none is accepted only to be ignored or to leave a command that cannot work.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "run_command.h"
#include "test_paths.h"

namespace ember::test {
namespace {

// Runs `ember ARGS` (stdout and stderr); a refusal at parse time never loads the model.
Output ember(const std::string& args) { return run_command("timeout 60 " + ember_binary() + " " + args + " 2>&1"); }

// Each `ember ARGS` fails at parse time naming the flag and its range.
struct Refusal {
  std::string args, flag, range;
};
void expect_refused(const std::vector<Refusal>& cases) {
  for (const Refusal& r : cases) {
    const Output o = ember(r.args);
    EXPECT_NE(o.status, 0) << r.args << ": " << o.out;
    EXPECT_NE(o.out.find(r.flag + ": must be between " + r.range), std::string::npos) << r.args << ": " << o.out;
  }
}

// Issue 41 item 8.
TEST(CliFlags, ServeRefusesValuesThatLeaveNoWorkingServer) {
  const std::string serve = "serve -m " + model_dir("chat-skills") + " --host 127.0.0.1 ";
  std::vector<Refusal> cases;
  for (const char* flag : {"--queue", "--timeout", "--parallel", "--prefill-chunk"})
    for (const char* value : {"0", "-1"}) cases.push_back({serve + flag + " " + value, flag, "1 and"});
  cases.push_back({serve + "--max-body 0", "--max-body", "1024 and"});
  expect_refused(cases);
  const Output help = ember("serve --help");
  EXPECT_NE(help.out.find("in [1, 1048576]"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("in [0, 65535]"), std::string::npos) << help.out;
}

TEST(CliFlags, ModelAndSamplingFlagsHaveRanges) {
  const std::string gen = "generate -m " + model_dir("story-656k") + " -p hi ";
  expect_refused({{gen + "--ctx 0", "--ctx", "1 and"},
                  {gen + "--ctx -5", "--ctx", "1 and"},
                  {gen + "-t -2", "--threads", "0 and 4096"},
                  {gen + "-n -2", "--max-tokens", "-1 and"},
                  {gen + "--temperature -1", "--temperature", "0 and 100"},
                  {"bench -m " + model_dir("story-656k") + " --reps 0", "--reps", "1 and 1000"},
                  {"chat -m " + model_dir("chat-skills") + " --think-budget -2", "--think-budget", "-1 and"}});
}

// What the checks above pass on to fail later, or name wrongly, is refused by the flag: top_p 0 (the
// sampler's "top_p must be in (0, 1]"), NaN (it passed both bounds), a word (said to be out of range).
TEST(CliFlags, NaNZeroTopPAndWordsAreRefusedByTheFlag) {
  const std::string gen = "generate -m " + model_dir("story-656k") + " -p hi -n 1 ";
  for (const auto& [args, error] : std::vector<std::pair<std::string, std::string>>{
           {"--top-p 0", "--top-p: must be above 0 and at most 1 (got 0)"},
           {"--top-p 1.5", "--top-p: must be above 0 and at most 1 (got 1.5)"},
           {"--top-p nan", "--top-p: must be above 0 and at most 1 (got nan)"},
           {"--temperature nan", "--temperature: must be between 0 and 100 (got nan)"},
           {"-t abc", "--threads: abc is not an integer"},
           {"--temperature warm", "--temperature: warm is not a number"}}) {
    const Output o = ember(gen + args);
    EXPECT_NE(o.status, 0) << args << ": " << o.out;
    EXPECT_NE(o.out.find(error), std::string::npos) << args << ": " << o.out;
    EXPECT_EQ(o.out.find("sampling parameters"), std::string::npos) << args << ": " << o.out;
  }
  EXPECT_EQ(ember(gen + "-q --top-p 1").status, 0);
  EXPECT_NE(ember("generate --help").out.find("in (0, 1]"), std::string::npos);
}

// A --mem past int64_t's bytes is refused naming it (it fell back to the default budget).
TEST(CliFlags, MemTooLargeIsRefused) {
  for (const char* mem : {"99999999999999999999G", "18446744073709551615", "9223372036854775808"}) {
    const Output o = ember("generate -m " + model_dir("story-656k") + " -p hi -n 1 --mem " + mem);
    EXPECT_NE(o.status, 0) << mem << ": " << o.out;
    EXPECT_NE(o.out.find("--mem: too large (got '" + std::string(mem) + "'"), std::string::npos) << o.out;
  }
  EXPECT_EQ(ember("generate -m " + model_dir("story-656k") + " -p hi -n 1 -q --mem 1T").status, 0);
}

// --spec: off by default; ngram and a draft model print the same text and say how many guesses were
// taken; a model or a draft that cannot speculate says so; --spec-max has a range.
TEST(CliFlags, SpecPrintsTheSameTextAndSaysWhatItCannot) {
  const std::string text = "'Lily had a red ball. Lily had a red ball. Lily had a red ball. Lily had'";
  auto generate = [&](const std::string& model, const std::string& flags) {
    return run_command("timeout 60 " + ember_binary() + " generate -m " + model + " -p " + text + " -n 40 " + flags +
                       " 2>/dev/null");
  };
  const std::string story = model_dir("story-656k");
  const Output plain = generate(story, ""), off = generate(story, "--spec off"), spec = generate(story, "--spec ngram");
  ASSERT_EQ(plain.status, 0);
  ASSERT_EQ(spec.status, 0);
  EXPECT_EQ(spec.out, plain.out);
  EXPECT_EQ(off.out, plain.out);
  const Output stats = ember("generate -m " + story + " -p " + text + " -n 40 --spec ngram");
  EXPECT_TRUE(std::regex_search(stats.out, std::regex("speculation: [0-9]+ of [0-9]+ guesses taken"))) << stats.out;
  const Output hybrid = ember("generate -m " + model_dir("tiny-qwen35-bf16") + " -p hi -n 4 --spec ngram");
  EXPECT_EQ(hybrid.status, 0) << hybrid.out;
  EXPECT_NE(hybrid.out.find("speculation off: a hybrid model's recurrent state cannot be rolled back"), std::string::npos)
      << hybrid.out;
  // A draft model: the target's own weights in q4_0, or another folder; the same text either way.
  const Output own = generate(story, "--spec draft --draft-quantize q4_0");
  ASSERT_EQ(own.status, 0);
  EXPECT_EQ(own.out, plain.out);
  const Output folder = generate(story, "--draft-model " + story);  // --draft-model alone means --spec draft
  ASSERT_EQ(folder.status, 0);
  EXPECT_EQ(folder.out, plain.out);
  const Output no_draft = ember("generate -m " + story + " -p hi --spec draft");
  EXPECT_NE(no_draft.status, 0);
  EXPECT_NE(no_draft.out.find("--spec draft needs a draft model"), std::string::npos) << no_draft.out;
  // Another vocabulary (chat-skills adds 4 tokens to story-656k's 2048) is refused, naming the token.
  const Output other = ember("generate -m " + story + " -p hi --draft-model " + model_dir("chat-skills"));
  EXPECT_NE(other.status, 0);
  EXPECT_NE(other.out.find("id 2048"), std::string::npos) << other.out;
  const Output mixed = ember("generate -m " + story + " -p hi --spec ngram --draft-quantize q4_0");
  EXPECT_NE(mixed.status, 0);
  EXPECT_NE(mixed.out.find("go with --spec draft"), std::string::npos) << mixed.out;
  const Output beams = ember("generate -m " + story + " -p hi --spec ngram --beams 2");
  EXPECT_NE(beams.status, 0);
  EXPECT_NE(beams.out.find("--beams cannot be combined with --spec"), std::string::npos) << beams.out;
  expect_refused({{"generate -m " + story + " -p hi --spec-max 0", "--spec-max", "1 and 64"},
                  {"serve -m " + model_dir("chat-skills") + " --spec-max 65", "--spec-max", "1 and 64"}});
}

// -1 as llama.cpp's users mean it: until the end token or the context (CLI11 read "-1" as a second
// value: "At Most 1 required but received 2").
TEST(CliFlags, MaxTokensMinusOneRunsToTheEnd) {
  const Output o = ember("generate -m " + model_dir("story-656k") + " -p 'Once upon a time' -n -1 --ctx 64");
  ASSERT_EQ(o.status, 0) << o.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(o.out, m, std::regex(R"(prompt: (\d+) tokens.*generated (\d+) tokens.*stop: (\w+))")))
      << o.out;
  // The end token, or the context full: not generate's default of 256 tokens (past this context).
  if (m[3] == "length") {
    EXPECT_EQ(std::stoi(m[1]) + std::stoi(m[2]), 64) << o.out;
  }
}

// More threads than the hardware has are capped with a warning, not started.
TEST(CliFlags, ThreadsPastTheHardwareAreCapped) {
  const Output o = ember("generate -m " + model_dir("story-656k") + " -p hi -n 2 -t 4096");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_NE(o.out.find("warning: -t 4096 is more threads than the"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("with 4096 threads"), std::string::npos) << o.out;
}

}  // namespace
}  // namespace ember::test
