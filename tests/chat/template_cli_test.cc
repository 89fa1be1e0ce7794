// `ember template --template FILE --jsonl` on every shared chat-template fixture file.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "jinja/testdata_util.h"
#include "run_command.h"

namespace ember {
namespace {

std::string run_capture(const std::string& cmd) { return test::run_command(cmd).out; }

// The template named by the file's cases (every case of one file uses the same template).
std::string template_of(const std::vector<nlohmann::ordered_json>& cases) {
  return cases.empty() ? std::string() : cases[0].at("template").get<std::string>();
}

TEST(TemplateCli, RendersEveryFixtureLine) {
  for (const auto& file : test::chat_template_case_files()) {
    SCOPED_TRACE(file);
    const auto cases = test::read_jsonl(file);
    ASSERT_FALSE(cases.empty());
    const std::string cmd = "'" + test::ember_binary() + "' template --template '" +
                            test::chat_template_path(template_of(cases)) + "' --jsonl --now '2024-07-26 12:00:00' < '" +
                            file + "'";
    const std::string output = run_capture(cmd);
    std::vector<nlohmann::ordered_json> lines;
    size_t start = 0;
    for (size_t nl; (nl = output.find('\n', start)) != std::string::npos; start = nl + 1)
      lines.push_back(nlohmann::ordered_json::parse(output.substr(start, nl - start)));
    ASSERT_EQ(lines.size(), cases.size()) << output;
    for (size_t k = 0; k < cases.size(); ++k) {
      SCOPED_TRACE(cases[k].at("case").get<std::string>());
      if (cases[k].contains("expected")) {
        ASSERT_TRUE(lines[k].contains("rendered")) << lines[k].dump();
        EXPECT_EQ(lines[k]["rendered"].get<std::string>(), cases[k]["expected"].get<std::string>());
      } else {
        ASSERT_TRUE(lines[k].contains("error")) << lines[k].dump();
        if (cases[k].at("error_type") == "raise_exception") {
          EXPECT_NE(lines[k]["error"].get<std::string>().find(cases[k]["error"].get<std::string>()), std::string::npos);
        }
      }
    }
  }
}

TEST(TemplateCli, BadLineGetsErrorAndTheRestGoOn) {
  const auto dir = std::filesystem::temp_directory_path();
  const auto tmpl = dir / ("ember_cli_tmpl_" + std::to_string(::getpid()) + ".jinja");
  const auto input = dir / ("ember_cli_in_" + std::to_string(::getpid()) + ".jsonl");
  std::ofstream(tmpl) << "{% for m in messages %}{{ m.content }}{% endfor %}{{ strftime_now('%Y') }}";
  std::ofstream(input) << "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}\nnot json\n"
                          "{\"messages\": 5}\n{\"messages\": [], \"add_generation_prompt\": false}\n";
  const std::string out = run_capture("'" + test::ember_binary() + "' template --template '" + tmpl.string() +
                                      "' --jsonl --now '2031-01-02 03:04:05' < '" + input.string() + "'");
  std::filesystem::remove(tmpl);
  std::filesystem::remove(input);
  std::vector<nlohmann::ordered_json> lines;
  size_t start = 0;
  for (size_t nl; (nl = out.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(nlohmann::ordered_json::parse(out.substr(start, nl - start)));
  ASSERT_EQ(lines.size(), 4u) << out;
  EXPECT_EQ(lines[0].value("rendered", ""), "a2031");
  EXPECT_TRUE(lines[1].contains("error"));
  EXPECT_TRUE(lines[2].contains("error"));
  EXPECT_EQ(lines[3].value("rendered", ""), "2031");
}

// A folder with a named list: lines with tools get "tool_use", the others "default" (transformers'
// get_chat_template), and the folder's special tokens are variables of both.
TEST(TemplateCli, NamedTemplatesPickedPerLineAsTransformers) {
  const auto dir = std::filesystem::temp_directory_path() / ("ember_cli_named_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"bos_token": {"content": "<s>"}, "chat_template": [{"name": "default", "template": "D{{ bos_token }}"},)"
         R"( {"name": "tool_use", "template": "T{{ tools | length }}"}]})";
  const auto input = dir / "in.jsonl";
  std::ofstream(input) << "{\"messages\": []}\n{\"messages\": [], \"tools\": [{\"type\": \"function\"}]}\n";
  const std::string out = run_capture("'" + test::ember_binary() + "' template -m '" + dir.string() + "' --jsonl < '" +
                                      input.string() + "'");
  std::filesystem::remove_all(dir);
  EXPECT_EQ(out, "{\"rendered\":\"D<s>\"}\n{\"rendered\":\"T1\"}\n");
}

}  // namespace
}  // namespace ember
