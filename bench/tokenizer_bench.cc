// Encode throughput (MB/s) of the shared tokenizers on a long mixed-language text: every test string
// of ../shared/testdata/tokenizer/*.jsonl (English, CJK, emoji, code, RTL, ...) joined and repeated
// to about 1 MB.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {

const std::string kShared = EMBER_SHARED_DIR;

std::vector<std::string> tokenizer_names() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(kShared + "/testdata/tokenizer"))
    if (e.path().extension() == ".jsonl") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string mixed_text(const std::string& name) {
  std::ifstream in(kShared + "/testdata/tokenizer/" + name + ".jsonl");
  std::string base;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["add_special_tokens"].get<bool>()) base += j["text"].get<std::string>() + "\n";
  }
  std::string text;
  while (text.size() < (1u << 20)) text += base;
  return text;
}

void encode(benchmark::State& state, const std::string& name) {
  const auto tok = ember::tokenizer::Tokenizer::from_folder(kShared + "/tokenizers/" + name);
  const std::string text = mixed_text(name);
  size_t tokens = 0;
  for (auto _ : state) {
    const auto ids = tok.encode(text, false);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}

}  // namespace

int main(int argc, char** argv) {
  for (const auto& name : tokenizer_names())
    benchmark::RegisterBenchmark(("encode/" + name).c_str(), encode, name)->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
