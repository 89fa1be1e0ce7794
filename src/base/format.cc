#include "base/format.h"

#include <cmath>
#include <cstdio>
#include <iterator>

namespace ember {

std::string format_number(double x) {
  char buf[32];
  if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 1e15) std::snprintf(buf, sizeof buf, "%.0f", x);
  else std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

std::string one_of(std::span<const char* const> names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

std::string format_bytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  size_t unit = 0;
  while (std::fabs(bytes) >= 1024 && unit + 1 < std::size(kUnits)) {
    bytes /= 1024;
    ++unit;
  }
  char buf[32];
  const double a = std::fabs(bytes);
  const int decimals = unit == 0 || a == std::floor(a) || a >= 100 ? 0 : a >= 10 ? 1 : 2;
  std::snprintf(buf, sizeof buf, "%.*f %s", decimals, bytes, kUnits[unit]);
  return buf;
}

}  // namespace ember
