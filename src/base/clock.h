#pragma once
// Wall-clock seconds for the timings that results report (prefill, decode, load).
#include <chrono>

namespace ember {
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace ember
