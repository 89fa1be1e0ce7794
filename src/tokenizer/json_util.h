#pragma once
// Small accessors for tokenizer.json fields that report the component and field at fault.
#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"

namespace ember::tokenizer {

// Plain (sorted) objects: ordered_json looks keys up linearly, far too slow for 150k-entry vocabs.
using json = nlohmann::json;

// The "type" of a component object; `where` names the section ("normalizer", "decoder", ...).
inline std::string component_type(const json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    fail("tokenizer.json", where + ": expected an object with a \"type\" string");
  return j["type"].get<std::string>();
}

// Field `key` of `j` as T, or `fallback` when absent or null.
template <typename T>
T field_or(const json& j, const char* key, T fallback, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  try {
    return j[key].get<T>();
  } catch (const nlohmann::json::exception& e) {
    fail("tokenizer.json", where + "." + key + ": " + e.what());
  }
}

template <typename T>
T field(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) fail("tokenizer.json", where + ": missing field \"" + key + "\"");
  return field_or<T>(j, key, T{}, where);
}

// Sequences inside sequences deeper than this are refused: real tokenizers nest two or three, and a
// crafted file nested thousands deep would exhaust the stack (and `where` grows with every level).
constexpr std::ptrdiff_t kMaxSequenceDepth = 32;

// The components listed in array field `key` of a Sequence, made by make(item, where); nulls skipped.
template <typename T, typename Make>
std::vector<std::unique_ptr<const T>> make_sequence(const json& j, const char* key, const std::string& where,
                                                    Make make) {
  if (std::count(where.begin(), where.end(), '[') >= kMaxSequenceDepth)  // one '[' per enclosing Sequence
    fail("tokenizer.json", where + ": Sequences nested more than " + std::to_string(kMaxSequenceDepth) + " deep");
  const json& list = field<json>(j, key, where);
  if (!list.is_array()) fail("tokenizer.json", where + "." + key + ": expected an array");
  std::vector<std::unique_ptr<const T>> parts;
  for (size_t i = 0; i < list.size(); ++i)
    if (auto p = make(list[i], where + "." + key + "[" + std::to_string(i) + "]")) parts.push_back(std::move(p));
  return parts;
}

[[noreturn]] inline void unsupported(const std::string& where, const std::string& type) {
  fail("tokenizer.json", where + " type \"" + type + "\" is not supported by Ember");
}

}  // namespace ember::tokenizer
