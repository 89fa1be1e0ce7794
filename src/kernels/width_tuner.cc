#include "kernels/width_tuner.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <utility>

namespace ember::kernels {

void WidthTuner::Times::add(double seconds) {
  s[static_cast<size_t>(count % kSamples)] = seconds;
  ++count;
}

double WidthTuner::Times::usual() const {
  const int n = std::min(count, kSamples), keep = n - n / 4;
  std::array<double, kSamples> v = s;
  // Insertion sort: n is at most kSamples (std::sort trips GCC's array-bounds warning here).
  for (int i = 1; i < n; ++i)
    for (int j = i; j > 0 && v[static_cast<size_t>(j)] < v[static_cast<size_t>(j - 1)]; --j)
      std::swap(v[static_cast<size_t>(j)], v[static_cast<size_t>(j - 1)]);
  double sum = 0;
  for (int i = 0; i < keep; ++i) sum += v[static_cast<size_t>(i)];
  return keep > 0 ? sum / keep : std::numeric_limits<double>::infinity();
}

double WidthTuner::Times::best() const {
  double b = std::numeric_limits<double>::infinity();
  for (int i = 0; i < std::min(count, kSamples); ++i) b = std::min(b, s[static_cast<size_t>(i)]);
  return b;
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
  if (k > kind_of_tokens(kMaxTunedTokens)) return threads_;
  Kind& c = kind(k);
  const int64_t step = c.steps++;
  // Explore: alternate until each width has a few samples (full width first: the usual winner).
  constexpr int kNeed = 3;
  if (c.next_probe == 0) {
    if (c.full.count < kNeed || c.solo.count < kNeed) return c.full.count <= c.solo.count ? threads_ : 1;
    c.solo_chosen = c.solo.usual() < c.full.usual();
    c.probe_every = kProbeEvery;
    c.next_probe = step + c.probe_every;
  } else {
    Times& chosen = c.solo_chosen ? c.solo : c.full;
    Times& other = c.solo_chosen ? c.full : c.solo;
    if (other.best() < kMargin * chosen.usual()) {
      // Switch. The new choice starts from its best probe; the old one's times belong to the
      // conditions that made it lose, so its probes start afresh, the first one soon (a burst of
      // delays, not a change, may have caused the switch).
      const double start = other.best();
      other = Times{};
      other.add(start);
      chosen = Times{};
      c.solo_chosen = !c.solo_chosen;
      c.probe_every = kProbeEvery / 2;
      c.next_probe = step + kProbeEvery / 4;
    }
  }
  const bool solo = c.solo_chosen;
  if (step >= c.next_probe) {
    c.probe_every = std::min<int64_t>(2 * c.probe_every, kMaxProbeEvery);
    c.next_probe = step + c.probe_every;
    return solo ? threads_ : 1;
  }
  return solo ? 1 : threads_;
}

void WidthTuner::record(int k, int width, double seconds) {
  if (threads_ <= 1 || k > kind_of_tokens(kMaxTunedTokens)) return;
  Kind& c = kind(k);
  (width == 1 ? c.solo : c.full).add(seconds);
}

TunedStep::TunedStep(WidthTuner& tuner, ThreadPool& pool, int64_t tokens)
    : tuner_(tuner), kind_(WidthTuner::kind_of_tokens(tokens)), width_(tuner.choose(kind_)),
      started_(std::chrono::steady_clock::now()) {
  pool.set_caller_only(width_ == 1);
}

TunedStep::~TunedStep() {
  tuner_.record(kind_, width_, std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
}

}  // namespace ember::kernels
