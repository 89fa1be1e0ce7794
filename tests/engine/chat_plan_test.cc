// engine::plan_chat, the one place a chat request's prompt, grammar and tool-call format are
// decided for every front end, and the GrammarCache the server's requests share.
#include <gtest/gtest.h>

#include "base/mapped_file.h"
#include "engine/chat_plan.h"
#include "test_paths.h"

namespace ember::engine {
namespace {

using nlohmann::ordered_json;

class ChatPlanTest : public ::testing::Test {
 protected:
  ChatPlanTest()
      : dir_(test::model_dir("chat-skills")), tok_(tokenizer::Tokenizer::from_folder(dir_)), prompts_(tok_, dir_),
        grammars_(tok_, 2) {}
  ChatPlan plan(const ToolChoice& tc, const OutputFormat& f, const ChatOptions& o = {}) {
    return plan_chat(prompts_, messages_, o, {}, tc, true, f, grammars_);
  }
  std::string dir_;
  tokenizer::Tokenizer tok_;
  ChatPromptBuilder prompts_;
  GrammarCache grammars_;
  ordered_json messages_ = ordered_json::parse(R"([{"role": "user", "content": "A person?"}])");
};

TEST_F(ChatPlanTest, FreeTextHasNoGrammarAndThePromptOfTheTemplate) {
  const ChatPlan p = plan({}, {});
  EXPECT_FALSE(p.gen.grammar.has_value());
  EXPECT_FALSE(p.tool_format.has_value());
  EXPECT_EQ(p.gen.prompt, prompts_.build(messages_, {}).ids);
  EXPECT_TRUE(p.gen.split_reasoning);
}

// continue_final_message: the prompt ends right after the last (assistant) message's text, as
// transformers cuts it (the text as rendered, or stripped where the template trimmed it); without an
// assistant message last there is nothing to continue.
TEST_F(ChatPlanTest, ContinuedReplyEndsThePromptInsideTheLastMessage) {
  ChatOptions o;
  o.continue_final_message = true;
  ordered_json convo = ordered_json::parse(R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How "}])");
  const std::string whole = prompts_.render(convo, {}, false);  // the finished turn
  ASSERT_NE(whole.find("Hello! How <|im_end|>"), std::string::npos) << whole;
  const std::string cut = prompts_.render(convo, o, true);
  EXPECT_EQ(cut, whole.substr(0, whole.rfind("Hello! How ") + std::string("Hello! How ").size())) << cut;
  EXPECT_EQ(prompts_.build(convo, o).ids, tok_.encode(prompts_.render(convo, o, true), false));
  EXPECT_THROW(prompts_.render(messages_, o, true), Error);  // the user's message is last
  convo[1]["content"] = "  ";
  EXPECT_THROW(prompts_.render(convo, o, true), Error);  // no text to continue
}

// The model's own template that does not parse is named by the model when a prompt is asked of it
// (a folder served for embeddings only never asks).
TEST_F(ChatPlanTest, BrokenModelTemplateIsNamedByTheModel) {
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_json(
      read_file(dir_ + "/tokenizer.json"), R"({"chat_template": "{% for m in messages %}{{ m.content }"})");
  const ChatPromptBuilder broken(tok, "some/model");
  try {
    broken.render(messages_, {}, true);
    ADD_FAILURE() << "a template that does not parse rendered";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("some/model: its chat template: line 1, column 37", 0), 0u) << e.what();
  }
}

TEST_F(ChatPlanTest, SchemasCompileOnceAndTheCacheKeepsTheMostRecent) {
  const OutputFormat person{OutputFormat::Kind::kJsonSchema, "p",
                            ordered_json::parse(R"({"type": "object", "properties": {"name": {"type": "string"}}})"), {}};
  const ChatPlan a = plan({}, person), b = plan({}, person);
  ASSERT_TRUE(a.gen.grammar && b.gen.grammar);
  EXPECT_EQ(a.gen.grammar->grammar, b.gen.grammar->grammar) << "the same schema shares its compiled grammar";
  EXPECT_EQ(a.gen.grammar->masks, b.gen.grammar->masks);
  EXPECT_EQ(a.gen.grammar->source, "'response_format'");
  // Capacity 2: two other grammars push the first one out.
  plan({}, {OutputFormat::Kind::kJsonObject, "", nullptr, {}});
  plan({}, {OutputFormat::Kind::kJsonSchema, "n", ordered_json::parse(R"({"type": "integer"})"), {}});
  EXPECT_NE(plan({}, person).gen.grammar->grammar, a.gen.grammar->grammar);
}

TEST_F(ChatPlanTest, ErrorsNameThePartOfTheRequest) {
  try {
    plan({}, {OutputFormat::Kind::kJsonSchema, "bad", ordered_json::parse(R"({"type": "frobnicate"})"), {}});
    ADD_FAILURE() << "an unknown schema type was accepted";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.param, "response_format") << e.what();
  }
  ChatOptions with_tools;
  with_tools.tools = ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])");
  if (prompts_.tool_call_format()) {
    const ChatPlan p = plan({ToolChoice::Mode::kRequired, ""}, {}, with_tools);
    EXPECT_EQ(p.tool_format, prompts_.tool_call_format());
    EXPECT_FALSE(p.forced.empty());
    ASSERT_TRUE(p.gen.grammar.has_value());
    EXPECT_EQ(p.gen.grammar->source, "'tool_choice'");
  } else {
    try {
      plan({ToolChoice::Mode::kAuto, ""}, {}, with_tools);
      ADD_FAILURE() << "tools were accepted on a template with no tool-call format";
    } catch (const RequestError& e) {
      EXPECT_EQ(e.param, "tools") << e.what();
    }
  }
}

}  // namespace
}  // namespace ember::engine
