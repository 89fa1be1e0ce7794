// The continuous-batching scheduler on the hybrid models (Gated DeltaNet layers with a recurrent
// state per sequence): prompts split over steps and batched with others give the greedy paths of
// the goldens and of a Session alone, and a prompt that departs from a cached one mid-way restarts
// from the cached state's deepest snapshot.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../model/config_testing.h"
#include "engine/scheduler.h"
#include "engine/session.h"

namespace ember::engine {
namespace {

using nlohmann::json;

std::vector<int32_t> drain_tokens(RequestStream& s, StreamUpdate* last = nullptr) {
  std::vector<int32_t> out;
  StreamUpdate u;
  while (s.next(u, std::chrono::milliseconds(60000))) {
    for (const auto& t : u.tokens) out.push_back(t.id);
    EXPECT_TRUE(u.error.empty()) << u.error;
    if (u.finished) {
      if (last != nullptr) *last = u;
      break;
    }
  }
  return out;
}

sampling::SamplingParams greedy(int64_t n) {
  sampling::SamplingParams p;
  p.temperature = 0;
  p.max_new_tokens = n;  // the goldens' paths do not stop at the end token
  return p;
}

GenerationRequest request(std::vector<int32_t> prompt, int64_t n) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.params = greedy(n);
  return r;
}

TEST(HybridScheduler, BatchedChunkedPromptsFollowTheGoldensAndSessions) {
  for (const std::string& path : test::golden_jsons("golden/hybrid")) {
    const json g = json::parse(read_file(path));
    SCOPED_TRACE(g["model"].get<std::string>());
    const std::string dir = test::model_dir(g["model"].get<std::string>());
    auto model = model::Model::load(dir, {.threads = 2, .progress = {}});
    const auto tok = tokenizer::Tokenizer::from_folder(dir);
    Scheduler sched(*model, tok, {.max_parallel = 3, .context = 256, .prefill_chunk = 5});
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& cs : g["cases"]) {
      streams.push_back(sched.submit(
          request(cs["prompt_ids"].get<std::vector<int32_t>>(), static_cast<int64_t>(cs["greedy_ids"].size()))));
    }
    for (size_t i = 0; i < streams.size(); ++i) {
      const auto& cs = g["cases"][i];
      const std::vector<int32_t> got = drain_tokens(*streams[i]);
      EXPECT_EQ(got, cs["greedy_ids"].get<std::vector<int32_t>>()) << cs["name"];
      Session alone(*model, tok, 256);
      EXPECT_EQ(got, alone.generate(cs["prompt_ids"].get<std::vector<int32_t>>(),
                                    greedy(static_cast<int64_t>(cs["greedy_ids"].size()))).tokens) << cs["name"];
    }
  }
}

TEST(HybridScheduler, DepartingPromptRestartsFromTheDeepestSnapshot) {
  const std::string dir = test::model_dir("tiny-qwen3next-bf16");
  auto model = model::Model::load(dir, {.threads = 2, .progress = {}});
  const auto tok = tokenizer::Tokenizer::from_folder(dir);
  const int64_t block = 8;
  Scheduler sched(*model, tok, {.max_parallel = 2, .context = 256, .block_size = block});
  std::vector<int32_t> first;
  for (int i = 0; i < 40; ++i) first.push_back(3 + (i * 29) % 2000);
  const std::vector<int32_t> reply = drain_tokens(*sched.submit(request(first, 20)));
  ASSERT_EQ(reply.size(), 20u);
  std::vector<int32_t> second = first;  // the reply re-rendered without its last 5 tokens, and a new turn
  second.insert(second.end(), reply.begin(), reply.end() - 5);
  const int64_t shared = static_cast<int64_t>(second.size());
  for (int i = 0; i < 12; ++i) second.push_back(5 + i);
  StreamUpdate last;
  const std::vector<int32_t> got = drain_tokens(*sched.submit(request(second, 10)), &last);
  EXPECT_EQ(last.cached_tokens, shared / block * block);
  Session alone(*model, tok, 256);
  EXPECT_EQ(got, alone.generate(second, greedy(10)).tokens);
}

}  // namespace
}  // namespace ember::engine
