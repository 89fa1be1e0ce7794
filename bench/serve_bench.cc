// Load test of `ember serve` on loopback: C concurrent streaming chat clients (end tokens banned so
// every reply has the same length), on chat-skills and on random-weight copies of Minueza-32M-UltraChat
// and TinyLlama-1.1B-Chat. Reports aggregate generated tokens/s and the median
// and 90th-percentile time to first token, and the process's resident memory (now and at peak).
// BM_BatchedDecodeStep times the engine's part alone: one
// model.forward over B sequences decoding one token each. Run: serve_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <httplib.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/resident_memory.h"
#include "model_folder.h"
#include "sampling/generation_config.h"
#include "server/server.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::ordered_json;

constexpr int kTokens = 64;

// Requests that failed in any load benchmark: the exit status reports them (the load test in CTest
// runs this program and needs no timing, only that every request succeeds).
std::atomic<int64_t> g_failed_requests{0};

// A served model: chat-skills as shipped, or a random-weight copy of a real model's folder (its own
// config.json, tokenizer and chat template) written once per run under /tmp.
struct Fixture {
  std::string dir;
  std::unique_ptr<ember::model::Model> model;
  ember::tokenizer::Tokenizer tok;
  ordered_json no_eos;  // logit_bias that bans every end-of-sequence id: each reply runs kTokens
  std::unique_ptr<ember::model::Model> single_thread;  // for BM_BatchedDecodeStep's one-thread runs

  explicit Fixture(std::string d, ember::kernels::QType quantize = ember::kernels::QType::None)
      : dir(std::move(d)),
        model(ember::model::Model::load(dir, {.threads = 0, .progress = {}, .quantize = quantize})),
        tok(ember::tokenizer::Tokenizer::from_folder(dir)) {
    ember::sampling::SamplingParams p = ember::sampling::from_generation_config(dir);
    ember::sampling::merge_eos(p, model->config().eos_token_ids);
    for (const int32_t id : p.eos_token_ids) no_eos[std::to_string(id)] = -100;
  }
};

const std::string kShared = EMBER_SHARED_DIR;

// A random-weight copy of ../shared/tokenizers/<name>, which holds a real model's config.json,
// tokenizer and chat template. Written once per run: a second write would truncate a file that an
// earlier fixture's model still maps.
std::string random_copy(const std::string& name) {
  static std::set<std::string> written;
  const std::string dir = "/tmp/ember-serve-bench-" + name;
  if (written.insert(name).second) {
    std::fprintf(stderr, "writing a random-weight %s to %s ...\n", name.c_str(), dir.c_str());
    ember::bench::write_random_model_folder(kShared + "/tokenizers/" + name, dir);
  }
  return dir;
}

// --chat-model DIR (main): the folder BM_SpeculativeRepeatChats serves instead of chat-skills, e.g.
// chat-skills padded to a memory-bound size by bench/pad_model.py. Set once, before any benchmark.
std::string g_spec_chat_model;

Fixture& fixture(const std::string& name) {
  if (name == "chat-skills") {
    static Fixture fx(kShared + "/models/chat-skills");
    return fx;
  }
  if (name == "spec-chat") {
    if (g_spec_chat_model.empty()) return fixture("chat-skills");
    static Fixture fx(g_spec_chat_model);
    return fx;
  }
  // Minueza-32M-UltraChat: a real 32M-parameter chat model (Mistral architecture, F32 weights, 32k
  // vocabulary); its decode step streams 130 MB of weights, as larger models' steps do.
  if (name == "minueza-32m") {
    static Fixture fx(random_copy("minueza-32m-ultrachat"));
    return fx;
  }
  // TinyLlama-1.1B-Chat: BF16, 2.2 GB, the size people run on laptops; and quantized to 4 bits at
  // load, as most of them run it.
  if (name == "tinyllama-1.1b-q4_0") {
    static Fixture fx(random_copy("tinyllama-1.1b-chat"), ember::kernels::QType::Q4_0);
    return fx;
  }
  static Fixture fx(random_copy("tinyllama-1.1b-chat"));
  return fx;
}

struct ClientResult {
  double ttft = 0;
  int64_t tokens = 0;
  bool ok = false;
};

// Nearest-rank quantile.
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

ClientResult stream_chat(const Fixture& fx, int port, int i) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(300, 0);
  const ordered_json body{
      {"messages", {{{"role", "user"}, {"content", "Tell me a story about a cat number " + std::to_string(i) + "."}}}},
      {"max_tokens", kTokens},
      {"stream", true},
      {"stream_options", {{"include_usage", true}}},
      {"logit_bias", fx.no_eos}};
  ClientResult r;
  const auto t0 = Clock::now();
  std::string buffer;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    buffer.append(data, len);
    for (size_t at; (at = buffer.find("\n\n")) != std::string::npos; buffer.erase(0, at + 2)) {
      const std::string ev = buffer.substr(0, at);
      if (ev.rfind("data: {", 0) != 0) continue;
      const auto j = ordered_json::parse(ev.substr(6));
      if (j.contains("usage") && j["usage"].is_object()) r.tokens = j["usage"]["completion_tokens"].get<int64_t>();
      if (r.ttft == 0 && !j["choices"].empty()) {
        const auto& d = j["choices"][0]["delta"];
        if (d.contains("content") && !d["content"].get<std::string>().empty())
          r.ttft = std::chrono::duration<double>(Clock::now() - t0).count();
        if (d.contains("reasoning_content")) r.ttft = std::chrono::duration<double>(Clock::now() - t0).count();
      }
    }
    return true;
  };
  auto res = c.send(req);
  r.ok = res && res->status == 200 && r.tokens > 0;
  return r;
}

void BM_ConcurrentStreamingChats(benchmark::State& state, const char* model) {
  Fixture& fx = fixture(model);
  std::signal(SIGPIPE, SIG_IGN);
  const int clients = static_cast<int>(state.range(0));
  ember::engine::SchedulerOptions so;
  so.max_parallel = 16;
  ember::server::ServerOptions o;
  o.port = 0;
  ember::server::Server srv(*fx.model, fx.tok, so, o);
  const int port = srv.bind();
  std::thread runner([&] { srv.run(); });
  std::vector<double> ttfts;
  int64_t tokens = 0, errors = 0;
  for (auto _ : state) {
    std::vector<ClientResult> results(static_cast<size_t>(clients));
    const auto t0 = Clock::now();
    std::vector<std::thread> threads;
    for (int i = 0; i < clients; ++i)
      threads.emplace_back([&, i] {
        pthread_setname_np(pthread_self(), "bench-client");
        results[static_cast<size_t>(i)] = stream_chat(fx, port, i);
      });
    for (auto& t : threads) t.join();
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    for (const auto& r : results) {
      errors += r.ok ? 0 : 1;
      tokens += r.tokens;
      ttfts.push_back(r.ttft);
    }
  }
  srv.stop();
  runner.join();
  state.counters["tokens_per_s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.counters["ttft_p50_ms"] = 1000.0 * quantile(ttfts, 0.5);
  state.counters["ttft_p90_ms"] = 1000.0 * quantile(ttfts, 0.9);
  state.counters["errors"] = static_cast<double>(errors);
  state.counters["rss_mib"] = ember::resident_mib();  // the whole process: model, KV pool in use, server
  state.counters["peak_rss_mib"] = ember::peak_resident_mib();
  if (errors > 0) {
    g_failed_requests += errors;
    state.SkipWithError("some requests failed");
  }
}
BENCHMARK_CAPTURE(BM_ConcurrentStreamingChats, chat_skills, "chat-skills")
    ->Arg(1)->Arg(4)->Arg(16)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ConcurrentStreamingChats, minueza_32m, "minueza-32m")
    ->Arg(1)->Arg(4)->Arg(16)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ConcurrentStreamingChats, tinyllama_1_1b, "tinyllama-1.1b")
    ->Arg(1)->Arg(4)->Arg(16)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ConcurrentStreamingChats, tinyllama_1_1b_q4_0, "tinyllama-1.1b-q4_0")
    ->Arg(1)->Arg(4)->Arg(16)->UseManualTime()->Unit(benchmark::kMillisecond);

// Speculation in the batched server, task (a) of bench/spec_bench: C clients each ask chat-skills to
// repeat a phrase (the reply repeats the prompt), greedy, served without speculation (mode 0), with
// prompt lookup (1) or with chat-skills' own q4_0 copy as draft (2). Aggregate generated tokens/s.
// `--chat-model DIR` serves another folder with chat-skills' replies instead (see g_spec_chat_model).
ClientResult repeat_chat(int port, int i) {
  static const char* const kAsks[] = {"Repeat the phrase king milk 8 times.", "Say ladder guitar cloud 5 times.",
                                      "Repeat the phrase red apple tree 6 times.", "Say sun moon 9 times."};
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(300, 0);
  const ordered_json body{{"messages", {{{"role", "user"}, {"content", kAsks[i % 4]}}}},
                          {"max_tokens", 128},
                          {"temperature", 0},
                          {"chat_template_kwargs", {{"enable_thinking", false}}}};
  ClientResult r;
  const auto t0 = Clock::now();
  auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
  r.ttft = std::chrono::duration<double>(Clock::now() - t0).count();
  r.ok = res && res->status == 200;
  if (r.ok) r.tokens = ordered_json::parse(res->body)["usage"]["completion_tokens"].get<int64_t>();
  return r;
}

void BM_SpeculativeRepeatChats(benchmark::State& state) {
  Fixture& fx = fixture("spec-chat");
  const int clients = static_cast<int>(state.range(0)), mode = static_cast<int>(state.range(1));
  ember::engine::SchedulerOptions so;
  so.max_parallel = 16;
  if (mode > 0) {
    so.spec.mode = mode == 1 ? ember::engine::SpecMode::kNgram : ember::engine::SpecMode::kDraft;
    if (mode == 2) {
      static std::shared_ptr<ember::model::Model> draft =
          ember::model::Model::load(fx.dir, {.threads = 0, .progress = {}, .quantize = ember::kernels::QType::Q4_0});
      so.spec.draft_model = draft;
    }
  }
  ember::server::ServerOptions o;
  o.port = 0;
  ember::server::Server srv(*fx.model, fx.tok, so, o);
  const int port = srv.bind();
  std::thread runner([&] { srv.run(); });
  int64_t tokens = 0, errors = 0;
  for (auto _ : state) {
    std::vector<ClientResult> results(static_cast<size_t>(clients));
    const auto t0 = Clock::now();
    std::vector<std::thread> threads;
    for (int i = 0; i < clients; ++i) threads.emplace_back([&, i] { results[static_cast<size_t>(i)] = repeat_chat(port, i); });
    for (auto& t : threads) t.join();
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    for (const auto& r : results) {
      errors += r.ok ? 0 : 1;
      tokens += r.tokens;
    }
  }
  const ember::engine::SchedulerStats st = srv.scheduler().stats();
  srv.stop();
  runner.join();
  state.counters["tokens_per_s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.counters["acceptance"] =
      st.spec_drafted > 0 ? static_cast<double>(st.spec_accepted) / static_cast<double>(st.spec_drafted) : 0.0;
  if (errors > 0) {
    g_failed_requests += errors;
    state.SkipWithError("some requests failed");
  }
}
BENCHMARK(BM_SpeculativeRepeatChats)
    ->ArgNames({"clients", "spec"})
    ->ArgsProduct({{1, 4}, {0, 1, 2}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// One decode step of B sequences whose caches hold kContext positions: what the scheduler runs per
// step once every client is past its prompt.
// Args: batch, threads (0: all cores; 1 shows the work without thread hand-offs).
void BM_BatchedDecodeStep(benchmark::State& state, const char* name) {
  Fixture& fx = fixture(name);
  if (state.range(1) == 1 && !fx.single_thread)
    fx.single_thread = ember::model::Model::load(fx.dir, {.threads = 1, .progress = {}});
  ember::model::Model& model = state.range(1) == 1 ? *fx.single_thread : *fx.model;
  constexpr int64_t kContext = 64;
  const int64_t batch = state.range(0);
  constexpr int64_t kBlock = ember::model::KvCache::kDefaultBlock;
  ember::model::KvCache cache(model.config(), batch * (kContext / kBlock + 2), kBlock, model.kv_dtype());
  std::vector<ember::model::KvSequence> seqs;
  const std::vector<int32_t> prompt(kContext, 100);
  const size_t vocab = static_cast<size_t>(model.config().vocab_size);
  std::vector<float> logits(static_cast<size_t>(batch) * vocab);
  for (int64_t b = 0; b < batch; ++b) {
    seqs.emplace_back(cache);
    model.forward(seqs.back(), prompt);
  }
  const std::vector<int32_t> next{101};
  std::vector<ember::model::ForwardItem> items;
  for (int64_t b = 0; b < batch; ++b) items.push_back({&seqs[static_cast<size_t>(b)], next, logits.data() + b * vocab, false});
  for (auto _ : state) {
    model.forward(items);
    state.PauseTiming();
    for (auto& s : seqs) s.truncate(kContext);
    state.ResumeTiming();
  }
  state.counters["tokens_per_s"] = benchmark::Counter(static_cast<double>(state.iterations() * batch),
                                                      benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_BatchedDecodeStep, chat_skills, "chat-skills")
    ->ArgsProduct({{1, 4, 16}, {0, 1}})->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_BatchedDecodeStep, minueza_32m, "minueza-32m")
    ->ArgsProduct({{1, 4, 16}, {0, 1}})->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_BatchedDecodeStep, tinyllama_1_1b, "tinyllama-1.1b")
    ->ArgsProduct({{1, 16}, {0}})->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

// As BENCHMARK_MAIN, but each benchmark runs at least 2 s unless --benchmark_min_time says otherwise,
// and failed requests make the exit status 1.
int main(int argc, char** argv) {
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--chat-model" && i + 1 < argc) g_spec_chat_model = argv[++i];
    else args.push_back(argv[i]);
  }
  std::string min_time = "--benchmark_min_time=2";
  if (std::none_of(args.begin(), args.end(), [](const char* a) { return std::string_view(a).starts_with("--benchmark_min_time"); }))
    args.insert(args.begin() + 1, min_time.data());
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (g_failed_requests > 0) {
    std::fprintf(stderr, "serve_bench: %lld requests failed\n", static_cast<long long>(g_failed_requests.load()));
    return 1;
  }
  return 0;
}
