#pragma once
// One GGUF file against its entry in an expectation file of ../shared/testdata/gguf (README there):
// each case's last-position logits and the greedy continuation of the short prompt, measured here and
// judged by the caller (the README's tolerance rule is tolerance()).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/gguf_quants.h"
#include "model/gguf.h"
#include "model/model.h"
#include "test_paths.h"

namespace ember::test {

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// One file entry of an expectation file.
struct GgufCase {
  std::string expectation;  // path of the JSON
  std::string file;         // a key of its "files"
};

// gtest's name for a parameter (instead of its bytes).
inline void PrintTo(const GgufCase& f, std::ostream* os) { *os << f.file; }

// The keys of the top-level "files" object of an expectation file's text, in their order. The cases
// are listed when a test process starts (gtest registers every parameterised suite, whichever test
// it runs), and a full parse of the ~10 MB of logits took 7 s a process under the sanitizers; so this
// follows only strings and nesting and skips the values (each test parses its own file in full).
// Each key is decoded by nlohmann/json, escapes included. Throws where the text ends inside a string.
inline std::vector<std::string> files_keys(const std::string& text, const std::string& path) {
  std::vector<std::string> keys;
  int depth = 0;
  bool in_files = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == '"') {
      size_t end = i + 1;
      while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
      if (end >= text.size()) throw std::runtime_error(path + ": a string at byte " + std::to_string(i) + " does not end");
      size_t next = end + 1;
      while (next < text.size() && std::isspace(static_cast<unsigned char>(text[next]))) ++next;
      if (next < text.size() && text[next] == ':' && (depth == 1 || (depth == 2 && in_files))) {
        const std::string key = nlohmann::json::parse(text.substr(i, end + 1 - i)).get<std::string>();
        if (depth == 1) in_files = key == "files";
        else keys.push_back(key);
      }
      i = end;
    }
  }
  return keys;
}

// Every file entry of every JSON in ../shared/testdata/<folder>, in sorted order (every file, so that
// new ones are picked up).
inline std::vector<GgufCase> gguf_cases(const std::string& folder) {
  std::vector<std::string> jsons;
  for (const auto& e : std::filesystem::directory_iterator(testdata(folder)))
    if (e.path().extension() == ".json") jsons.push_back(e.path().string());
  std::sort(jsons.begin(), jsons.end());
  std::vector<GgufCase> out;
  for (const std::string& j : jsons) {
    std::ifstream in(j, std::ios::binary);
    std::string text(std::filesystem::file_size(j), '\0');  // in one read: by iterator, 0.4 s a process under ASan
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    for (const std::string& file : files_keys(text, j)) out.push_back({j, file});
  }
  return out;
}

// The test name of a case (INSTANTIATE_TEST_SUITE_P's): its file's name without .gguf, other
// characters than letters and digits as _.
inline std::string gguf_case_name(const ::testing::TestParamInfo<GgufCase>& info) {
  std::string s = info.param.file.substr(0, info.param.file.rfind(".gguf"));
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

// Whether a file's tensor_types are all plain floats (F32, F16, BF16).
inline bool is_float_file(const nlohmann::json& types) {
  for (const auto& t : types)
    if (t != "F32" && t != "F16" && t != "BF16") return false;
  return true;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])));
  return worst;
}

inline int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// The README's tolerance for one case: float files 1e-3 + 1e-4 max_abs_logit, quantized files the
// larger of that and 1.5 llama_cpp_max_abs_diff.
inline double tolerance(const nlohmann::json& file_entry, const nlohmann::json& c) {
  const double tol = 1e-3 + 1e-4 * c["max_abs_logit"].get<double>();
  if (is_float_file(file_entry["tensor_types"])) return tol;
  return std::max(tol, 1.5 * c["llama_cpp_max_abs_diff"].get<double>());
}

struct CaseResult {
  std::string prompt;
  size_t vocab = 0, expected_vocab = 0;
  double diff = 0, tolerance = 0;
};

// The rows of each block type in `file_entry`'s dequantized_rows (a value of the expectation's
// "files"), dequantized from `g`, equal gguf-py's float32 values bit for bit (the reference rounds
// to float32 after every operation, as dequantize_row does). Returns how many block types it checked.
inline size_t check_dequantized_rows(const model::GgufFile& g, const nlohmann::json& file_entry) {
  size_t checked = 0;
  if (!file_entry.contains("dequantized_rows")) return checked;
  for (const auto& [type_name, ref] : file_entry["dequantized_rows"].items()) {
    SCOPED_TRACE(type_name);
    const model::GgufTensor& t = g.tensor(ref["tensor"].get<std::string>());
    EXPECT_STREQ(kernels::ggml_type_name(t.type), type_name.c_str());
    const nlohmann::json& rows = ref["rows"];
    EXPECT_LE(static_cast<int64_t>(rows.size()), t.rows());
    std::vector<float> out(static_cast<size_t>(t.row_length()));
    for (size_t r = 0; r < rows.size() && static_cast<int64_t>(r) < t.rows(); ++r) {
      const auto expected = rows[r].get<std::vector<float>>();
      EXPECT_EQ(static_cast<int64_t>(expected.size()), t.row_length()) << "row " << r;
      if (static_cast<int64_t>(expected.size()) != t.row_length()) continue;
      kernels::dequantize_row(t.type, t.data + r * t.row_bytes(), t.row_length(), out.data());
      EXPECT_EQ(out, expected) << "row " << r;
    }
    ++checked;
  }
  return checked;
}

// How greedy_short_16 is checked.
enum class Greedy {
  kNone,
  kExact,  // decoded freely: the 16 argmax tokens themselves
  // Forced along the golden path (quantized files, whose activations Ember rounds as ggml does, so
  // that a free run leaves it at the first near tie): at each step the golden token's logit is
  // measured against Ember's top logit. Both are within a tolerance t of the exact ones, so an
  // engine right to t leaves a gap of at most 2t.
  kForced,
};

struct GoldenResult {
  std::vector<CaseResult> cases;
  std::vector<int32_t> greedy, expected_greedy;  // kExact
  double greedy_worst_gap = 0;                   // kForced: max over steps of top logit - golden's
  double greedy_bound = 0;                       // kForced: twice the short prompt's tolerance
  size_t greedy_agreeing = 0;                    // kForced: steps whose argmax is the golden token

  bool greedy_ok() const { return greedy == expected_greedy && greedy_worst_gap <= greedy_bound; }

  bool within_tolerance() const {
    for (const CaseResult& c : cases)
      if (c.vocab != c.expected_vocab || !(c.diff <= c.tolerance)) return false;
    return true;
  }
  double worst_ratio() const {
    double r = 0;
    for (const CaseResult& c : cases) r = std::max(r, c.diff / c.tolerance);
    return r;
  }
};

// Runs every case of `file_entry` (a value of the expectation's "files") on `m`, printing one line
// per case, then greedy_short_16 after prompts.short, one token at a time on the cache.
inline GoldenResult run_golden(model::Model& m, const nlohmann::json& expectation, const nlohmann::json& file_entry,
                               Greedy greedy) {
  GoldenResult r;
  for (const auto& cs : file_entry["cases"]) {
    const auto ids = cs["ids"].get<std::vector<int32_t>>();
    const auto expected = cs["logits"].get<std::vector<float>>();
    auto cache = m.make_cache(static_cast<int64_t>(ids.size()) + 16);
    model::KvSequence seq(*cache);
    const std::vector<float> logits = m.forward(seq, ids);
    CaseResult c{cs["prompt"].get<std::string>(), logits.size(), expected.size(), 0, tolerance(file_entry, cs)};
    if (c.vocab == c.expected_vocab) c.diff = max_abs_diff(logits, expected);
    std::printf("  %-5s max|d| %.3g, llama.cpp's %.3g, tolerance %.3g\n", c.prompt.c_str(), c.diff,
                cs["llama_cpp_max_abs_diff"].get<double>(), c.tolerance);
    r.cases.push_back(c);
  }
  if (greedy == Greedy::kNone) return r;
  for (const auto& cs : file_entry["cases"])  // the case the greedy path continues
    if (cs["prompt"] == "short") r.greedy_bound = 2 * tolerance(file_entry, cs);
  const auto prompt = expectation["prompts"]["short"].get<std::vector<int32_t>>();
  const auto golden = file_entry["greedy_short_16"].get<std::vector<int32_t>>();
  auto cache = m.make_cache(static_cast<int64_t>(prompt.size() + golden.size()) + 1);
  model::KvSequence seq(*cache);
  std::vector<float> logits = m.forward(seq, prompt);
  for (const int32_t want : golden) {
    const int32_t top = argmax(logits);
    int32_t next = top;
    if (greedy == Greedy::kExact) {
      r.greedy.push_back(top);
    } else {
      if (want < 0 || static_cast<size_t>(want) >= logits.size()) {
        r.greedy_worst_gap = INFINITY;
        break;
      }
      r.greedy_worst_gap = std::max(r.greedy_worst_gap, double(logits[static_cast<size_t>(top)]) - logits[static_cast<size_t>(want)]);
      r.greedy_agreeing += top == want;
      next = want;
    }
    logits = m.forward(seq, std::span<const int32_t>(&next, 1));
  }
  if (greedy == Greedy::kExact) r.expected_greedy = golden;
  if (greedy == Greedy::kForced)
    std::printf("  greedy_short_16 along the golden path: %zu/%zu argmax agree, worst gap %.3g (bound %.3g)\n",
                r.greedy_agreeing, golden.size(), r.greedy_worst_gap, r.greedy_bound);
  return r;
}

// Every case within its tolerance, and the greedy path as run_golden checked it.
inline void expect_golden(const GoldenResult& r) {
  for (const CaseResult& c : r.cases) {
    SCOPED_TRACE(c.prompt);
    ASSERT_EQ(c.vocab, c.expected_vocab);
    EXPECT_LE(c.diff, c.tolerance);
  }
  EXPECT_EQ(r.greedy, r.expected_greedy);         // Greedy::kExact
  EXPECT_LE(r.greedy_worst_gap, r.greedy_bound);  // Greedy::kForced
}

}  // namespace ember::test
