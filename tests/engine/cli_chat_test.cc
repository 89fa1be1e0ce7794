// The command-line contract of DESIGN.md for chat and generate, run as a user would.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "chat_skills_eval.h"
#include "engine/chat_session.h"
#include "run_command.h"

namespace ember::test {
namespace {

Output run(const std::string& cmd) { return run_command(cmd); }

std::string tmp_file(const std::string& name, const std::string& content) {
  const auto path = std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "_" + name);
  std::ofstream(path) << content;
  return path.string();
}

// The CLI's one-shot reply equals the library's for the first eval cases.
TEST(CliChat, OneShotJsonEqualsLibraryReply) {
  const auto cases = read_jsonl(testdata("chat_skills/eval.jsonl"));
  const std::string dir = model_dir("chat-skills");
  auto model = model::Model::load(dir, {.threads = 2, .progress = {}});
  const auto tok = tokenizer::Tokenizer::from_folder(dir);
  auto params = sampling::from_generation_config(dir);
  sampling::merge_eos(params, model->config().eos_token_ids);
  params.max_new_tokens = 1024;
  int checked = 0;
  for (const auto& c : cases) {
    if (checked == 10) break;
    const std::string file = tmp_file("msgs.json", c["messages"].dump());
    const std::string flag = c["enable_thinking"].get<bool>() ? "--think" : "--no-think";
    const Output o = run(ember_binary() + " chat -m " + model_dir("chat-skills") + " --messages " + file + " --json " + flag);
    std::filesystem::remove(file);
    ASSERT_EQ(o.status, 0) << o.out;
    const auto j = nlohmann::json::parse(o.out);
    ASSERT_TRUE(j.contains("content") && j.contains("reasoning_content")) << o.out;
    EXPECT_EQ(c["enable_thinking"].get<bool>(), !j["reasoning_content"].get<std::string>().empty()) << o.out;
    engine::ChatSession chat(*model, tok, dir);
    engine::ChatOptions opts;
    opts.enable_thinking = c["enable_thinking"].get<bool>();
    const engine::ChatReply r = chat.reply(c["messages"], params, opts);
    EXPECT_EQ(j["content"].get<std::string>(), r.content);
    EXPECT_EQ(j["reasoning_content"].get<std::string>(), r.reasoning_content);
    ++checked;
  }
  EXPECT_EQ(checked, std::min<int>(10, static_cast<int>(cases.size())));
}

// Malformed JSON in --messages is an input error (exit 1) naming the file and the position, not an
// internal error (exit 2) showing nlohmann's exception.
TEST(CliChat, MalformedMessagesFileNamesFileAndPosition) {
  const std::string file = tmp_file("bad_msgs.json", "[{\"role\": \"user\", \"content\": \"Hi\"},\n {\"role\": }]\n");
  const Output o = run(ember_binary() + " chat -m " + model_dir("chat-skills") + " --messages " + file + " --json 2>&1");
  std::filesystem::remove(file);
  ASSERT_TRUE(WIFEXITED(o.status)) << o.out;
  EXPECT_EQ(WEXITSTATUS(o.status), 1) << o.out;
  EXPECT_NE(o.out.find(file + ": invalid JSON"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("line 2, column 11"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("internal error"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("json.exception"), std::string::npos) << o.out;
  const std::string empty = tmp_file("empty_msgs.json", "[]");  // nothing to reply to
  const Output none = run(ember_binary() + " chat -m " + model_dir("chat-skills") + " --messages " + empty + " 2>&1");
  std::filesystem::remove(empty);
  EXPECT_EQ(WEXITSTATUS(none.status), 1) << none.out;
  EXPECT_NE(none.out.find(empty + ": holds no messages"), std::string::npos) << none.out;
  const std::string not_array = tmp_file("obj_msgs.json", "{\"role\": \"user\"}");
  const Output o2 = run(ember_binary() + " chat -m " + model_dir("chat-skills") + " --messages " + not_array + " 2>&1");
  std::filesystem::remove(not_array);
  EXPECT_EQ(WEXITSTATUS(o2.status), 1) << o2.out;
  EXPECT_NE(o2.out.find(not_array + ": expected a JSON array"), std::string::npos) << o2.out;
}

// Issue 41 item 9: a message the template cannot use is named as the server names it
// (messages[0].content), not reported from inside the template ("line 16, column 42: can only
// concatenate str").
TEST(CliChat, BadMessageInFileIsNamed) {
  for (const auto& [messages, field] : std::vector<std::pair<std::string, std::string>>{
           {R"([{"role": "user", "content": 5}])", "messages[0].content: must be a string"},
           {R"([{"role": "user", "content": "Hi"}, {"role": "wizard", "content": "x"}])", "messages[1].role: 'wizard'"}}) {
    const std::string file = tmp_file("bad_message.json", messages);
    const Output o = run(ember_binary() + " chat -m " + model_dir("chat-skills") + " --messages " + file + " --json 2>&1");
    std::filesystem::remove(file);
    ASSERT_TRUE(WIFEXITED(o.status)) << o.out;
    EXPECT_EQ(WEXITSTATUS(o.status), 1) << o.out;
    EXPECT_NE(o.out.find(file + ": " + field), std::string::npos) << o.out;
    EXPECT_EQ(o.out.find("line 16"), std::string::npos) << o.out;
  }
}

TEST(CliChat, PipedLinesGetOneReplyEach) {
  const Output o = run("printf 'Hello!\\nMy name is Mila.\\nWhat is my name?\\n' | " + ember_binary() + " chat -m " +
                       model_dir("chat-skills") + " --no-think -q");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_NE(o.out.find("Mila"), std::string::npos) << o.out;
  EXPECT_EQ(std::count(o.out.begin(), o.out.end(), '\n'), 3) << o.out;
}

// A piped line that fails is named by its number on stderr, the chat goes on with the next line, and
// the exit status is 1 at the end (it was 0 after ten "error: ..." lines of random bytes).
TEST(CliChat, PipedLineErrorsAreNumberedAndFailTheExit) {
  const std::string chat = ember_binary() + " chat -m " + model_dir("chat-skills") + " --no-think -q -n 4 --temperature 0";
  const std::string err = tmp_file("chat_err.txt", "");
  const Output o = run("printf 'Hello!\\n\\377\\376 bad\\n\\nHi again\\n' | " + chat + " 2>" + err);
  std::string stderr_text;
  std::getline(std::ifstream(err), stderr_text, '\0');
  ASSERT_TRUE(WIFEXITED(o.status)) << o.out;
  EXPECT_EQ(WEXITSTATUS(o.status), 1) << o.out << stderr_text;
  EXPECT_NE(stderr_text.find("ember: error: line 2: tokenizer: input text is not valid UTF-8"), std::string::npos)
      << stderr_text;
  EXPECT_EQ(std::count(o.out.begin(), o.out.end(), '\n'), 2) << o.out;  // lines 1 and 4 were answered

  // A template that fails to render fails every line, each named.
  const std::string tmpl = tmp_file("raise.jinja", "{{ raise_exception('no chat here') }}");
  const Output t = run("printf 'a\\nb\\n' | " + chat + " --chat-template " + tmpl + " 2>" + err);
  std::getline(std::ifstream(err), stderr_text, '\0');
  EXPECT_EQ(WEXITSTATUS(t.status), 1) << stderr_text;
  EXPECT_NE(stderr_text.find("ember: error: line 1: "), std::string::npos) << stderr_text;
  EXPECT_NE(stderr_text.find("ember: error: line 2: "), std::string::npos) << stderr_text;
  EXPECT_NE(stderr_text.find("no chat here"), std::string::npos) << stderr_text;
  for (const auto& f : {err, tmpl}) std::filesystem::remove(f);
}

// A model without a chat template (a base model's GGUF) is refused before the first line, naming the
// file, instead of failing every line the user types.
TEST(CliChat, NoChatTemplateIsRefusedAtStart) {
  const std::string gguf = model_dir("gguf/tiny-qwen2-q4_0.gguf");
  const Output o = run("printf 'a\nb\n' | " + ember_binary() + " chat -m " + gguf + " -q 2>&1");
  ASSERT_TRUE(WIFEXITED(o.status)) << o.out;
  EXPECT_EQ(WEXITSTATUS(o.status), 1) << o.out;
  EXPECT_NE(o.out.find("ember: error: " + gguf + ": no chat template"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("line 1"), std::string::npos) << o.out;
}

// A chat template that does not parse is named: a --chat-template file by its path, the model's own
// by its folder.
TEST(CliChat, BrokenChatTemplateIsNamed) {
  const std::string tmpl = tmp_file("broken.jinja", "{% for m in messages %}{{ m.content }");
  const Output o = run("echo hi | " + ember_binary() + " chat -m " + model_dir("chat-skills") + " --chat-template " +
                       tmpl + " -q 2>&1");
  EXPECT_EQ(WEXITSTATUS(o.status), 1) << o.out;
  EXPECT_NE(o.out.find("ember: error: " + tmpl + ": line 1, column 37: unexpected '}'"), std::string::npos) << o.out;
  std::filesystem::remove(tmpl);
}

// /save checks the file once written and closed: on a full disk (/dev/full) it left an empty file and
// said nothing. Piped, that is a failed line.
TEST(CliChat, SaveThatCannotWriteSaysWhy) {
  const Output o = run("printf '/save /dev/full\\n' | " + ember_binary() + " chat -m " + model_dir("chat-skills") +
                       " -q 2>&1");
  ASSERT_TRUE(WIFEXITED(o.status)) << o.out;
  EXPECT_EQ(WEXITSTATUS(o.status), 1) << o.out;
  EXPECT_NE(o.out.find("ember: error: line 1: /dev/full: write failed (No space left on device)"), std::string::npos)
      << o.out;
}

// --quantize (chat, generate and serve share it): the matrices are held as 8- or 4-bit blocks (q4_k:
// llama.cpp's K-quant super-blocks; q4_k_m / q5_k_m: llama.cpp's mixes, Q6_K among them), the load
// line says so with the types held, and the model still recalls a name across turns.
TEST(CliChat, QuantizeFlag) {
  const std::string turns = "printf 'Hello!\\nMy name is Mila.\\nWhat is my name?\\n' | ";
  for (const std::string q : {"q8_0", "q4_0", "q4_k", "q4_k_m", "q5_k_m"}) {
    const Output o = run(turns + ember_binary() + " chat -m " + model_dir("chat-skills") + " --no-think --quantize " + q + " 2>&1");
    ASSERT_EQ(o.status, 0) << o.out;
    EXPECT_NE(o.out.find("matrices quantized to " + q + " ("), std::string::npos) << o.out;
    if (q.ends_with("_m")) {
      EXPECT_NE(o.out.find("q6_k"), std::string::npos) << o.out;
    }
    EXPECT_NE(o.out.find("Your name is Mila"), std::string::npos) << o.out;
  }
  const Output bad = run(ember_binary() + " generate -m " + model_dir("story-656k") + " -p x --quantize q5_0 2>&1");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("--quantize"), std::string::npos) << bad.out;
}

TEST(CliGenerate, StoryIsCoherentAndErrorsExitNonZero) {
  const Output o = run(ember_binary() + " generate -m " + model_dir("story-656k") + " -p 'Once upon a time' -n 40 -q");
  ASSERT_EQ(o.status, 0);
  EXPECT_EQ(o.out.rfind("Once upon a time", 0), 0u) << o.out;
  EXPECT_GT(o.out.size(), 80u) << o.out;
  const Output bad = run(ember_binary() + " generate -m /nonexistent -p x 2>&1");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("/nonexistent"), std::string::npos) << bad.out;
}

// The first generated token comes from the prefill's logits: with -n 1 no decode step produced a
// token, so the decode rate counts none (it used to divide 1 token by the decode time).
TEST(CliGenerate, DecodeRateCountsOnlyDecodedTokens) {
  const std::string gen = ember_binary() + " generate -m " + model_dir("story-656k") + " -p 'Once upon a time'";
  const Output one = run(gen + " -n 1 2>&1 >/dev/null");
  ASSERT_EQ(one.status, 0) << one.out;
  EXPECT_NE(one.out.find("generated 1 tokens (0 by decode steps), decode 0.0 tokens/s"), std::string::npos) << one.out;
  const Output ten = run(gen + " -n 10 2>&1 >/dev/null");
  ASSERT_EQ(ten.status, 0) << ten.out;
  EXPECT_NE(ten.out.find("generated 10 tokens (9 by decode steps)"), std::string::npos) << ten.out;
}

TEST(CliGenerate, BeamsFlag) {
  const std::string gen = ember_binary() + " generate -m " + model_dir("story-656k") + " -p 'Once upon a time' -n 30 -q";
  const Output greedy = run(gen);
  const Output one_beam = run(gen + " --beams 1");
  ASSERT_EQ(one_beam.status, 0);
  EXPECT_EQ(one_beam.out, greedy.out);
  const Output beams = run(gen + " --beams 4 --num-return-sequences 3");
  ASSERT_EQ(beams.status, 0) << beams.out;
  size_t headers = 0;
  for (size_t at = beams.out.find("--- beam "); at != std::string::npos; at = beams.out.find("--- beam ", at + 1)) ++headers;
  EXPECT_EQ(headers, 3u) << beams.out;
  EXPECT_NE(beams.out.find("\nOnce upon a time"), std::string::npos) << beams.out;
  const Output bad = run(gen + " --beams 4 --temperature 0.7 2>&1");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("--beams"), std::string::npos) << bad.out;
  const Output too_many = run(gen + " --beams 2 --num-return-sequences 3 2>&1");
  EXPECT_NE(too_many.status, 0);
  EXPECT_NE(too_many.out.find("num_return_sequences"), std::string::npos) << too_many.out;
}

// A reply that fills the context is cut, and the chat says so and how to go on.
TEST(CliChat, ContextEndIsReportedWithReset) {
  const std::string chat = ember_binary() + " chat -m " + model_dir("chat-skills") + " --no-think -q";
  // A context just longer than the prompt: the answer cannot fit.
  const Output o = run("printf 'What is the capital of France?\\n' | " + chat + " --ctx 40 2>&1");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_NE(o.out.find("filled the context of 40 tokens"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("/reset"), std::string::npos) << o.out;
}

// --grammar and --json-schema: the output follows them; a bad file is a clear error and exit 1.
TEST(CliGenerate, GrammarAndSchemaFlags) {
  const std::string gen = ember_binary() + " generate -m " + model_dir("chat-skills") + " -q -p 'Once upon a time' ";
  const std::string gbnf = tmp_file("g.gbnf", "root ::= \", there was a \" (\"cat\" | \"dog\") \".\"\n");
  const Output g = run(gen + "--grammar " + gbnf + " --temperature 1 --seed 4");
  EXPECT_EQ(g.status, 0);
  EXPECT_TRUE(g.out == "Once upon a time, there was a cat.\n" || g.out == "Once upon a time, there was a dog.\n") << g.out;
  const std::string bad = tmp_file("bad.gbnf", "root ::= \"a\" | (\"b\"\n");
  const Output b = run(gen + "--grammar " + bad + " 2>&1");
  EXPECT_NE(b.status, 0);
  EXPECT_NE(b.out.find(bad + ": grammar: line 2, column 1: expected ')'"), std::string::npos) << b.out;
  const std::string schema = tmp_file("s.json", R"({"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}})");
  const Output s = run(ember_binary() + " chat -m " + model_dir("chat-skills") + " --json-schema " + schema + " 2>&1");
  EXPECT_NE(s.status, 0);
  EXPECT_NE(s.out.find("unsupported keyword \"pattern\" at /properties/a/pattern"), std::string::npos) << s.out;
  for (const auto& f : {gbnf, bad, schema}) std::filesystem::remove(f);
}

}  // namespace
}  // namespace ember::test
