#pragma once
// The --jsonl loop shared by the batch commands: one JSON object per input line, one per output
// line; a bad line produces one {"error": ...} line and the rest go on. And JSON files the CLI reads.
#include <cstdint>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/mapped_file.h"

namespace ember::app {

inline std::string dump_line(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// nlohmann's message without its exception id ("[json.exception.parse_error.101] "): what went wrong
// and where, for a person.
inline std::string json_error_text(const nlohmann::json::exception& e) {
  std::string what = e.what();
  if (const size_t id_end = what.find("] "); what.rfind("[json.exception.", 0) == 0 && id_end != std::string::npos)
    what.erase(0, id_end + 2);
  if (e.id == 101) return "invalid JSON: " + what;  // a parse error: "parse error at line 1, column 3: ..."
  if (e.id == 403) return "missing " + what.substr(0, what.size() - std::string(" not found").size());  // "key 'text'"
  return what;
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
    } catch (const nlohmann::json::exception& e) {  // a malformed line, a missing field, a wrong type
      result = nlohmann::ordered_json{{"error", "line " + std::to_string(line_no) + ": " + json_error_text(e)}};
      status = 1;
    } catch (const std::exception& e) {
      result = nlohmann::ordered_json{{"error", "line " + std::to_string(line_no) + ": " + e.what()}};
      status = 1;
    }
    out << dump_line(result) << '\n' << std::flush;
  }
  return status;
}

// The token ids of an input line's "ids": a non-empty array of integers from 0 to INT32_MAX (the
// model checks them against its vocabulary). Empty only where `allow_empty` (detokenize: no text).
inline std::vector<int32_t> line_ids(const nlohmann::ordered_json& ids, bool allow_empty = false) {
  if (!ids.is_array() || (ids.empty() && !allow_empty))
    throw Error(allow_empty ? "\"ids\" must be an array of token ids" : "\"ids\" must be a non-empty array of token ids");
  std::vector<int32_t> out;
  for (const auto& id : ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      throw Error("\"ids\" holds " + id.dump() + ", not a token id");
    out.push_back(id.get<int32_t>());
  }
  return out;
}

// A JSON file given on the command line (--messages, /load). Malformed JSON is an input error like
// the others: it names the file and the line and column, without nlohmann's exception id.
inline nlohmann::ordered_json read_json_file(const std::string& path) {
  const std::string text = read_file(path);
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error (with the position), or out_of_range (1e400)
    const std::string what = json_error_text(e);
    fail(path, what.starts_with("invalid JSON: ") ? what : "invalid JSON: " + what);
  }
}

}  // namespace ember::app
