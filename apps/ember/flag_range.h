#pragma once
// Range checks for numeric flags. CLI11's Range prints its bounds with std::to_string
// ("0.000000 to 2.000000"); this one shows them as written, in --help and in the error.
#include <CLI/CLI.hpp>

#include <string>

#include "base/format.h"

namespace ember::app {

// Values in [lo, hi]; --help shows "in [lo, hi]", an error "must be between lo and hi (got X)".
template <class T>
CLI::Validator in_range(T lo, T hi) {
  const std::string bounds = format_number(static_cast<double>(lo)) + " and " + format_number(static_cast<double>(hi));
  return CLI::Validator(
      [lo, hi, bounds](std::string& input) {
        T value{};
        if (!CLI::detail::lexical_cast(input, value) || value < lo || value > hi)
          return "must be between " + bounds + " (got " + input + ")";
        return std::string();
      },
      "in [" + format_number(static_cast<double>(lo)) + ", " + format_number(static_cast<double>(hi)) + "]");
}

}  // namespace ember::app
