#pragma once
// Where the GGUF tests find the shared GGUF files and their expectation files.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "test_paths.h"

namespace ember::test {

inline std::string gguf_path(const std::string& name) { return model_dir("gguf/" + name); }

// ../shared/testdata/gguf/*.json, sorted.
inline std::vector<std::string> gguf_expectation_files() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(testdata("gguf")))
    if (e.path().extension() == ".json") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ember::test
