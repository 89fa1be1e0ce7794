#pragma once
// Ember's one exception type: every user-facing failure carries a message that names
// the file, field or position at fault.
#include <stdexcept>
#include <string>

namespace ember {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws ember::Error with `what` prefixed by `where` ("config.json: ...").
[[noreturn]] inline void fail(const std::string& where, const std::string& what) {
  throw Error(where.empty() ? what : where + ": " + what);
}

}  // namespace ember
