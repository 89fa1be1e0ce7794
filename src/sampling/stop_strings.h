#pragma once
// Stop strings over a stream of text deltas. A stop string may span several deltas (tokens), so the
// matcher holds back any tail that could be the start of one, and any incomplete UTF-8 character;
// everything else is safe to print at once. The stop string itself is never emitted.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ember::sampling {

class StopStringMatcher {
 public:
  // Throws ember::Error for an empty stop string or one that is not valid UTF-8.
  explicit StopStringMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string was found: `text` is what preceded it; stop generating
  };

  // Feeds the next delta. After a stop, further calls return nothing.
  Result feed(std::string_view delta);

  // End of generation without a stop string: the text still held back (an incomplete UTF-8
  // character at the very end becomes U+FFFD).
  std::string flush();

  bool stopped() const { return stopped_; }
  // Index in the constructor's list of the stop string that matched; -1 before any stop.
  int matched() const { return matched_; }
  // Bytes currently held back.
  size_t held() const { return buffer_.size(); }

 private:
  std::vector<std::string> stops_;
  std::string buffer_;  // text not yet emitted
  bool stopped_ = false;
  int matched_ = -1;
};

}  // namespace ember::sampling
