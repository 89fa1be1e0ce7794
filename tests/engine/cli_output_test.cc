// Issue 41 item 10: the numbers and paths the CLI prints read as a person expects: sizes in the unit
// that fits them, a path that does not exist said so, a GGUF's own chat template (or its lack) named.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <string>

#include <unistd.h>

#include "run_command.h"
#include "test_paths.h"

namespace ember::test {
namespace {

Output ember_output(const std::string& args) { return run_command("timeout 120 " + ember_binary() + " " + args + " 2>&1"); }

TEST(CliOutput, SizesHaveUnitsThatFit) {
  const Output plan = ember_output("generate -m " + model_dir("story-656k") + " -p hi -n 1");
  ASSERT_EQ(plan.status, 0) << plan.out;
  EXPECT_TRUE(std::regex_search(plan.out, std::regex(R"(\(\d+(\.\d+)? KiB at full use, \d+ B per token\), weights \d+(\.\d+)? MiB)")))
      << plan.out;
  EXPECT_EQ(plan.out.find("0.00 GB"), std::string::npos) << plan.out;
  const Output tiny = ember_output("generate -m " + model_dir("story-656k") + " -p hi --mem 1K");
  EXPECT_NE(tiny.status, 0) << tiny.out;
  EXPECT_NE(tiny.out.find("need 128 KiB (512 B per token in f16), but the budget is 1 KiB of"), std::string::npos)
      << tiny.out;
}

// A prompt the context cannot continue says how much a reply needs, before any of it is printed.
TEST(CliOutput, APromptPastTheContextSaysWhatAReplyNeeds) {
  const Output o = run_command("timeout 120 " + ember_binary() + " generate -m " + model_dir("story-656k") +
                               " -p 'Once upon a time there' --ctx 6 2>/dev/null");
  EXPECT_EQ(WEXITSTATUS(o.status), 1);
  EXPECT_EQ(o.out, "") << "the prompt was echoed before the error";
  const Output e = ember_output("generate -m " + model_dir("story-656k") + " -p 'Once upon a time there' --ctx 6");
  EXPECT_TRUE(std::regex_search(e.out, std::regex(R"(the prompt has (\d+) tokens and the context holds 6: a reply needs at least \d+)")))
      << e.out;
}

TEST(CliOutput, AMissingModelPathIsSaidToBeMissing) {
  const Output o = ember_output("generate -m /nonexistent -p x");
  EXPECT_EQ(WEXITSTATUS(o.status), 1) << o.out;
  EXPECT_NE(o.out.find("/nonexistent: does not exist"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("config.json"), std::string::npos) << o.out;
  const Output t = ember_output("tokenize -m /nonexistent -p x");
  EXPECT_NE(t.out.find("/nonexistent: does not exist"), std::string::npos) << t.out;
}

TEST(CliOutput, TemplateOfAGgufWithoutOneSaysSo) {
  const std::string gguf = shared_path("models", "gguf/story-656k-f32.gguf");
  const Output o = run_command("echo '{\"messages\": []}' | timeout 60 " + ember_binary() + " template --jsonl -m " + gguf + " 2>&1");
  EXPECT_NE(o.status, 0) << o.out;
  EXPECT_NE(o.out.find("the GGUF file has no tokenizer.chat_template"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("tokenizer_config.json"), std::string::npos) << o.out;
}

// A model that fits in the caches decodes faster than DRAM's bandwidth allows: said, not a bare 169%.
TEST(CliOutput, BenchSaysWhenDecodeBeatsTheDramRoofline) {
  const Output o = ember_output("bench -m " + model_dir("story-656k") + " -p 8 -n 16 --reps 1 --no-warmup");
  ASSERT_EQ(o.status, 0) << o.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(o.out, m, std::regex(R"(decode / roofline +([0-9.]+)%(.*))"))) << o.out;
  EXPECT_EQ(std::stod(m[1]) > 100, m[2].str().find("in cache, above the DRAM roofline") != std::string::npos) << o.out;
}

// Output that did not reach stdout fails the command (it exited 0): main checks stdout once at the
// end, for every command. /dev/full fails every write with ENOSPC.
TEST(CliOutput, AFailedWriteToStdoutIsAnError) {
  const std::string messages = ::testing::TempDir() + "/ember_" + std::to_string(::getpid()) + "_full_msgs.json";
  std::ofstream(messages) << R"([{"role": "user", "content": "Hi"}])";
  const std::string story = model_dir("story-656k");
  const struct {
    std::string input, args;  // the input line ("": none)
  } cases[] = {{"", "generate -m " + story + " -p 'Once upon a time' -n 20 -q"},
               {R"({"text": "hi"})", "tokenize -m " + shared_path("tokenizers", "qwen3") + " --jsonl"},
               {R"({"ids": [1, 2]})", "logits -m " + story + " --jsonl"},
               {"", "chat -m " + model_dir("chat-skills") + " --messages " + messages + " --json -n 4"},
               {"", "--help"}};
  for (const auto& c : cases) {
    // stderr to the pipe, stdout to /dev/full.
    const Output o = run_command("echo '" + c.input + "' | timeout 120 " + ember_binary() + " " + c.args +
                                 " 2>&1 >/dev/full");
    ASSERT_TRUE(WIFEXITED(o.status)) << c.args << ": " << o.out;
    EXPECT_EQ(WEXITSTATUS(o.status), 1) << c.args << ": " << o.out;
    EXPECT_NE(o.out.find("ember: error: writing standard output failed (No space left on device)"), std::string::npos)
        << c.args << ": " << o.out;
  }
  std::remove(messages.c_str());
}

}  // namespace
}  // namespace ember::test
