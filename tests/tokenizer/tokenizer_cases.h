#pragma once
// The shared tokenizer fixtures: every ../shared/testdata/tokenizer/<name>.jsonl with its
// ../shared/tokenizers/<name>/ folder.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
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

inline std::string tokenizer_dir(const std::string& name) { return shared_dir() + "/tokenizers/" + name; }
inline std::string tokenizer_jsonl(const std::string& name) { return testdata("tokenizer/" + name + ".jsonl"); }

inline std::vector<nlohmann::ordered_json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::ordered_json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::ordered_json::parse(line));
  return out;
}

}  // namespace ember::test
