#pragma once
// Range checks for numeric flags. CLI11's Range prints its bounds with std::to_string
// ("0.000000 to 2.000000"); this one shows them as written, in --help and in the error.
#include <CLI/CLI.hpp>

#include <string>
#include <type_traits>

#include "base/format.h"

namespace ember::app {

// Whether a range holds its lower bound: top_p is in (0, 1], the rest in [lo, hi].
enum class LowerBound { kIncluded, kExcluded };

// Values in [lo, hi] (or (lo, hi]); --help shows "in [lo, hi]", an error "must be between lo and hi
// (got X)", or says that X is not a number. NaN is in no range.
template <class T>
CLI::Validator in_range(T lo, T hi, LowerBound lower = LowerBound::kIncluded) {
  const bool open = lower == LowerBound::kExcluded;
  const std::string lo_text = format_number(static_cast<double>(lo)), hi_text = format_number(static_cast<double>(hi));
  const std::string range = open ? "above " + lo_text + " and at most " + hi_text : "between " + lo_text + " and " + hi_text;
  return CLI::Validator(
      [lo, hi, open, range](std::string& input) {
        T value{};
        if (!CLI::detail::lexical_cast(input, value))
          return input + (std::is_integral_v<T> ? " is not an integer" : " is not a number");
        if (!(open ? value > lo : value >= lo) || !(value <= hi)) return "must be " + range + " (got " + input + ")";
        return std::string();
      },
      (open ? "in (" : "in [") + lo_text + ", " + hi_text + "]");
}

}  // namespace ember::app
