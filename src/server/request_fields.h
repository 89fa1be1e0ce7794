#pragma once
// Small readers every API's request parser shares.
#include <algorithm>
#include <cstddef>
#include <iterator>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ember::server {

// Whether `body` has the field with a value other than null (null means absent in every API here).
inline bool present(const nlohmann::ordered_json& body, const char* name) {
  const auto it = body.find(name);
  return it != body.end() && !it->is_null();
}

template <size_t N>
bool listed(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

}  // namespace ember::server
