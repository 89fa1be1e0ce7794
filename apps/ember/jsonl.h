#pragma once
// The --jsonl loop shared by the batch commands: one JSON object per input line, one per output
// line; a bad line produces one {"error": ...} line and the rest go on.
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

namespace ember::app {

inline std::string dump_line(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// Calls handle(input) for every non-empty line of `in`; prints its result or an error object.
// Returns 0 if every line succeeded, 1 otherwise.
inline int run_jsonl(std::istream& in, std::ostream& out,
                     const std::function<nlohmann::ordered_json(const nlohmann::ordered_json&)>& handle) {
  std::string line;
  int status = 0;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::ordered_json result;
    try {
      result = handle(nlohmann::ordered_json::parse(line));
    } catch (const std::exception& e) {
      result = nlohmann::ordered_json{{"error", "line " + std::to_string(line_no) + ": " + e.what()}};
      status = 1;
    }
    out << dump_line(result) << '\n' << std::flush;
  }
  return status;
}

}  // namespace ember::app
