#pragma once
// ember::Error (the public include/ember/error.h) and the helper that builds its messages.
#include <string>

#include "ember/error.h"

namespace ember {

// Throws ember::Error with `what` prefixed by `where` ("config.json: ...").
[[noreturn]] inline void fail(const std::string& where, const std::string& what) {
  throw Error(where.empty() ? what : where + ": " + what);
}

}  // namespace ember
