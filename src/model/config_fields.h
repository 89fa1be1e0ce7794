#pragma once
// Readers of config.json's fields that name the file and the field in every error: `path` empty,
// a top-level field ("field \"hidden_size\" must be an integer"); else the object's path
// ("rope_scaling.beta_fast must be a number").
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace ember::model {

struct ConfigFields {
  const nlohmann::json& j;
  const std::string& where;
  std::string path;

  std::string name(const char* key) const {
    return path.empty() ? std::string("field \"") + key + "\"" : path + "." + key;
  }
  [[noreturn]] void bad(const char* key, const std::string& what) const { fail(where, name(key) + " " + what); }
  // The field's value; null counts as absent.
  const nlohmann::json* find(const char* key) const {
    auto it = j.find(key);
    return (it == j.end() || it->is_null()) ? nullptr : &*it;
  }

  int64_t as_int(const nlohmann::json& v, const char* key) const {
    if (!v.is_number_integer()) bad(key, "must be an integer");
    const int64_t x = v.get<int64_t>();
    if (x < 0) bad(key, "must not be negative");
    return x;
  }
  int64_t integer(const char* key) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) fail(where, std::string("missing required field \"") + key + "\"");
    return as_int(*v, key);
  }
  int64_t integer_or(const char* key, int64_t dflt) const {
    const nlohmann::json* v = find(key);
    return v == nullptr ? dflt : as_int(*v, key);
  }
  std::optional<double> number(const char* key) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) bad(key, "must be a number");
    return v->get<double>();
  }
  double number_or(const char* key, double dflt) const { return number(key).value_or(dflt); }
  std::optional<double> positive(const char* key) const {
    const std::optional<double> v = number(key);
    if (v && !(*v > 0.0)) bad(key, "must be a positive number");
    return v;
  }
  std::optional<int64_t> positive_integer(const char* key) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number_integer() || v->get<int64_t>() <= 0) bad(key, "must be a positive integer");
    return v->get<int64_t>();
  }
  bool boolean_or(const char* key, bool dflt) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return dflt;
    if (!v->is_boolean()) bad(key, "must be true or false");
    return v->get<bool>();
  }
  // `n` positive numbers, `what` saying what they are for the error.
  std::vector<double> positives(const char* key, int64_t n, const std::string& what) const {
    const std::string want = "must be an array of " + std::to_string(n) + " positive numbers (" + what + ")";
    const nlohmann::json* v = find(key);
    if (v == nullptr || !v->is_array() || static_cast<int64_t>(v->size()) != n) bad(key, want);
    std::vector<double> out;
    for (const nlohmann::json& e : *v) {
      if (!e.is_number() || !(e.get<double>() > 0.0)) bad(key, want);
      out.push_back(e.get<double>());
    }
    return out;
  }
};

}  // namespace ember::model
