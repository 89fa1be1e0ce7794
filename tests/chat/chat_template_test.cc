// Finding a model's chat template and rendering conversations with it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "chat/chat_template.h"
#include "jinja/testdata_util.h"

namespace ember::chat {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("ember_chat_template_" + std::to_string(::getpid()) + "_" +
                                                  ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path_ / name) << text; }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

TEST(LoadChatTemplate, ReadsStringFromTokenizerConfig) {
  TempDir d;
  d.write("tokenizer_config.json", R"({"chat_template": "{{ messages[0].content }}", "eos_token": "</s>"})");
  EXPECT_EQ(load_chat_template(d.str()), "{{ messages[0].content }}");
}

TEST(LoadChatTemplate, PicksDefaultFromNamedList) {
  TempDir d;
  d.write("tokenizer_config.json",
          R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  EXPECT_EQ(load_chat_template(d.str()), "D");
}

TEST(LoadChatTemplate, PrefersChatTemplateJinjaFile) {
  TempDir d;
  d.write("tokenizer_config.json", R"({"chat_template": "old"})");
  d.write("chat_template.jinja", "new");
  EXPECT_EQ(load_chat_template(d.str()), "new");
}

TEST(LoadChatTemplate, NamesTheFolderWhenThereIsNone) {
  TempDir d;
  d.write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  try {
    load_chat_template(d.str());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(d.str()), std::string::npos) << e.what();
  }
}

TEST(LoadChatTemplate, RefusesNamedListWithoutDefault) {
  TempDir d;
  d.write("tokenizer_config.json",
          R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "rag", "template": "R"}]})");
  try {
    load_chat_template(d.str());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(d.str()), std::string::npos) << m;
    EXPECT_NE(m.find("rag, tool_use"), std::string::npos) << m;
  }
}

TEST(ChatTemplate, RendersSharedFixturesThroughTemplateInputs) {
  jinja::RenderOptions opts;
  opts.now = test::fixture_clock();
  for (const auto& file : test::chat_template_case_files()) {
    for (const auto& c : test::read_jsonl(file)) {
      const std::string name = c.at("template").get<std::string>();
      SCOPED_TRACE(name + "/" + c.at("case").get<std::string>());
      const ChatTemplate tmpl(test::read_text(test::chat_template_path(name)));
      TemplateInputs in;
      in.messages = c.at("messages");
      in.tools = c.value("tools", nlohmann::ordered_json());
      in.documents = c.value("documents", nlohmann::ordered_json());
      in.add_generation_prompt = c.at("add_generation_prompt").get<bool>();
      in.variables = c.at("variables");
      if (c.contains("expected")) {
        EXPECT_EQ(tmpl.render(in, opts), c["expected"].get<std::string>());
      } else {
        EXPECT_THROW(tmpl.render(in, opts), Error);
      }
    }
  }
}

}  // namespace
}  // namespace ember::chat
