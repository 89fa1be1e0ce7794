#pragma once
// The shared tokenizer fixtures: every ../shared/testdata/tokenizer/<name>.jsonl with its
// ../shared/tokenizers/<name>/ folder.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_paths.h"

namespace ember::test {

// Names of the tokenizers that have a jsonl file, sorted.
inline std::vector<std::string> tokenizer_case_names() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(testdata("tokenizer")))
    if (e.path().extension() == ".jsonl") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

inline std::string tokenizer_dir(const std::string& name) { return shared_path("tokenizers", name); }
inline std::string tokenizer_jsonl(const std::string& name) { return testdata("tokenizer/" + name + ".jsonl"); }

inline std::vector<nlohmann::ordered_json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::ordered_json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::ordered_json::parse(line));
  return out;
}

// A GoogleTest parameter name for a tokenizer name ("llama-3.2" -> "llama_3_2").
struct TokenizerParamName {
  template <typename Info>
  std::string operator()(const Info& info) const {
    std::string n = info.param;
    for (char& c : n)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return n;
  }
};

}  // namespace ember::test
