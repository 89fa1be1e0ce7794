#pragma once
// The message of the ember::Error a call throws, or "(no error)": what tests of named errors check.
#include <functional>
#include <string>

#include "base/error.h"

namespace ember::test {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace ember::test
