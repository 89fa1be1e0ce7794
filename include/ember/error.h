#pragma once
// Ember's one exception type: every user-facing failure (a malformed model file, a bad option, a
// prompt longer than the context) carries a message that names the file, field or position at fault.
#include <stdexcept>

namespace ember {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ember
