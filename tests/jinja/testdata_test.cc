// Every case of ../shared/testdata/chat_template renders byte-identical to Python jinja2, or
// fails where the case expects an error.
#include <gtest/gtest.h>

#include <filesystem>

#include "base/error.h"
#include "jinja/template.h"
#include "testdata_util.h"

namespace ember::jinja {
namespace {

nlohmann::ordered_json context_of(const nlohmann::ordered_json& c) {
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  for (const auto& [k, v] : c.at("variables").items()) ctx[k] = v;
  ctx["messages"] = c.at("messages");
  ctx["tools"] = c.value("tools", nlohmann::ordered_json());
  ctx["documents"] = c.value("documents", nlohmann::ordered_json());
  ctx["add_generation_prompt"] = c.at("add_generation_prompt");
  return ctx;
}

class ChatTemplateFixtures : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateFixtures, RendersEveryCase) {
  const auto cases = test::read_jsonl(GetParam());
  ASSERT_FALSE(cases.empty());
  RenderOptions opts;
  opts.now = test::fixture_clock();
  size_t passed = 0;
  for (const auto& c : cases) {
    const std::string name = c.at("template").get<std::string>() + "/" + c.at("case").get<std::string>();
    SCOPED_TRACE(name);
    const Template t = Template::parse(test::read_text(test::chat_template_path(c.at("template"))));
    if (c.contains("expected")) {
      std::string got;
      try {
        got = t.render(context_of(c), opts);
      } catch (const Error& e) {
        ADD_FAILURE() << "unexpected error: " << e.what();
        continue;
      }
      EXPECT_EQ(got, c["expected"].get<std::string>());
      passed += got == c["expected"].get<std::string>();
    } else {
      ASSERT_TRUE(c.contains("error"));
      try {
        const std::string got = t.render(context_of(c), opts);
        ADD_FAILURE() << "expected an error, rendered: " << got;
      } catch (const Error& e) {
        if (c.at("error_type") == "raise_exception") {
          EXPECT_NE(std::string(e.what()).find(c["error"].get<std::string>()), std::string::npos) << e.what();
          passed += std::string(e.what()).find(c["error"].get<std::string>()) != std::string::npos;
        } else {
          ++passed;
        }
      }
    }
  }
  std::cout << std::filesystem::path(GetParam()).filename().string() << ": " << passed << "/" << cases.size()
            << " cases pass\n";
}

INSTANTIATE_TEST_SUITE_P(Shared, ChatTemplateFixtures, ::testing::ValuesIn(test::chat_template_case_files()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = std::filesystem::path(info.param).stem().string();
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace ember::jinja
