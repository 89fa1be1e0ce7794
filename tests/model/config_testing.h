#pragma once
// What the config tests share: the golden files of a folder, a shared model's config.json, and the
// error parse_config gives for a config.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/mapped_file.h"
#include "model/config.h"
#include "test_paths.h"

namespace ember::test {

// The paths of testdata/<folder>/*.json, sorted (every file, so that new ones are picked up).
inline std::vector<std::string> golden_jsons(const std::string& folder) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(testdata(folder)))
    if (e.path().extension() == ".json") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

inline nlohmann::json model_config(const std::string& model) {
  return nlohmann::json::parse(read_file(model_dir(model) + "/config.json"));
}

inline std::string config_error(const nlohmann::json& j) {
  try {
    model::parse_config(j.dump(), "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace ember::test

#define EXPECT_MENTIONS(message, part) EXPECT_NE((message).find(part), std::string::npos) << (message)
