#include "kernels/stall_window.h"

#include <algorithm>

namespace ember::kernels {

bool StallWindow::note(Clock::duration own, uint32_t own_chunks, uint32_t n_chunks, Clock::duration took,
                       Clock::time_point now) {
  // The caller alone would have run every chunk at its own pace (an estimate that favours all
  // threads where they share memory bandwidth: there the WidthTuner measures both widths).
  took_ += took;
  alone_ += own_chunks > 0 ? own * n_chunks / own_chunks : took;
  if (took_ < kWindow) return false;
  const bool slower = took_ > alone_;
  took_ = alone_ = Clock::duration{};
  if (!slower) return false;
  // A slow window soon after the last solo period ended means the neighbour is still there.
  const bool recurring = backoff_.count() > 0 && now - last_stall_ < 4 * backoff_;
  backoff_ = recurring ? std::min(2 * backoff_, kMaxBackoff) : kMinBackoff;
  last_stall_ = now;
  solo_until_ = now + backoff_;
  return true;
}

}  // namespace ember::kernels
