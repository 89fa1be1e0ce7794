#pragma once
// Reads ../shared/testdata/chat_skills and the model card's stated accuracy, and scores answers the
// way the model card says.
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "test_paths.h"

namespace ember::test {

inline std::vector<nlohmann::ordered_json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::ordered_json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::ordered_json::parse(line));
  return out;
}

// Text after the last </think>, without <|im_end|>, stripped: the model card's scoring rule.
inline std::string score_text(std::string text) {
  if (const size_t p = text.rfind("</think>"); p != std::string::npos) text = text.substr(p + 8);
  for (size_t p; (p = text.find("<|im_end|>")) != std::string::npos;) text.erase(p, 10);
  const auto b = text.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return text.substr(b, text.find_last_not_of(" \t\r\n") - b + 1);
}

// The public accuracy the model card states ("| TOTAL | 80/100 (80%) | ...").
inline double stated_public_accuracy() {
  const std::string card = read_file(model_dir("chat-skills") + "/MODEL_CARD.md");
  std::smatch m;
  if (!std::regex_search(card, m, std::regex(R"(\|\s*TOTAL\s*\|\s*(\d+)/(\d+))"))) return -1;
  return std::stod(m[1]) / std::stod(m[2]);
}

}  // namespace ember::test
