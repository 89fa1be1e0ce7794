#include "kernels/width_tuner.h"

#include <algorithm>
#include <bit>

namespace ember::kernels {

double WidthTuner::Times::median() const {
  const int n = std::min(count, kSamples);
  std::array<double, kSamples> v = s;
  std::nth_element(v.begin(), v.begin() + n / 2, v.begin() + n);
  return v[static_cast<size_t>(n / 2)];
}

WidthTuner::Kind& WidthTuner::kind(int k) {
  if (static_cast<size_t>(k) >= kinds_.size()) kinds_.resize(static_cast<size_t>(k) + 1);
  return kinds_[static_cast<size_t>(k)];
}

int WidthTuner::kind_of_tokens(int64_t tokens) {
  return tokens <= 1 ? 0 : std::bit_width(static_cast<uint64_t>(tokens - 1));
}

int WidthTuner::choose(int k) {
  if (threads_ <= 1) return 1;
  Kind& c = kind(k);
  const int64_t step = c.steps++;
  // Explore: alternate until each width has a few samples (full width first: the usual winner).
  constexpr int kNeed = 3;
  if (c.full.count < kNeed || c.solo.count < kNeed) return c.full.count <= c.solo.count ? threads_ : 1;
  const bool solo = c.solo.median() < c.full.median();
  if (solo != c.solo_chosen || c.next_probe == 0) {  // a new choice: watch it closely
    c.solo_chosen = solo;
    c.probe_every = kProbeEvery;
    c.next_probe = step + c.probe_every;
  }
  if (step >= c.next_probe) {
    c.probe_every = std::min<int64_t>(2 * c.probe_every, kMaxProbeEvery);
    c.next_probe = step + c.probe_every;
    return solo ? threads_ : 1;
  }
  return solo ? 1 : threads_;
}

void WidthTuner::record(int k, int width, double seconds) {
  if (threads_ <= 1) return;
  Kind& c = kind(k);
  const bool probe = c.next_probe > 0 && (width == 1) != c.solo_chosen;
  Times& t = width == 1 ? c.solo : c.full;
  t.s[static_cast<size_t>(t.count % kSamples)] = seconds;
  ++t.count;
  // A probe clearly faster than the chosen width: confirm it soon rather than after a long wait.
  if (probe && seconds < 0.8 * (c.solo_chosen ? c.solo : c.full).median()) {
    c.probe_every = kProbeEvery;
    c.next_probe = c.steps + kProbeEvery / 4;
  }
}

}  // namespace ember::kernels
