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
  const int need = 3;
  if (c.full.count < need || c.solo.count < need) return c.full.count <= c.solo.count ? threads_ : 1;
  const bool solo_better = c.solo.median() < c.full.median();
  const bool probe = step % kProbeEvery == 0;
  return solo_better != probe ? 1 : threads_;
}

void WidthTuner::record(int k, int width, double seconds) {
  if (threads_ <= 1) return;
  Times& t = width == 1 ? kind(k).solo : kind(k).full;
  t.s[static_cast<size_t>(t.count % kSamples)] = seconds;
  ++t.count;
}

}  // namespace ember::kernels
