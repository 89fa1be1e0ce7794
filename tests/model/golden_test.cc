// Every model in ../shared/models with a golden file in ../shared/testdata/golden (and its families/ and rope/):
// last-position logits within the stated tolerance, greedy continuations exact, and the KV cache consistent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/model.h"
#include "run_command.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace ember::model {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Golden files by their path under golden/ without ".json": the first families' at the top, the
// newer families' in families/, the RoPE scaling types' in rope/, gpt-oss's in gpt-oss/, Gemma 4's in
// gemma4/, the Gated DeltaNet hybrids' in hybrid/ (every file of these folders, so that new ones are picked up).
std::vector<std::string> golden_files() {
  std::vector<std::string> out;
  for (const char* sub : {"", "families/", "rope/", "gpt-oss/", "gemma4/", "hybrid/"})
    for (const auto& e : fs::directory_iterator(test::testdata("golden/" + std::string(sub))))
      if (e.path().extension() == ".json") out.push_back(sub + e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

struct Tolerance {
  double abs, rel;
  double bound(const std::vector<float>& g) const {
    double m = 0;
    for (float v : g) m = std::max(m, std::fabs(static_cast<double>(v)));
    return abs + rel * m;
  }
};

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());  // first max = lowest id
}

// Largest difference between two logits vectors.
double max_diff(const float* a, const float* b, int64_t n) {
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
  return worst;
}

// The reference's own cache checks (kv_cache_selfcheck's checks, a hybrid's split_prefill, where a
// golden has them): a prompt prefilled in the given chunks through the cache gives after each chunk
// the logits of a prefill of that prefix at once, after the last the golden's, and then (the
// state carried on) the golden's greedy path.
void expect_reference_chunks(Model& m, const json& g, const json& checks) {
  const Tolerance tol{g["tolerance"]["logits_abs"].get<double>(), g["tolerance"]["logits_rel_to_max"].get<double>()};
  const int64_t V = m.config().vocab_size;
  for (const auto& check : checks) {
    const std::string name = check["prompt"].get<std::string>();
    SCOPED_TRACE("kv_cache_selfcheck " + name);
    const json* cs = nullptr;
    for (const auto& c : g["cases"])
      if (c["name"] == name) cs = &c;
    ASSERT_NE(cs, nullptr);
    const auto ids = (*cs)["prompt_ids"].get<std::vector<int32_t>>();
    auto cache = m.make_cache(4 * static_cast<int64_t>(ids.size()));
    KvSequence seq(*cache);
    std::vector<float> logits;
    size_t done = 0;
    for (const auto& chunk : check["chunks"]) {
      const size_t k = chunk.get<size_t>();
      ASSERT_LE(done + k, ids.size());
      logits = m.forward(seq, std::span<const int32_t>(ids.data() + done, k));
      done += k;
      KvSequence whole(*cache);
      const std::vector<float> ref = m.forward(whole, std::span<const int32_t>(ids.data(), done));
      EXPECT_LE(max_diff(logits.data(), ref.data(), V), 2e-3) << "after " << done << " tokens";
    }
    ASSERT_EQ(done, ids.size());
    const auto expected = (*cs)["last_logits"].get<std::vector<float>>();
    EXPECT_LE(max_diff(logits.data(), expected.data(), V), tol.bound(expected));
    const auto greedy = (*cs)["greedy_ids"].get<std::vector<int32_t>>();
    for (size_t k = 0; k < greedy.size(); ++k) {
      if (k > 0) logits = m.forward(seq, std::span<const int32_t>(&greedy[k - 1], 1));
      ASSERT_EQ(argmax(logits), greedy[k]) << "greedy step " << k;
    }
  }
}

class Golden : public ::testing::TestWithParam<std::string> {
 protected:
  json golden() { return read_json(test::testdata("golden/" + GetParam() + ".json")); }
};

TEST_P(Golden, LogitsAndGreedyIdsMatch) {
  const json g = golden();
  const Tolerance tol{g["tolerance"]["logits_abs"].get<double>(), g["tolerance"]["logits_rel_to_max"].get<double>()};
  auto m = Model::load(test::model_dir(g["model"].get<std::string>()), {.threads = 2, .progress = {}});
  ASSERT_FALSE(g["cases"].empty());
  for (const auto& cs : g["cases"]) {
    SCOPED_TRACE(cs["name"].get<std::string>());
    const auto prompt = cs["prompt_ids"].get<std::vector<int32_t>>();
    const auto expected = cs["last_logits"].get<std::vector<float>>();
    auto cache = m->make_cache(static_cast<int64_t>(prompt.size()) + 128);
    KvSequence seq(*cache);
    std::vector<float> logits = m->forward(seq, prompt);
    ASSERT_EQ(logits.size(), expected.size());
    const double bound = tol.bound(expected);
    EXPECT_LE(max_diff(logits.data(), expected.data(), static_cast<int64_t>(logits.size())), bound) << "last_logits differ";
    EXPECT_EQ(argmax(logits), cs["last_logits_argmax"].get<int32_t>());

    // Greedy decoding on the KV cache, checking each step's top-5 logits.
    const auto greedy = cs["greedy_ids"].get<std::vector<int32_t>>();
    const auto& steps = cs["steps"];
    for (size_t k = 0; k < greedy.size(); ++k) {
      SCOPED_TRACE("step " + std::to_string(k));
      if (k > 0) logits = m->forward(seq, std::span<const int32_t>(&greedy[k - 1], 1));
      const auto ids = steps[k]["top5_ids"].get<std::vector<int32_t>>();
      const auto vals = steps[k]["top5_logits"].get<std::vector<float>>();
      const double b = tol.bound(vals);
      for (size_t j = 0; j < ids.size(); ++j) EXPECT_LE(std::fabs(double(logits[ids[j]]) - vals[j]), b);
      ASSERT_EQ(argmax(logits), greedy[k]);
    }
  }
}

// Prefill of a prefix followed by decode (or a second chunk) gives the logits of a full prefill of
// each prefix: for most models the rows of one prefill of everything; with LongRoPE, whose factors
// follow the whole pass's length, a prefill of that prefix alone. And the golden's own chunks.
TEST_P(Golden, SplitPrefillMatchesFullPrefill) {
  const json g = golden();
  auto m = Model::load(test::model_dir(g["model"].get<std::string>()), {.threads = 2, .progress = {}});
  const json* longest = nullptr;
  for (const auto& cs : g["cases"])
    if (longest == nullptr || cs["prompt_ids"].size() > (*longest)["prompt_ids"].size()) longest = &cs;
  std::vector<int32_t> ids = (*longest)["prompt_ids"].get<std::vector<int32_t>>();
  const auto greedy = (*longest)["greedy_ids"].get<std::vector<int32_t>>();
  ids.insert(ids.end(), greedy.begin(), greedy.end());
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t V = m->config().vocab_size;

  auto cache = m->make_cache(4 * n);
  std::vector<float> all(static_cast<size_t>(n * V));
  if (m->config().rope.scaling == RopeScaling::LongRope) {
    for (int64_t p = 1; p <= n; ++p) {
      KvSequence prefix(*cache);
      const std::vector<float> last = m->forward(prefix, std::span<const int32_t>(ids.data(), static_cast<size_t>(p)));
      std::copy(last.begin(), last.end(), all.begin() + (p - 1) * V);
    }
  } else {
    KvSequence full(*cache);
    ForwardItem item{&full, ids, all.data(), true};
    m->forward(std::span<ForwardItem>(&item, 1));
  }

  for (int64_t split : {int64_t{1}, n / 3, n / 2, n - 1}) {
    SCOPED_TRACE("split " + std::to_string(split));
    KvSequence seq(*cache);
    std::vector<float> logits = m->forward(seq, std::span<const int32_t>(ids.data(), split));
    for (int64_t p = split; p <= n; ++p) {
      ASSERT_LE(max_diff(logits.data(), all.data() + (p - 1) * V, V), 2e-3) << "position " << p - 1;
      if (p < n) logits = m->forward(seq, std::span<const int32_t>(&ids[p], 1));
    }
  }
  if (g.contains("kv_cache_selfcheck")) expect_reference_chunks(*m, g, g["kv_cache_selfcheck"]["checks"]);
  if (g.contains("split_prefill")) expect_reference_chunks(*m, g, json::array({g["split_prefill"]}));
}

// A sequence's logits have the same bits whether it runs alone or in one forward pass with others
// (what the server's batched decode steps rely on to answer as a one-shot run does): every case's
// prompt, prefilled alone, then one decode step of all of them together.
TEST_P(Golden, BatchedDecodeStepEqualsDecodingAlone) {
  const json g = golden();
  auto m = Model::load(test::model_dir(g["model"].get<std::string>()), {.threads = 2, .progress = {}});
  const int64_t V = m->config().vocab_size;
  std::vector<std::vector<int32_t>> prompts, next;
  for (const auto& cs : g["cases"]) {
    const auto greedy = cs["greedy_ids"].get<std::vector<int32_t>>();
    if (greedy.empty()) continue;
    prompts.push_back(cs["prompt_ids"].get<std::vector<int32_t>>());
    next.push_back({greedy[0]});
  }
  ASSERT_GE(prompts.size(), 2u) << "needs several cases";
  int64_t total = 0;
  for (const auto& p : prompts) total += static_cast<int64_t>(p.size()) + 1;
  auto cache = m->make_cache(2 * total + 64 * static_cast<int64_t>(prompts.size()));
  std::vector<KvSequence> together, alone;
  std::vector<std::vector<float>> batched(prompts.size(), std::vector<float>(static_cast<size_t>(V)));
  std::vector<ForwardItem> items;
  for (size_t i = 0; i < prompts.size(); ++i) {
    together.emplace_back(*cache);
    alone.emplace_back(*cache);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    m->forward(together[i], prompts[i]);
    m->forward(alone[i], prompts[i]);
    items.push_back({&together[i], next[i], batched[i].data(), false});
  }
  m->forward(items);
  for (size_t i = 0; i < prompts.size(); ++i)
    ASSERT_EQ(m->forward(alone[i], next[i]), batched[i]) << "case " << i << " of " << prompts.size();
}

// The same through the command line: `ember logits --jsonl` on every case's ids, and `ember generate`
// (greedy) on every case whose text the tokenizer turns into its ids.
TEST_P(Golden, CommandLineLogitsAndGenerate) {
  const json g = golden();
  const Tolerance tol{g["tolerance"]["logits_abs"].get<double>(), g["tolerance"]["logits_rel_to_max"].get<double>()};
  const std::string dir = test::model_dir(g["model"].get<std::string>());
  const std::string input =
      (fs::temp_directory_path() / ("golden_" + fs::path(GetParam()).filename().string() + ".jsonl")).string();
  {
    std::ofstream in(input);
    for (const auto& cs : g["cases"]) in << json{{"ids", cs["prompt_ids"]}}.dump() << '\n';
  }
  const test::Output o = test::run_command("'" + test::ember_binary() + "' logits -m '" + dir + "' --jsonl < '" + input + "'");
  ASSERT_EQ(o.status, 0) << o.out;
  std::istringstream lines(o.out);
  std::string line;
  for (const auto& cs : g["cases"]) {
    SCOPED_TRACE(cs["name"].get<std::string>());
    ASSERT_TRUE(std::getline(lines, line));
    const auto logits = json::parse(line).at("logits").get<std::vector<float>>();
    const auto expected = cs["last_logits"].get<std::vector<float>>();
    ASSERT_EQ(logits.size(), expected.size());
    EXPECT_LE(max_diff(logits.data(), expected.data(), static_cast<int64_t>(logits.size())), tol.bound(expected));
  }

  const auto tok = tokenizer::Tokenizer::from_folder(dir);
  size_t generated = 0;
  for (const auto& cs : g["cases"]) {
    if (!cs.contains("prompt_text")) continue;
    const std::string text = cs["prompt_text"].get<std::string>();
    const auto ids = cs["prompt_ids"].get<std::vector<int32_t>>();
    if (tok.encode(text, true) != ids) continue;  // ids made by hand, not by the tokenizer
    SCOPED_TRACE(cs["name"].get<std::string>());
    std::vector<int32_t> greedy = cs["greedy_ids"].get<std::vector<int32_t>>();
    const auto eos = std::find(greedy.begin(), greedy.end(), g["eos_token_id"].get<int32_t>());
    greedy.erase(eos, greedy.end());
    std::string reply = tok.decode(greedy, false);
    // A model that writes its end token out as text before emitting it ends there, unshown.
    const std::string end_text = tok.decode(std::vector<int32_t>{g["eos_token_id"].get<int32_t>()}, false);
    reply = reply.substr(0, reply.find(end_text));
    const std::string expected = text + reply + "\n";
    const test::Output gen = test::run_command("'" + test::ember_binary() + "' generate -q -m '" + dir + "' -p '" + text +
                                               "' -n " + std::to_string(greedy.size()) + " --temperature 0 --repeat-penalty 1 --kv-dtype f32");
    ASSERT_EQ(gen.status, 0) << gen.out;
    EXPECT_EQ(gen.out, expected);
    ++generated;
  }
  EXPECT_GT(generated, 0u) << "no case's text encodes to its ids";
}

INSTANTIATE_TEST_SUITE_P(SharedModels, Golden, ::testing::ValuesIn(golden_files()),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace_if(s.begin(), s.end(), [](char ch) { return !std::isalnum(ch); }, '_');
                           return s;
                         });

}  // namespace
}  // namespace ember::model
