#include "tokenizer/pattern.h"

namespace ember::tokenizer {

Pattern Pattern::from_json(const json& j, const std::string& where) {
  Pattern p;
  if (j.is_object() && j.contains("String") && j["String"].is_string()) {
    p.literal_ = j["String"].get<std::string>();
  } else if (j.is_object() && j.contains("Regex") && j["Regex"].is_string()) {
    p.regex_.emplace(j["Regex"].get<std::string>(), "tokenizer.json: " + where);
  } else {
    fail("tokenizer.json", where + ".pattern: expected {\"String\": ...} or {\"Regex\": ...}");
  }
  return p;
}

Pattern Pattern::literal(std::string s) {
  Pattern p;
  p.literal_ = std::move(s);
  return p;
}

std::vector<ByteRange> Pattern::find_all(std::string_view s) const {
  return regex_ ? regex_->find_all(s) : find_all_literal(s, literal_);
}

std::string Pattern::replace_all(std::string_view s, std::string_view content) const {
  const auto matches = find_all(s);
  if (matches.empty()) return std::string(s);
  std::string out;
  size_t prev = 0;
  for (const auto& [b, e] : matches) {
    out.append(s.substr(prev, b - prev));
    out.append(content);
    prev = e;
  }
  out.append(s.substr(prev));
  return out;
}

}  // namespace ember::tokenizer
