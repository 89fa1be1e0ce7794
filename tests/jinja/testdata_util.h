#pragma once
// Reading the shared chat-template fixtures: ../shared/testdata/chat_template/*.jsonl, each case
// naming a template in ../shared/chat_templates/.
#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_paths.h"

namespace ember::test {

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Every *.jsonl file of testdata/chat_template, sorted by name.
inline std::vector<std::string> chat_template_case_files() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(testdata("chat_template")))
    if (e.path().extension() == ".jsonl") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

inline std::vector<nlohmann::ordered_json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::ordered_json> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) out.push_back(nlohmann::ordered_json::parse(line));
  return out;
}

inline std::string chat_template_path(const std::string& name) {
  // Appended piece by piece: GCC 12 warns falsely (-Warray-bounds) on the inlined a + b + c chain.
  std::string path = shared_dir();
  path.append("/chat_templates/").append(name).append(".jinja");
  return path;
}

// The fixed clock of the fixtures: 26 July 2024, 12:00:00 local time.
inline std::time_t fixture_clock() {
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 12;
  tm.tm_isdst = -1;
  return std::mktime(&tm);
}

}  // namespace ember::test
