// Render time of the largest shared chat template (by source size) on its longest fixture case.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "jinja/template.h"

namespace {

const std::string kShared = EMBER_SHARED_DIR;

std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Workload {
  std::string name, source;
  nlohmann::ordered_json context;
};

Workload largest_template() {
  Workload w;
  std::uintmax_t best = 0;
  for (const auto& e : std::filesystem::directory_iterator(kShared + "/chat_templates"))
    if (e.path().extension() == ".jinja" && e.file_size() > best) best = e.file_size(), w.name = e.path().stem().string();
  w.source = read_text(kShared + "/chat_templates/" + w.name + ".jinja");
  std::ifstream cases(kShared + "/testdata/chat_template/" + w.name + ".jsonl");
  size_t longest = 0;
  for (std::string line; std::getline(cases, line);) {
    const auto c = nlohmann::ordered_json::parse(line);
    if (!c.contains("expected") || c["expected"].get<std::string>().size() <= longest) continue;
    longest = c["expected"].get<std::string>().size();
    w.context = c["variables"];
    w.context["messages"] = c["messages"];
    w.context["tools"] = c["tools"];
    w.context["documents"] = c["documents"];
    w.context["add_generation_prompt"] = c["add_generation_prompt"];
  }
  return w;
}

void BM_RenderLargestTemplate(benchmark::State& state) {
  const Workload w = largest_template();
  const auto tmpl = ember::jinja::Template::parse(w.source);
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string out = tmpl.render(w.context);
    bytes += out.size();
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(w.name);
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_RenderLargestTemplate)->Unit(benchmark::kMicrosecond);

void BM_ParseLargestTemplate(benchmark::State& state) {
  const Workload w = largest_template();
  for (auto _ : state) benchmark::DoNotOptimize(ember::jinja::Template::parse(w.source));
  state.SetLabel(w.name);
}
BENCHMARK(BM_ParseLargestTemplate)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
