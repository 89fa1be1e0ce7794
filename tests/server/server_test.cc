// `ember serve` in-process on a loopback port, driven by httplib::Client: greedy answers equal
// engine::ChatSession's, streaming equals non-streaming, concurrent requests equal sequential ones,
// and bad requests get OpenAI-shaped errors without disturbing the server.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <sstream>

#include "../engine/chat_skills_eval.h"
#include "engine/chat_session.h"
#include "http_helpers.h"

namespace ember::test {
namespace {

struct Reference {
  ordered_json messages;
  bool enable_thinking = false;
  std::string content, reasoning;
  size_t completion_tokens = 0;
  std::string finish;
};

constexpr int kMaxTokens = 200;

class ServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(model_dir("chat-skills"));
    model_ = model::Model::load(*dir_, {.threads = 2, .progress = {}}).release();
    tok_ = new tokenizer::Tokenizer(tokenizer::Tokenizer::from_folder(*dir_));
    params_ = new sampling::SamplingParams(sampling::from_generation_config(*dir_));
    sampling::merge_eos(*params_, model_->config().eos_token_ids);
    params_->max_new_tokens = kMaxTokens;
    cases_ = new std::vector<nlohmann::ordered_json>;
    refs_ = new std::vector<Reference>;
    const auto cases = read_jsonl(testdata("chat_skills/eval.jsonl"));
    for (size_t i = 0; i < cases.size(); i += 9) cases_->push_back(cases[i]);  // every skill appears
  }
  static void TearDownTestSuite() {
    delete refs_;
    delete cases_;
    delete params_;
    delete tok_;
    delete model_;
    delete dir_;
  }

  static std::unique_ptr<RunningServer> start(engine::SchedulerOptions so = {}, server::ServerOptions o = {}) {
    if (so.max_parallel == 8) so.max_parallel = 4;
    return std::make_unique<RunningServer>(*model_, *tok_, so, o);
  }

  static ordered_json chat_body(const Reference& r, bool stream) {
    return ordered_json{{"model", "chat-skills"},
                        {"messages", r.messages},
                        {"max_tokens", kMaxTokens},
                        {"stream", stream},
                        {"chat_template_kwargs", {{"enable_thinking", r.enable_thinking}}}};
  }

  static httplib::Result post(httplib::Client& c, const std::string& path, const ordered_json& body) {
    return c.Post(path.c_str(), body.dump(), "application/json");
  }

  // Content, reasoning and finish reason of a streamed chat completion; checks the chunk format.
  static Reference collect_stream(const std::string& body) {
    const SseEvents ev = parse_sse(body);
    EXPECT_TRUE(ev.done) << "no data: [DONE]";
    Reference got;
    bool first = true;
    for (const auto& c : ev.chunks) {
      EXPECT_EQ(c["object"], "chat.completion.chunk");
      if (c["choices"].empty()) continue;
      const auto& ch = c["choices"][0];
      if (first) {
        EXPECT_EQ(ch["delta"]["role"], "assistant");
      }
      first = false;
      if (ch["delta"].contains("content")) got.content += ch["delta"]["content"].get<std::string>();
      if (ch["delta"].contains("reasoning_content")) got.reasoning += ch["delta"]["reasoning_content"].get<std::string>();
      if (!ch["finish_reason"].is_null()) got.finish = ch["finish_reason"].get<std::string>();
    }
    return got;
  }

  static inline std::string* dir_ = nullptr;
  static inline model::Model* model_ = nullptr;
  static inline tokenizer::Tokenizer* tok_ = nullptr;
  static inline sampling::SamplingParams* params_ = nullptr;
  static inline std::vector<nlohmann::ordered_json>* cases_ = nullptr;
  static inline std::vector<Reference>* refs_ = nullptr;

  // ChatSession's one-shot answers to the first `at_least` cases (all by default), made on first
  // use: most tests need one, and each costs a second under the sanitizers.
  static const std::vector<Reference>& refs(size_t at_least = SIZE_MAX) {
    while (refs_->size() < std::min(at_least, cases_->size())) refs_->push_back(reference(*model_, (*cases_)[refs_->size()]));
    return *refs_;
  }

  // ChatSession's one-shot answer of `model` to eval case c.
  static Reference reference(model::Model& model, const ordered_json& c) {
    Reference r;
    r.messages = c["messages"];
    r.enable_thinking = c["enable_thinking"].get<bool>();
    engine::ChatSession chat(model, *tok_, *dir_);
    engine::ChatOptions o;
    o.enable_thinking = r.enable_thinking;
    const auto reply = chat.reply(r.messages, *params_, o);
    r.content = reply.content;
    r.reasoning = reply.reasoning_content;
    r.completion_tokens = reply.generation.tokens.size();
    r.finish = engine::finish_reason_name(reply.generation.finish);
    return r;
  }

  // The server's answer to r's conversation, streamed or not; finish says "http error ..." when the
  // request failed.
  static Reference ask(RunningServer& srv, const Reference& r, bool stream) {
    auto c = srv.client();
    auto res = post(c, "/v1/chat/completions", chat_body(r, stream));
    Reference got;
    if (!res || res->status != 200) {
      got.finish = "http error " + (res ? std::to_string(res->status) + res->body : std::string("none"));
      return got;
    }
    if (stream) return collect_stream(res->body);
    const auto j = ordered_json::parse(res->body);
    got.content = j["choices"][0]["message"]["content"];
    got.reasoning = j["choices"][0]["message"].value("reasoning_content", std::string());
    got.finish = j["choices"][0]["finish_reason"];
    return got;
  }
};

// The metrics once no sequence runs or waits (or after 10 s): a reply reaches its client a moment
// before the scheduler retires the sequence, and sanitizer builds widen that moment.
std::string metrics_when_idle(httplib::Client& c) {
  std::string m;
  for (int i = 0; i < 500; ++i) {
    m = c.Get("/metrics")->body;
    if (metric(m, "ember_running_sequences") == 0 && metric(m, "ember_queue_length") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return m;
}

TEST_F(ServeTest, NonStreamingChatEqualsChatSession) {
  auto srv = start();
  auto c = srv->client();
  ASSERT_FALSE(refs().empty());
  for (const auto& r : refs()) {
    auto res = post(c, "/v1/chat/completions", chat_body(r, false));
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const auto j = ordered_json::parse(res->body);
    EXPECT_EQ(j["object"], "chat.completion");
    const auto& msg = j["choices"][0]["message"];
    EXPECT_EQ(msg["role"], "assistant");
    EXPECT_EQ(msg["content"], r.content);
    EXPECT_EQ(msg.value("reasoning_content", std::string()), r.reasoning);
    EXPECT_EQ(j["choices"][0]["finish_reason"], r.finish);
    EXPECT_EQ(j["usage"]["completion_tokens"].get<size_t>(), r.completion_tokens);
    EXPECT_EQ(j["usage"]["total_tokens"].get<int64_t>(),
              j["usage"]["prompt_tokens"].get<int64_t>() + j["usage"]["completion_tokens"].get<int64_t>());
  }
}

TEST_F(ServeTest, StreamingChatEqualsChatSession) {
  auto srv = start();
  auto c = srv->client();
  for (const auto& r : refs()) {
    ordered_json body = chat_body(r, true);
    body["stream_options"] = {{"include_usage", true}};
    auto res = post(c, "/v1/chat/completions", body);
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_NE(res->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
    const Reference got = collect_stream(res->body);
    EXPECT_EQ(got.content, r.content);
    EXPECT_EQ(got.reasoning, r.reasoning);
    EXPECT_EQ(got.finish, r.finish);
    const SseEvents ev = parse_sse(res->body);
    ASSERT_FALSE(ev.chunks.empty());
    const auto& usage = ev.chunks.back()["usage"];  // include_usage: a last chunk with no choices
    ASSERT_TRUE(usage.is_object()) << ev.chunks.back().dump();
    EXPECT_TRUE(ev.chunks.back()["choices"].empty());
    EXPECT_EQ(usage["completion_tokens"].get<size_t>(), r.completion_tokens);
    for (const auto& ch : ev.chunks) {  // one envelope: same id, created and model; usage null but last
      EXPECT_EQ(ch["id"], ev.chunks[0]["id"]);
      EXPECT_EQ(ch["created"], ev.chunks[0]["created"]);
      EXPECT_EQ(ch["model"], ev.chunks[0]["model"]);
      if (&ch != &ev.chunks.back()) {
        EXPECT_TRUE(ch.contains("usage") && ch["usage"].is_null()) << ch.dump();
      }
    }
  }
}

// Continuous batching: many clients at once get exactly their sequential answers.
TEST_F(ServeTest, ConcurrentRequestsEqualSequentialAnswers) {
  auto srv = start({.max_parallel = 6, .prefill_chunk = 32});
  const int clients = 12;
  const std::vector<Reference>& all = refs();  // made here, before the clients' threads read it
  std::vector<std::future<Reference>> futures;
  for (int i = 0; i < clients; ++i)
    futures.push_back(std::async(std::launch::async, [&, i] {
      return ask(*srv, all[static_cast<size_t>(i) % all.size()], /*stream=*/i % 2 == 1);
    }));
  for (int i = 0; i < clients; ++i) {
    const Reference& r = all[static_cast<size_t>(i) % all.size()];
    const Reference got = futures[static_cast<size_t>(i)].get();
    EXPECT_EQ(got.finish, r.finish) << "client " << i;
    EXPECT_EQ(got.content, r.content) << "client " << i;
    EXPECT_EQ(got.reasoning, r.reasoning) << "client " << i;
  }
  auto c = srv->client();
  const std::string m = metrics_when_idle(c);
  EXPECT_EQ(metric(m, "ember_requests_finished_total"), clients);
  EXPECT_LT(metric(m, "ember_steps_total"), metric(m, "ember_completion_tokens_total"))
      << "decode steps were not batched";
}

// serve --spec ngram: concurrent clients (guessing sequences batched with one another and with
// those that have no guess) get exactly the plain sequential answers, the guesses are counted in
// /metrics; a request's `speculative` false opts out, true is refused where the server does not
// speculate.
TEST_F(ServeTest, SpeculationServerWideEqualsPlainAnswersIsCountedAndChosenPerRequest) {
  engine::SchedulerOptions so{.max_parallel = 6, .prefill_chunk = 32};
  so.spec.mode = engine::SpecMode::kNgram;
  // Guessing always: whether guesses pay is measured (and carried from request to request), and
  // under the sanitizers they may not; here every request must guess where it can.
  so.spec.adaptive = false;
  auto srv = start(so);
  std::vector<Reference> all = refs();
  Reference repeat;  // a reply that repeats itself, so that guesses are taken
  repeat.messages = ordered_json::array({{{"role", "user"}, {"content", "Repeat the phrase king milk 8 times."}}});
  const ordered_json repeat_case{{"messages", repeat.messages}, {"enable_thinking", false}};
  all.push_back(reference(*model_, repeat_case));
  std::vector<std::future<Reference>> futures;
  for (size_t i = 0; i < all.size(); ++i)
    futures.push_back(std::async(std::launch::async, [&, i] { return ask(*srv, all[i], /*stream=*/i % 2 == 1); }));
  for (size_t i = 0; i < all.size(); ++i) {
    const Reference got = futures[i].get();
    EXPECT_EQ(got.finish, all[i].finish) << "client " << i;
    EXPECT_EQ(got.content, all[i].content) << "client " << i;
    EXPECT_EQ(got.reasoning, all[i].reasoning) << "client " << i;
  }
  auto c = srv->client();
  const std::string m = metrics_when_idle(c);
  EXPECT_GT(metric(m, "ember_spec_drafted_tokens_total"), 0);
  EXPECT_GT(metric(m, "ember_spec_accepted_tokens_total"), 0);
  EXPECT_GT(metric(m, "ember_spec_acceptance_rate"), 0);
  // Per request: `speculative: false` opts out (the same answer, no guess counted), true is the default here.
  const double drafted = metric(m, "ember_spec_drafted_tokens_total");
  ordered_json body = chat_body(all.back(), false);
  body["speculative"] = false;
  auto res = post(c, "/v1/chat/completions", body);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(ordered_json::parse(res->body)["choices"][0]["message"]["content"], all.back().content);
  EXPECT_EQ(metric(metrics_when_idle(c), "ember_spec_drafted_tokens_total"), drafted);
  body["speculative"] = true;
  res = post(c, "/v1/chat/completions", body);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_GT(metric(metrics_when_idle(c), "ember_spec_drafted_tokens_total"), drafted);
  body["speculative"] = "yes";
  res = post(c, "/v1/chat/completions", body);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(ordered_json::parse(res->body)["error"]["param"], "speculative");
  // A server that does not speculate refuses a request that asks for it, by name.
  auto plain = start();
  auto pc = plain->client();
  body["speculative"] = true;
  res = post(pc, "/v1/chat/completions", body);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(ordered_json::parse(res->body)["error"]["param"], "speculative");
  body["speculative"] = false;
  res = post(pc, "/v1/chat/completions", body);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

// A model quantized at load (`ember serve --quantize q4_0`): concurrent batched answers still equal a
// ChatSession's on the same quantized weights.
TEST_F(ServeTest, QuantizedModelConcurrentAnswersEqualChatSession) {
  auto q4 = model::Model::load(*dir_, {.threads = 2, .progress = {}, .quantize = kernels::QType::Q4_0});
  ASSERT_EQ(q4->weight_type(), "q4_0");
  const size_t n = std::min<size_t>(6, cases_->size());
  std::vector<Reference> want;
  for (size_t i = 0; i < n; ++i) want.push_back(reference(*q4, (*cases_)[i]));
  RunningServer srv(*q4, *tok_, {.max_parallel = 4, .prefill_chunk = 32}, {});
  std::vector<std::future<Reference>> futures;
  for (size_t i = 0; i < n; ++i)
    futures.push_back(std::async(std::launch::async, [&, i] { return ask(srv, want[i], /*stream=*/i % 2 == 0); }));
  for (size_t i = 0; i < n; ++i) {
    const Reference got = futures[i].get();
    EXPECT_EQ(got.content, want[i].content) << "client " << i;
    EXPECT_EQ(got.reasoning, want[i].reasoning) << "client " << i;
  }
}

// The next turn of a conversation reuses the KV cache of the previous one.
TEST_F(ServeTest, NextTurnReusesCachedPrefix) {
  auto srv = start();
  auto c = srv->client();
  const Reference& r = refs(1).front();
  ordered_json body = chat_body(r, false);
  auto first = post(c, "/v1/chat/completions", body);
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, 200);
  const auto j1 = ordered_json::parse(first->body);
  body["messages"].push_back({{"role", "assistant"}, {"content", j1["choices"][0]["message"]["content"]}});
  body["messages"].push_back({{"role", "user"}, {"content", "Thank you."}});
  auto second = post(c, "/v1/chat/completions", body);
  ASSERT_TRUE(second);
  ASSERT_EQ(second->status, 200);
  const auto j2 = ordered_json::parse(second->body);
  const int64_t cached = j2["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  EXPECT_GE(cached, j1["usage"]["prompt_tokens"].get<int64_t>() / 2) << j2.dump();
  EXPECT_LT(cached, j2["usage"]["prompt_tokens"].get<int64_t>());
  EXPECT_GT(metric(srv->server().metrics_text(), "ember_prompt_tokens_reused_total"), 0);
}

TEST_F(ServeTest, TextCompletionEqualsSession) {
  auto srv = start();
  auto c = srv->client();
  const std::string prompt = "Once upon a time";
  auto params = sampling::from_generation_config(*dir_);
  sampling::merge_eos(params, model_->config().eos_token_ids);
  params.max_new_tokens = 40;
  engine::Session session(*model_, *tok_);
  const auto expected = session.generate(tok_->encode(prompt, true), params);
  auto res = post(c, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 40}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const auto j = ordered_json::parse(res->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], expected.text);
  auto streamed = post(c, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 40}, {"stream", true}});
  ASSERT_TRUE(streamed);
  const SseEvents ev = parse_sse(streamed->body);
  EXPECT_TRUE(ev.done);
  std::string text;
  for (const auto& ch : ev.chunks) text += ch["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, expected.text);
  // The same prompt as token ids, bare or as a list of one list.
  const std::vector<int32_t> ids = tok_->encode(prompt, true);
  for (const ordered_json& p : {ordered_json(ids), ordered_json::array({ids})}) {
    auto by_ids = post(c, "/v1/completions", {{"prompt", p}, {"max_tokens", 40}});
    ASSERT_TRUE(by_ids);
    ASSERT_EQ(by_ids->status, 200) << by_ids->body;
    EXPECT_EQ(ordered_json::parse(by_ids->body)["choices"][0]["text"], expected.text);
  }
  auto outside = post(c, "/v1/completions", {{"prompt", {1, 99999999}}, {"max_tokens", 4}});
  ASSERT_TRUE(outside);
  EXPECT_EQ(outside->status, 400);
  EXPECT_EQ(ordered_json::parse(outside->body)["error"]["param"], "prompt");
  // Several prompts, as strings and ids: one choice each, in order, each its own prompt's answer.
  const std::string other = "The little dog";
  auto expected_other = engine::Session(*model_, *tok_).generate(tok_->encode(other, true), params);
  auto several = post(c, "/v1/completions", {{"prompt", ordered_json::array({ordered_json(ids), ordered_json(other)})}, {"max_tokens", 40}});
  ASSERT_TRUE(several);
  ASSERT_EQ(several->status, 200) << several->body;
  const auto sj = ordered_json::parse(several->body);
  ASSERT_EQ(sj["choices"].size(), 2u);
  EXPECT_EQ(sj["choices"][0]["index"], 0);
  EXPECT_EQ(sj["choices"][0]["text"], expected.text);
  EXPECT_EQ(sj["choices"][1]["index"], 1);
  EXPECT_EQ(sj["choices"][1]["text"], expected_other.text);
  EXPECT_EQ(sj["usage"]["prompt_tokens"], ids.size() + tok_->encode(other, true).size());
  EXPECT_EQ(sj["usage"]["completion_tokens"], expected.tokens.size() + expected_other.tokens.size());
  auto mixed = post(c, "/v1/completions", {{"prompt", ordered_json::array({"a", 5})}, {"max_tokens", 4}});
  ASSERT_TRUE(mixed);
  EXPECT_EQ(mixed->status, 400) << mixed->body;
}

// n choices: the prompt is computed once (its blocks forked), choice i samples as a Session with
// seed + i does, streamed or not; n past the limit or past --parallel is a 400 naming n.
TEST_F(ServeTest, ChoicesForkThePromptAndSampleApart) {
  auto srv = start();
  auto c = srv->client();
  const std::string prompt = "Once upon a time";
  const std::vector<int32_t> ids = tok_->encode(prompt, true);
  auto params = sampling::from_generation_config(*dir_);
  sampling::merge_eos(params, model_->config().eos_token_ids);
  params.max_new_tokens = 24;
  params.do_sample = true;
  params.temperature = 1.0f;
  params.top_k = 0;
  params.top_p = 1.0f;
  std::vector<std::string> expected;
  for (uint64_t i = 0; i < 3; ++i) {
    params.seed = 11 + i;
    expected.push_back(engine::Session(*model_, *tok_).generate(ids, params).text);
  }
  EXPECT_TRUE(expected[0] != expected[1] || expected[1] != expected[2]) << "seeds should give different samples";
  const ordered_json body{{"prompt", prompt}, {"max_tokens", 24}, {"n", 3}, {"seed", 11},
                          {"temperature", 1.0},  {"top_k", 0},        {"top_p", 1.0}};
  const double prefilled_before = metric(metrics_when_idle(c), "ember_prefill_tokens_total");
  auto res = post(c, "/v1/completions", body);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const auto j = ordered_json::parse(res->body);
  ASSERT_EQ(j["choices"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);
    EXPECT_EQ(j["choices"][i]["text"], expected[i]) << "choice " << i;
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], ids.size());  // one prompt, counted once
  const double prefilled = metric(metrics_when_idle(c), "ember_prefill_tokens_total") - prefilled_before;
  EXPECT_LE(prefilled, static_cast<double>(ids.size())) << "the prompt is computed once for all choices";

  ordered_json streamed_body = body;
  streamed_body["stream"] = true;
  auto streamed = post(c, "/v1/completions", streamed_body);
  ASSERT_TRUE(streamed);
  const SseEvents ev = parse_sse(streamed->body);
  EXPECT_TRUE(ev.done);
  std::vector<std::string> texts(3);
  std::vector<int> finishes(3, 0);
  for (const auto& ch : ev.chunks)
    for (const auto& choice : ch["choices"]) {
      const size_t i = choice["index"].get<size_t>();
      ASSERT_LT(i, 3u);
      texts[i] += choice["text"].get<std::string>();
      if (!choice["finish_reason"].is_null()) ++finishes[i];
    }
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(texts[i], expected[i]) << "streamed choice " << i;
    EXPECT_EQ(finishes[i], 1) << "choice " << i << " has one finish_reason";
  }

  // Chat: n choices with the role first in each.
  auto chat = post(c, "/v1/chat/completions", {{"messages", ordered_json::array({{{"role", "user"}, {"content", "Hi"}}})},
                                               {"max_tokens", 8}, {"n", 2}, {"stream", true}});
  ASSERT_TRUE(chat);
  std::vector<int> roles(2, 0);
  for (const auto& ch : parse_sse(chat->body).chunks)
    for (const auto& choice : ch["choices"])
      if (choice["delta"].contains("role")) ++roles[choice["index"].get<size_t>()];
  EXPECT_EQ(roles, std::vector<int>({1, 1}));

  for (const int n : {9, 5}) {  // past Ember's limit; past this server's 4 parallel sequences
    auto bad = post(c, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 4}, {"n", n}});
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->status, 400) << bad->body;
    EXPECT_NE(bad->body.find(n == 9 ? "\"n\"" : "parallel"), std::string::npos) << bad->body;
  }
}

// reasoning_effort switches thinking as chat_template_kwargs.enable_thinking does (and reaches the
// template as a variable); thinking_budget is the CLI's --think-budget.
TEST_F(ServeTest, ReasoningEffortAndThinkingBudget) {
  auto srv = start();
  auto c = srv->client();
  const Reference* plain = nullptr;
  for (const Reference& r : refs())
    if (!r.enable_thinking) plain = &r;
  ASSERT_NE(plain, nullptr);
  ordered_json body = chat_body(*plain, false);
  body.erase("chat_template_kwargs");
  body["reasoning_effort"] = "none";
  auto res = post(c, "/v1/chat/completions", body);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(ordered_json::parse(res->body)["choices"][0]["message"]["content"], plain->content);
  auto high = post(c, "/apply-template", {{"messages", plain->messages}, {"reasoning_effort", "high"}});
  auto on = post(c, "/apply-template", {{"messages", plain->messages}, {"chat_template_kwargs", {{"enable_thinking", true}}}});
  ASSERT_TRUE(high && on);
  EXPECT_EQ(ordered_json::parse(high->body)["prompt"], ordered_json::parse(on->body)["prompt"]);
  body["reasoning_effort"] = "high";
  body["thinking_budget"] = 0;  // no thought at all
  auto budget = post(c, "/v1/chat/completions", body);
  ASSERT_TRUE(budget);
  ASSERT_EQ(budget->status, 200) << budget->body;
  EXPECT_FALSE(ordered_json::parse(budget->body)["choices"][0]["message"].contains("reasoning_content")) << budget->body;
  body["reasoning_effort"] = "extreme";
  auto bad = post(c, "/v1/chat/completions", body);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(ordered_json::parse(bad->body)["error"]["param"], "reasoning_effort");
}

TEST_F(ServeTest, LogprobsAndStopStrings) {
  auto srv = start();
  auto c = srv->client();
  const Reference& r = refs(1).front();
  ordered_json body = chat_body(r, false);
  body["logprobs"] = true;
  body["top_logprobs"] = 3;
  auto res = post(c, "/v1/chat/completions", body);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const auto j = ordered_json::parse(res->body);
  const auto& lp = j["choices"][0]["logprobs"]["content"];
  // One entry per token of the text: the end token, which the text leaves out, has none.
  const bool ended_by_token = j["choices"][0]["finish_reason"] == "stop";
  ASSERT_EQ(lp.size() + (ended_by_token ? 1 : 0), j["usage"]["completion_tokens"].get<size_t>());
  std::string joined;
  for (const auto& e : lp) {
    joined += e["token"].get<std::string>();
    EXPECT_LE(e["logprob"].get<double>(), 0.0);
    ASSERT_EQ(e["top_logprobs"].size(), 3u);
    EXPECT_EQ(e["top_logprobs"][0]["logprob"], e["logprob"]);  // greedy: the chosen one is the best
    EXPECT_EQ(e["top_logprobs"][0]["token"], e["token"]);       // and shows the same text in place
  }
  EXPECT_EQ(joined, j["choices"][0]["message"]["content"]);  // pieces keep their leading spaces
  // The legacy shape: tokens concatenate to the text and text_offset holds byte offsets into it.
  ordered_json text_body{{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"logprobs", 1}};
  res = post(c, "/v1/completions", text_body);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const auto t = ordered_json::parse(res->body)["choices"][0];
  const std::string text = t["text"];
  std::string concatenated;
  for (size_t i = 0; i < t["logprobs"]["tokens"].size(); ++i) {
    EXPECT_EQ(t["logprobs"]["text_offset"][i], concatenated.size()) << i;
    concatenated += t["logprobs"]["tokens"][i].get<std::string>();
  }
  EXPECT_EQ(concatenated, text);
  EXPECT_NE(text.find(' '), std::string::npos) << text;
  // A stop string cuts the answer before it.
  ASSERT_GT(r.content.size(), 4u);
  const std::string stop = r.content.substr(r.content.size() / 2, 2);
  body = chat_body(r, false);
  body["stop"] = ordered_json::array({stop});
  res = post(c, "/v1/chat/completions", body);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const auto k = ordered_json::parse(res->body);
  EXPECT_EQ(k["choices"][0]["message"]["content"], r.content.substr(0, r.content.find(stop)));
  EXPECT_EQ(k["choices"][0]["finish_reason"], "stop");
}

// Bad requests get OpenAI's error shape with the right status, and the server keeps serving.
TEST_F(ServeTest, ErrorsHaveOpenAiShapeAndStatus) {
  server::ServerOptions o;
  o.max_body_bytes = 64 * 1024;
  auto srv = start({}, o);
  auto c = srv->client();
  auto expect_error = [&](const httplib::Result& res, int status, const std::string& what) {
    ASSERT_TRUE(res) << what;
    EXPECT_EQ(res->status, status) << what << ": " << res->body;
    const auto j = ordered_json::parse(res->body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << what << ": " << res->body;
    EXPECT_TRUE(j["error"]["message"].is_string()) << what;
    EXPECT_TRUE(j["error"]["type"].is_string()) << what;
  };
  expect_error(c.Post("/v1/chat/completions", "{\"messages\": [", "application/json"), 400, "malformed JSON");
  expect_error(c.Post("/v1/chat/completions", "[1, 2]", "application/json"), 400, "not an object");
  const ordered_json msgs = ordered_json::array({{{"role", "user"}, {"content", "Hi"}}});
  expect_error(post(c, "/v1/chat/completions", {{"messages", "hello"}}), 400, "messages not an array");
  expect_error(post(c, "/v1/chat/completions", {{"messages", msgs}, {"temperature", "hot"}}), 400, "temperature type");
  expect_error(post(c, "/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 1.5}}), 400, "max_tokens type");
  expect_error(post(c, "/v1/chat/completions", {{"messages", msgs}, {"stop", 5}}), 400, "stop type");
  expect_error(post(c, "/v1/chat/completions", {{"messages", msgs}, {"n", 0}}), 400, "n=0");
  expect_error(post(c, "/v1/chat/completions", {{"messages", ordered_json::array({{{"content", "x"}}})}}), 400,
               "message without role");
  expect_error(post(c, "/v1/completions", {{"prompt", 12}}), 400, "prompt type");
  // Values OpenAI refuses by name: they would do nothing or nothing sensible.
  for (const auto& [extra, param] : std::vector<std::pair<ordered_json, std::string>>{
           {{{"stream_options", {{"include_usage", true}}}}, "stream_options"},  // without stream
           {{{"top_p", 0}}, "top_p"},
           {{{"logit_bias", {{"5", 101}}}}, "logit_bias"}}) {
    ordered_json body{{"messages", msgs}};
    body.update(extra);
    auto res = post(c, "/v1/chat/completions", body);
    expect_error(res, 400, param);
    EXPECT_EQ(ordered_json::parse(res->body)["error"]["param"], param) << res->body;
  }
  {  // tools are checked whatever tool_choice says: a tool the model is only offered is not taken silently
    for (const ordered_json& tools : {ordered_json::parse(R"([{"type": "banana"}])"),
                                      ordered_json::parse(R"([{"type": "function", "function": {"description": "x"}}])")}) {
      for (const char* choice : {"", "auto", "none"}) {
        ordered_json body{{"messages", msgs}, {"tools", tools}};
        if (*choice) body["tool_choice"] = choice;
        auto res = post(c, "/v1/chat/completions", body);
        expect_error(res, 400, "malformed tools, tool_choice " + std::string(choice));
        const auto e = ordered_json::parse(res->body)["error"];
        EXPECT_EQ(e["param"], "tools") << e.dump();
        EXPECT_EQ(e["message"].get<std::string>().rfind("tools[0].", 0), 0u) << e.dump();
      }
    }
  }
  {
    auto res = post(c, "/v1/chat/completions", {{"messages", msgs}, {"temperature", "hot"}});
    ASSERT_TRUE(res);
    EXPECT_EQ(ordered_json::parse(res->body)["error"]["param"], "temperature");
  }
  {  // an id past the vocabulary is the client's mistake (a 400), not a failed generation (500)
    auto res = post(c, "/v1/chat/completions", {{"messages", msgs}, {"logit_bias", {{"999999", 5}}}});
    expect_error(res, 400, "logit_bias outside the vocabulary");
    const auto e = ordered_json::parse(res->body)["error"];
    EXPECT_EQ(e["param"], "logit_bias");
    EXPECT_NE(e["message"].get<std::string>().find("token id 999999 is outside the vocabulary of " +
                                                   std::to_string(model_->config().vocab_size)),
              std::string::npos) << e.dump();
    expect_error(post(c, "/v1/completions", {{"prompt", "Hi"}, {"logit_bias", {{"999999", 5}}}}), 400,
                 "logit_bias outside the vocabulary (completions)");
  }
  std::string long_text;
  for (int i = 0; i < 600; ++i) long_text += "The cat sat on the mat. ";
  {
    auto res = post(c, "/v1/completions", {{"prompt", long_text}});
    expect_error(res, 400, "prompt longer than the context");
    EXPECT_EQ(ordered_json::parse(res->body)["error"]["code"], "context_length_exceeded");
  }
  expect_error(c.Post("/v1/chat/completions", std::string(200 * 1024, 'x'), "application/json"), 413, "body too large");
  expect_error(c.Post("/v1/chat/completions", std::string(200 * 1024, 'x'), "application/x-www-form-urlencoded"), 413,
               "body too large, labelled a form");
  {  // a JSON API takes no multipart form
    httplib::MultipartFormDataItems items{{"messages", "[]", "", ""}};
    expect_error(c.Post("/v1/chat/completions", items), 415, "multipart body");
  }
  expect_error(c.Get("/v1/nothing"), 404, "unknown route");
  {
    auto res = c.Get("/v1/chat/completions");
    expect_error(res, 405, "wrong method");
    EXPECT_EQ(res->get_header_value("Allow"), "POST");
  }
  expect_error(c.Delete("/v1/models"), 405, "wrong method on a GET route");
  // Still healthy and serving.
  auto ok = post(c, "/v1/chat/completions", chat_body(refs(1).front(), false));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ordered_json::parse(ok->body)["choices"][0]["message"]["content"], refs(1).front().content);
}

// `curl -d @file` labels a JSON body application/x-www-form-urlencoded: it is read as JSON whatever
// its label, up to --max-body (httplib refuses forms past 8 KiB on its own).
TEST_F(ServeTest, BodyIsJsonWhateverItsContentType) {
  auto srv = start();
  auto c = srv->client();
  ordered_json body = chat_body(refs(1).front(), false);
  body["user"] = std::string(16 * 1024, 'u');  // a large body; OpenAI's `user` has no effect on the reply
  for (const char* type : {"application/x-www-form-urlencoded", "text/plain", "application/json"}) {
    auto res = c.Post("/v1/chat/completions", body.dump(), type);
    ASSERT_TRUE(res) << type;
    ASSERT_EQ(res->status, 200) << type << ": " << res->body;
    EXPECT_EQ(ordered_json::parse(res->body)["choices"][0]["message"]["content"], refs(1).front().content) << type;
  }
}

TEST_F(ServeTest, ApiKeyIsRequiredWhenSet) {
  server::ServerOptions o;
  o.api_key = "sesame";
  auto srv = start({}, o);
  auto c = srv->client();
  auto res = c.Get("/v1/models");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  EXPECT_EQ(ordered_json::parse(res->body)["error"]["type"], "authentication_error");
  c.set_bearer_token_auth("wrong");
  EXPECT_EQ(c.Get("/v1/models")->status, 401);
  c.set_bearer_token_auth("sesame");
  res = c.Get("/v1/models");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(ordered_json::parse(res->body)["data"][0]["id"], "chat-skills");
  EXPECT_EQ(c.Get("/health")->status, 200);  // health and metrics stay open for probes
}

// A page from another origin may call the API only when --cors allows that origin: the preflight
// answers with the methods and headers, and every answer carries Access-Control-Allow-Origin.
TEST_F(ServeTest, CorsAllowsListedOriginsOnly) {
  server::ServerOptions o;
  o.cors_origins = {"http://app.example"};
  auto srv = start({}, o);
  auto c = srv->client();
  const httplib::Headers from_app{{"Origin", "http://app.example"}, {"Access-Control-Request-Method", "POST"},
                                  {"Access-Control-Request-Headers", "authorization, content-type"}};
  auto pre = c.Options("/v1/chat/completions", from_app);
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_NE(pre->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type");
  // The SDKs' own headers (openai-node's x-stainless-*, Anthropic's x-api-key and anthropic-version):
  // a browser drops the request unless the preflight allows each one.
  const std::string sdk = "content-type,x-api-key,anthropic-version,anthropic-dangerous-direct-browser-access,"
                          "x-stainless-os,x-stainless-retry-count";
  auto pre_sdk = c.Options("/v1/messages", {{"Origin", "http://app.example"}, {"Access-Control-Request-Method", "POST"},
                                            {"Access-Control-Request-Headers", sdk}});
  ASSERT_TRUE(pre_sdk);
  EXPECT_EQ(pre_sdk->status, 204);
  EXPECT_EQ(pre_sdk->get_header_value("Access-Control-Allow-Headers"), sdk);
  auto models = c.Get("/v1/models", httplib::Headers{{"Origin", "http://app.example"}});
  ASSERT_TRUE(models);
  EXPECT_EQ(models->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  auto other = c.Get("/v1/models", httplib::Headers{{"Origin", "http://evil.example"}});
  ASSERT_TRUE(other);
  EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin"));
  auto err = c.Post("/v1/chat/completions", httplib::Headers{{"Origin", "http://app.example"}}, "{", "application/json");
  ASSERT_TRUE(err);
  EXPECT_EQ(err->status, 400);  // errors carry the header too, or the page cannot read them
  EXPECT_EQ(err->get_header_value("Access-Control-Allow-Origin"), "http://app.example");

  auto closed = start();  // without --cors: no origin is allowed
  auto c2 = closed->client();
  auto pre2 = c2.Options("/v1/chat/completions", from_app);
  ASSERT_TRUE(pre2);
  EXPECT_FALSE(pre2->has_header("Access-Control-Allow-Origin"));
}

TEST_F(ServeTest, ModelsRetrieveAndUnsupportedFields) {
  auto srv = start();
  auto c = srv->client();
  auto one = c.Get("/v1/models/chat-skills");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->status, 200);
  EXPECT_EQ(ordered_json::parse(one->body)["id"], "chat-skills");
  auto none = c.Get("/v1/models/gpt-4");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 404);
  EXPECT_EQ(ordered_json::parse(none->body)["error"]["code"], "model_not_found");
  for (const auto& [name, value] : std::vector<std::pair<std::string, ordered_json>>{
           {"audio", {{"voice", "alloy"}, {"format", "wav"}}},
           {"modalities", {"text", "audio"}},
           {"prediction", {{"type", "content"}, {"content", "x"}}},
           {"response_format", {{"type", "xml"}}},
           {"tool_choice", "auto"}}) {  // tool_choice without tools
    ordered_json body = chat_body(refs(1).front(), false);
    body[name] = value;
    auto res = post(c, "/v1/chat/completions", body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << name;
    const ordered_json e = ordered_json::parse(res->body)["error"];
    EXPECT_EQ(e["param"], name) << res->body;
    EXPECT_NE(e["message"].get<std::string>().find(name), std::string::npos) << res->body;
  }
  {  // a schema keyword the converter does not implement is named with its pointer
    ordered_json body = chat_body(refs(1).front(), false);
    body["response_format"] = ordered_json::parse(
        R"({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "^a+$"}}})");
    auto res = post(c, "/v1/chat/completions", body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << res->body;
    EXPECT_EQ(ordered_json::parse(res->body)["error"]["param"], "response_format");
    EXPECT_NE(res->body.find("pattern"), std::string::npos) << res->body;
  }
  {  // chat-skills' template shows no tool-call format: tools are a 400, not calls lost in the content
    ordered_json body = chat_body(refs(1).front(), false);
    body["tools"] = ordered_json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])");
    auto res = post(c, "/v1/chat/completions", body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << res->body;
    EXPECT_EQ(ordered_json::parse(res->body)["error"]["param"], "tools");
    EXPECT_NE(res->body.find("unknown tool-call format"), std::string::npos) << res->body;
  }
  ordered_json fine = chat_body(refs(1).front(), false);  // values that ask for what Ember does anyway
  fine["response_format"] = {{"type", "text"}};
  fine["tool_choice"] = "none";
  auto ok = post(c, "/v1/chat/completions", fine);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

// A last assistant message is the reply begun: Anthropic's prefill (any /v1/messages request ending
// with one) and vLLM's continue_final_message. The prompt ends inside that message, as transformers
// renders it with continue_final_message=True, and the reply is the continuation: the same text as
// /v1/completions gives for that prompt's tokens.
TEST_F(ServeTest, AssistantPrefillIsContinued) {
  auto srv = start();
  auto c = srv->client();
  const ordered_json convo = ordered_json::parse(
      R"([{"role": "user", "content": "What is 47 plus 85?"}, {"role": "assistant", "content": "The answer is"}])");
  auto rendered = post(c, "/apply-template", {{"messages", convo}, {"continue_final_message", true}});
  ASSERT_TRUE(rendered);
  ASSERT_EQ(rendered->status, 200) << rendered->body;
  const std::string prompt = ordered_json::parse(rendered->body)["prompt"];
  EXPECT_TRUE(prompt.ends_with("assistant\nThe answer is")) << prompt;  // no end of turn, no new turn
  auto ids = post(c, "/tokenize", {{"content", prompt}});
  ASSERT_TRUE(ids);
  auto plain = post(c, "/v1/completions", {{"prompt", ordered_json::parse(ids->body)["tokens"]}, {"max_tokens", 24}});
  ASSERT_TRUE(plain);
  ASSERT_EQ(plain->status, 200) << plain->body;
  const std::string continuation = ordered_json::parse(plain->body)["choices"][0]["text"];
  ASSERT_FALSE(continuation.empty());

  auto chat = post(c, "/v1/chat/completions",
                   {{"messages", convo}, {"continue_final_message", true}, {"max_tokens", 24},
                    {"chat_template_kwargs", {{"enable_thinking", false}}}});
  ASSERT_TRUE(chat);
  ASSERT_EQ(chat->status, 200) << chat->body;
  EXPECT_EQ(ordered_json::parse(chat->body)["choices"][0]["message"]["content"], continuation);
  for (const bool stream : {false, true}) {
    auto msg = post(c, "/v1/messages", {{"model", "m"}, {"max_tokens", 24}, {"messages", convo}, {"stream", stream},
                                        {"thinking", {{"type", "disabled"}}}});
    ASSERT_TRUE(msg);
    ASSERT_EQ(msg->status, 200) << msg->body;
    std::string text;
    if (stream) {
      std::istringstream lines(msg->body);  // "event: NAME" then "data: JSON" per event
      for (std::string line; std::getline(lines, line);) {
        if (!line.starts_with("data: ")) continue;
        const ordered_json e = ordered_json::parse(line.substr(6));
        if (e["type"] == "content_block_delta" && e["delta"]["type"] == "text_delta") text += e["delta"]["text"].get<std::string>();
      }
    } else {
      const ordered_json whole = ordered_json::parse(msg->body);
      for (const auto& b : whole["content"])
        if (b["type"] == "text") text += b["text"].get<std::string>();
    }
    EXPECT_EQ(text, continuation) << "stream " << stream;
  }
  // Without an assistant message last there is nothing to continue.
  auto bad = post(c, "/v1/chat/completions",
                  {{"messages", ordered_json::array({convo[0]})}, {"continue_final_message", true}});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(ordered_json::parse(bad->body)["error"]["param"], "continue_final_message") << bad->body;
}

// A Messages reply that max_tokens cut while thinking holds the thinking block alone, as Anthropic's
// does, not an empty text block after it.
TEST_F(ServeTest, MessagesReplyCutWhileThinkingHasNoTextBlock) {
  auto srv = start();
  auto c = srv->client();
  const ordered_json question = ordered_json::parse(R"([{"role": "user", "content": "What is 47 plus 85?"}])");
  auto cut = post(c, "/v1/messages",
                  {{"model", "m"}, {"max_tokens", 3}, {"messages", question}, {"thinking", {{"type", "adaptive"}}}});
  ASSERT_TRUE(cut);
  ASSERT_EQ(cut->status, 200) << cut->body;
  const ordered_json cut_reply = ordered_json::parse(cut->body);
  EXPECT_EQ(cut_reply["stop_reason"], "max_tokens");
  ASSERT_EQ(cut_reply["content"].size(), 1u) << cut_reply.dump();
  EXPECT_EQ(cut_reply["content"][0]["type"], "thinking") << cut_reply.dump();
}

// llama-server's /tokenize, /detokenize and /apply-template shapes.
TEST_F(ServeTest, TokenizeDetokenizeApplyTemplate) {
  auto srv = start();
  auto c = srv->client();
  const std::string text = "Once upon a time, there was a cat.";
  auto t = post(c, "/tokenize", {{"content", text}});
  ASSERT_TRUE(t);
  ASSERT_EQ(t->status, 200) << t->body;
  const auto ids = ordered_json::parse(t->body)["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(ids, tok_->encode(text, false));
  auto special = post(c, "/tokenize", {{"content", text}, {"add_special", true}, {"with_pieces", true}});
  ASSERT_TRUE(special);
  const ordered_json pieces = ordered_json::parse(special->body)["tokens"];
  const auto with_special = tok_->encode(text, true);
  ASSERT_EQ(pieces.size(), with_special.size());
  std::string joined;
  for (size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_EQ(pieces[i]["id"], with_special[i]);
    joined += pieces[i]["piece"].get<std::string>();
  }
  EXPECT_EQ(joined, tok_->decode(with_special, false));  // a SentencePiece piece keeps its space
  auto d = post(c, "/detokenize", {{"tokens", ids}});
  ASSERT_TRUE(d);
  EXPECT_EQ(ordered_json::parse(d->body)["content"], tok_->decode(ids, false));
  auto bad = post(c, "/detokenize", {{"tokens", {1, 99999999}}});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(ordered_json::parse(bad->body)["error"]["param"], "tokens");
  const Reference& r = refs(1).front();
  auto a = post(c, "/apply-template", {{"messages", r.messages}, {"chat_template_kwargs", {{"enable_thinking", r.enable_thinking}}}});
  ASSERT_TRUE(a);
  ASSERT_EQ(a->status, 200) << a->body;
  engine::ChatOptions o;
  o.enable_thinking = r.enable_thinking;
  EXPECT_EQ(ordered_json::parse(a->body)["prompt"], engine::ChatPromptBuilder(*tok_, *dir_).build(r.messages, o).text);
}

TEST_F(ServeTest, HealthModelsMetricsAndPage) {
  auto srv = start();
  auto c = srv->client();
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(ordered_json::parse(health->body)["status"], "ok");
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(ordered_json::parse(models->body)["object"], "list");
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->get_header_value("Content-Type").find("text/html"), std::string::npos);
  EXPECT_NE(page->body.find("/v1/chat/completions"), std::string::npos);
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  for (const char* name : {"ember_requests_submitted_total", "ember_prompt_tokens_total", "ember_completion_tokens_total",
                           "ember_queue_length", "ember_tokens_per_second", "ember_kv_cache_blocks_used",
                           "ember_kv_cache_blocks_total"})
    EXPECT_GE(metric(metrics->body, name), 0) << name;
}

// Prompt of a long generation: end tokens are banned so that it runs until max_tokens.
ordered_json endless(int max_tokens, bool stream) {
  return ordered_json{{"prompt", "Once upon a time"},
                      {"max_tokens", max_tokens},
                      {"stream", stream},
                      {"logit_bias", {{"2049", -100}, {"2", -100}}}};
}

TEST_F(ServeTest, ClientDisconnectMidStreamCancelsAndFreesBlocks) {
  auto srv = start();
  {
    RawSocket s(srv->port());
    ASSERT_TRUE(s.ok());
    const std::string body = endless(900, true).dump();
    ASSERT_TRUE(s.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
    std::string got;
    while (got.find("data: ") == std::string::npos) {
      const std::string part = s.recv_some();
      ASSERT_FALSE(part.empty());
      got += part;
    }
  }  // closed mid-stream
  auto c = srv->client();
  const std::string m = metrics_when_idle(c);
  EXPECT_EQ(metric(m, "ember_running_sequences"), 0) << m;
  EXPECT_EQ(metric(m, "ember_kv_cache_blocks_running"), 0) << m;
  EXPECT_EQ(metric(m, "ember_kv_cache_blocks_used"), 0) << "a cancelled sequence's blocks are freed\n" << m;
  EXPECT_EQ(metric(m, "ember_requests_cancelled_total"), 1) << m;
  EXPECT_LT(metric(m, "ember_completion_tokens_total"), 900);
  auto ok = post(c, "/v1/chat/completions", chat_body(refs(1).front(), false));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

// A stream that waits (here: queued behind a running request) sends SSE comments meanwhile.
TEST_F(ServeTest, WaitingStreamSendsKeepAlives) {
  server::ServerOptions o;
  o.keep_alive_s = 0.05;
  auto srv = start({.max_parallel = 1}, o);
  auto busy = srv->client();
  std::thread first([&] { post(busy, "/v1/completions", endless(900, true)); });
  auto c = srv->client();
  // Queued behind it only once it runs (its 900 tokens take far longer than the poll).
  for (int i = 0; i < 1000 && metric(c.Get("/metrics")->body, "ember_running_sequences") < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto waited = post(c, "/v1/completions", endless(4, true));
  first.join();
  ASSERT_TRUE(waited);
  EXPECT_NE(waited->body.find(": keep-alive\n\n"), std::string::npos) << waited->body.substr(0, 300);
  EXPECT_TRUE(parse_sse(waited->body).done);
}

// A request cut by the request timeout gets no finish_reason outside OpenAI's set ("cancelled" once):
// non-streaming, a 503 error naming the cause; streaming, an error event (OpenAI's clients raise on
// it), then [DONE].
TEST_F(ServeTest, RequestTimeoutIsAnErrorNotAFinishReason) {
  server::ServerOptions o;
  o.request_timeout_s = 0.001;  // far below what 900 tokens take, on any machine
  auto srv = start({}, o);
  auto c = srv->client();
  auto whole = post(c, "/v1/completions", endless(900, false));
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->status, 503) << whole->body;
  const ordered_json err = ordered_json::parse(whole->body);
  EXPECT_EQ(err["error"]["code"], "request_timeout") << whole->body;
  auto streamed = post(c, "/v1/completions", endless(900, true));
  ASSERT_TRUE(streamed);
  EXPECT_EQ(streamed->body.find("cancelled"), std::string::npos) << streamed->body;
  const SseEvents ev = parse_sse(streamed->body);
  EXPECT_TRUE(ev.done);
  ASSERT_FALSE(ev.chunks.empty());
  EXPECT_EQ(ev.chunks.back()["error"]["code"], "request_timeout") << streamed->body;
}

// A non-streaming request writes nothing until it is done, so the server must notice the closed
// socket itself: the client leaves while its long generation runs.
TEST_F(ServeTest, ClientDisconnectDuringNonStreamingRequestCancelsAndFreesBlocks) {
  auto srv = start();
  auto c = srv->client();
  const int max_tokens = 900;
  {
    RawSocket s(srv->port());
    ASSERT_TRUE(s.ok());
    const std::string body = endless(max_tokens, false).dump();
    ASSERT_TRUE(s.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
    // Leave once the generation is under way.
    for (int i = 0; i < 1000 && metric(c.Get("/metrics")->body, "ember_completion_tokens_total") <= 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const std::string m = metrics_when_idle(c);
  EXPECT_EQ(metric(m, "ember_running_sequences"), 0) << m;
  EXPECT_EQ(metric(m, "ember_kv_cache_blocks_running"), 0) << m;
  EXPECT_EQ(metric(m, "ember_kv_cache_blocks_used"), 0) << "a cancelled sequence's blocks are freed\n" << m;
  EXPECT_EQ(metric(m, "ember_requests_cancelled_total"), 1) << m;
  EXPECT_EQ(metric(m, "ember_requests_finished_total"), 0) << m;
  EXPECT_LT(metric(m, "ember_completion_tokens_total"), max_tokens) << m;
  auto ok = post(c, "/v1/chat/completions", chat_body(refs(1).front(), false));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ordered_json::parse(ok->body)["choices"][0]["message"]["content"], refs(1).front().content);
}

TEST_F(ServeTest, BurstOverQueueLimitGets429ThenRecovers) {
  auto srv = start({.max_parallel = 2, .max_queue = 4});
  const int burst = 100;
  std::atomic<int> ok{0}, busy{0}, other{0}, retry_after{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < burst; ++i)
    threads.emplace_back([&] {
      auto c = srv->client();
      auto res = post(c, "/v1/completions", endless(16, false));
      if (res && res->status == 200) ++ok;
      else if (res && res->status == 429) {
        ++busy;
        if (!res->get_header_value("Retry-After").empty()) ++retry_after;
      } else {
        ++other;
        ADD_FAILURE() << (res ? std::to_string(res->status) + " " + res->body : httplib::to_string(res.error()));
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_GT(busy.load(), 0);
  EXPECT_EQ(retry_after.load(), busy.load());
  EXPECT_GE(ok.load(), 2);
  auto c = srv->client();
  const std::string m = metrics_when_idle(c);
  EXPECT_EQ(metric(m, "ember_requests_rejected_total"), busy.load());
  EXPECT_EQ(metric(m, "ember_running_sequences"), 0);
  EXPECT_EQ(metric(m, "ember_queue_length"), 0);
  auto after = post(c, "/v1/chat/completions", chat_body(refs(1).front(), false));
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
  EXPECT_EQ(ordered_json::parse(after->body)["choices"][0]["message"]["content"], refs(1).front().content);
}

// A stop() that comes before run() or as it starts (a SIGTERM while `ember serve` comes up) ends the
// server: cpp-httplib drops a stop that precedes its listener, which once left the server listening
// for good. Both orders, several times (the second is a race).
TEST_F(ServeTest, StopBeforeOrAsRunStartsEndsIt) {
  for (int i = 0; i < 6; ++i) {
    server::ServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    server::Server srv(*model_, *tok_, {.max_parallel = 1}, o);
    srv.bind();
    const bool stop_first = i % 2 == 0;
    if (stop_first) srv.stop();
    std::future<void> ran = std::async(std::launch::async, [&] { srv.run(); });
    if (!stop_first) srv.stop();
    if (ran.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      ADD_FAILURE() << "run() still serving 30 s after stop() (" << (stop_first ? "stop first" : "stop as run starts") << ")";
      std::fflush(nullptr);
      std::_Exit(1);  // the listener thread cannot be joined
    }
  }
}

// Issue 41 items 1, 2: a second server on a port in use fails naming the address (it shared the port
// under httplib's SO_REUSEPORT), and a port past 65535 is refused (httplib listened on it mod 65536).
TEST_F(ServeTest, PortInUseOrOutOfRangeIsAnError) {
  auto first = start();
  auto bind_error = [&](int port) {
    server::ServerOptions o;
    o.host = "127.0.0.1";
    o.port = port;
    server::Server second(*model_, *tok_, {.max_parallel = 1}, o);
    try {
      second.bind();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("bound");
  };
  const std::string in_use = bind_error(first->port());
  EXPECT_NE(in_use.find("127.0.0.1:" + std::to_string(first->port())), std::string::npos) << in_use;
  EXPECT_NE(in_use.find("address already in use"), std::string::npos) << in_use;
  const std::string too_big = bind_error(99999);
  EXPECT_NE(too_big.find("127.0.0.1:99999"), std::string::npos) << too_big;
  EXPECT_NE(too_big.find("between 0 (any free port) and 65535"), std::string::npos) << too_big;
  auto c = first->client();  // the first one still answers
  auto res = c.Get("/health");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

// Issue 41 item 6: a max_tokens the context cannot hold beside the prompt is a 400, as vLLM answers
// (it was accepted and ran until the context or --timeout ended it).
TEST_F(ServeTest, MaxTokensPastTheContextIsRefused) {
  auto srv = start();
  auto c = srv->client();
  const int64_t context = srv->server().scheduler().context();
  const ordered_json msgs = ordered_json::array({{{"role", "user"}, {"content", "Hi"}}});
  for (const char* field : {"max_tokens", "max_completion_tokens"}) {
    auto res = post(c, "/v1/chat/completions", {{"messages", msgs}, {field, context}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << res->body;
    const auto e = ordered_json::parse(res->body)["error"];
    EXPECT_EQ(e["code"], "context_length_exceeded") << e.dump();
    EXPECT_EQ(e["param"], field) << e.dump();
    EXPECT_NE(e["message"].get<std::string>().find("context holds " + std::to_string(context) + " tokens"),
              std::string::npos) << e.dump();
  }
  auto text = post(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", context}});
  ASSERT_TRUE(text);
  EXPECT_EQ(text->status, 400) << text->body;
  auto fits = post(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 4}});
  ASSERT_TRUE(fits);
  EXPECT_EQ(fits->status, 200) << fits->body;
}

// Issue 41 item 7: every request field is read, refused by name, or (platform bookkeeping) accepted;
// an unknown one, a message key or role no template knows, is a 400 naming it, not a 200 that
// ignored it. /v1/completions implements echo and refuses suffix and best_of > n.
TEST_F(ServeTest, UnknownFieldsAreRefusedByName) {
  auto srv = start();
  auto c = srv->client();
  auto refused = [&](const std::string& path, const ordered_json& body, const std::string& param,
                     const std::string& code) {
    auto res = post(c, path, body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << body.dump() << ": " << res->body;
    const ordered_json e = ordered_json::parse(res->body)["error"];
    EXPECT_EQ(e["param"], param) << res->body;
    EXPECT_EQ(e["code"], code) << res->body;
    EXPECT_NE(e["message"].get<std::string>().find(param), std::string::npos) << res->body;
  };
  const ordered_json hi = ordered_json::array({{{"role", "user"}, {"content", "Hi"}}});
  refused("/v1/chat/completions", {{"messages", hi}, {"frobnicate", 1}}, "frobnicate", "unknown_parameter");
  refused("/v1/chat/completions", {{"messages", hi}, {"verbosity", "low"}}, "verbosity", "unsupported_parameter");
  refused("/v1/chat/completions", {{"messages", hi}, {"store", true}}, "store", "unsupported_parameter");
  refused("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}, {"mood", 1}}}}},
          "messages[0].mood", "invalid_value");
  refused("/v1/chat/completions", {{"messages", {{{"role", "wizard"}, {"content", "Hi"}}}}}, "messages[0].role",
          "invalid_value");
  refused("/v1/completions", {{"prompt", "Hi"}, {"messages", hi}}, "messages", "unknown_parameter");
  refused("/v1/completions", {{"prompt", "Hi"}, {"suffix", " the end"}}, "suffix", "unsupported_parameter");
  refused("/v1/completions", {{"prompt", "Hi"}, {"best_of", 3}}, "best_of", "unsupported_parameter");
  refused("/v1/completions", {{"prompt", "Hi"}, {"best_of", 1}, {"n", 2}}, "best_of", "invalid_value");
  refused("/v1/completions", {{"prompt", "Hi"}, {"echo", true}, {"logprobs", 2}}, "echo", "unsupported_parameter");

  // What clients send: platform bookkeeping, nulls, the values Ember's behaviour already is.
  ordered_json fine{{"messages", hi},      {"max_tokens", 4},           {"metadata", {{"k", "v"}}},
                    {"store", false},      {"service_tier", "auto"},    {"prompt_cache_key", "u1"},
                    {"safety_identifier", "u1"}, {"user", "u1"},        {"frequency_penalty", nullptr},
                    {"modalities", {"text"}}};
  auto ok = post(c, "/v1/chat/completions", fine);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;

  // echo: the prompt, then the completion (streamed: the prompt first).
  const ordered_json text{{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"best_of", 1}};
  auto plain = post(c, "/v1/completions", text);
  ordered_json with_echo = text;
  with_echo["echo"] = true;
  auto echoed = post(c, "/v1/completions", with_echo);
  ASSERT_TRUE(plain && echoed);
  ASSERT_EQ(echoed->status, 200) << echoed->body;
  const std::string completion = ordered_json::parse(plain->body)["choices"][0]["text"];
  EXPECT_EQ(ordered_json::parse(echoed->body)["choices"][0]["text"], "Once upon a time" + completion);
  with_echo["stream"] = true;
  auto streamed = post(c, "/v1/completions", with_echo);
  ASSERT_TRUE(streamed);
  std::string joined;
  for (const auto& chunk : parse_sse(streamed->body).chunks)
    for (const auto& ch : chunk["choices"]) joined += ch["text"].get<std::string>();
  EXPECT_EQ(joined, "Once upon a time" + completion);
}

// Issue 41 item 11: the page's icon is served (browsers asked for /favicon.ico and got a 404).
TEST_F(ServeTest, FaviconIsServed) {
  auto srv = start();
  auto c = srv->client();
  for (const char* path : {"/favicon.ico", "/favicon.svg"}) {
    auto res = c.Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 200) << path;
    EXPECT_EQ(res->get_header_value("Content-Type"), "image/svg+xml") << path;
    EXPECT_NE(res->body.find("<svg"), std::string::npos) << path;
  }
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_NE(page->body.find("rel=\"icon\" href=\"/favicon.svg\""), std::string::npos);
}

// Issue 41 item 10: a range's bounds read as written ("between 0 and 2", not "0.000000 and 2.000000").
TEST_F(ServeTest, RangesAreWrittenAsNumbers) {
  auto srv = start();
  auto c = srv->client();
  const ordered_json hi = ordered_json::array({{{"role", "user"}, {"content", "Hi"}}});
  auto res = post(c, "/v1/chat/completions", {{"messages", hi}, {"temperature", 3}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("'temperature' must be between 0 and 2"), std::string::npos) << res->body;
  auto rp = post(c, "/v1/chat/completions", {{"messages", hi}, {"repetition_penalty", 0}});
  ASSERT_TRUE(rp);
  EXPECT_NE(rp->body.find("between 0.01 and 100"), std::string::npos) << rp->body;
}

}  // namespace
}  // namespace ember::test
