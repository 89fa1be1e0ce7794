#pragma once
// The thread pool's rule for when loops go to the calling thread alone, apart from the threads so
// that it can be tested with made-up times. Loops are judged in windows of at least kWindow of
// their time: whether all threads took longer than the caller alone would have (its own time per
// chunk for every chunk). A slow window starts a solo period; periods start short (a neighbour may
// leave) and double while slow windows recur soon after, up to kMaxBackoff, which keeps the cost of
// probing again (one slow window) small. Brief delays (a server's connection threads writing a
// token, a hypervisor's tick) cost less than the second thread gives and must not send loops to one
// thread: judging single waits of 1 ms ran half of a 2-thread prefill alone on a host with 5% steal.
#include <chrono>
#include <cstdint>

namespace ember::kernels {

class StallWindow {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr Clock::duration kWindow = std::chrono::milliseconds(20);
  static constexpr Clock::duration kMinBackoff = std::chrono::milliseconds(20);
  static constexpr Clock::duration kMaxBackoff = std::chrono::milliseconds(1000);

  // Whether a loop starting at `now` runs on the caller alone.
  bool solo(Clock::time_point now) const { return now < solo_until_; }
  // One loop on all threads, ending at `now`: the caller's own time and chunks (of n_chunks), and
  // the whole loop's time. Returns true when it closed a slow window (a solo period starts).
  bool note(Clock::duration own, uint32_t own_chunks, uint32_t n_chunks, Clock::duration took, Clock::time_point now);

 private:
  Clock::duration took_{}, alone_{};
  Clock::time_point solo_until_{}, last_stall_{};
  Clock::duration backoff_{};
};

}  // namespace ember::kernels
