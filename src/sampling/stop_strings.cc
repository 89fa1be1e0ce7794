#include "sampling/stop_strings.h"

#include <algorithm>

#include "base/error.h"
#include "base/utf8.h"

namespace ember::sampling {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (size_t i = 0; i < stops_.size(); ++i) {
    if (stops_[i].empty()) fail("stop strings", "stop string " + std::to_string(i) + " is empty");
    if (!utf8::is_valid(stops_[i]))
      fail("stop strings", "stop string " + std::to_string(i) + " is not valid UTF-8");
  }
}

StopStringMatcher::Result StopStringMatcher::feed(std::string_view delta) {
  Result r;
  if (stopped_) return r;
  const size_t old_size = buffer_.size();
  buffer_.append(delta);

  // The held text holds no whole stop string, so a match must end inside the new delta.
  size_t best = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const std::string& s = stops_[i];
    const size_t from = old_size >= s.size() - 1 ? old_size - (s.size() - 1) : 0;
    const size_t pos = buffer_.find(s, from);
    if (pos < best) {
      best = pos;
      matched_ = static_cast<int>(i);
    }
  }
  if (best != std::string::npos) {
    r.text = buffer_.substr(0, best);
    r.stopped = stopped_ = true;
    buffer_.clear();
    return r;
  }

  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  const std::string_view buf(buffer_);
  for (const std::string& s : stops_) {
    for (size_t len = std::min(s.size() - 1, buf.size()); len > hold; --len) {
      if (buf.substr(buf.size() - len) == std::string_view(s).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  const size_t emit = utf8::complete_prefix(buf.substr(0, buf.size() - hold));
  r.text = buffer_.substr(0, emit);
  buffer_.erase(0, emit);
  return r;
}

std::string StopStringMatcher::flush() {
  std::string out = utf8::sanitize(buffer_);
  buffer_.clear();
  return out;
}

}  // namespace ember::sampling
