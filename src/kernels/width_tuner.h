#pragma once
// Decides, per kind of step, whether a step's loops run on all of a pool's threads or on the calling
// thread alone, from the measured time of steps. A second thread does not always help: decode is
// bound by memory bandwidth that one core may already take, two vCPUs may be siblings of one
// physical core, and a neighbour process may hold the other core. Each kind (steps of similar size)
// first tries both widths, then keeps the faster one and tries the other again now and then, so a
// change (a neighbour that comes or goes) is noticed. Probes cost a slower step each, so they grow
// rarer while they confirm the choice.
//
// On a shared host some steps are delayed (more often on two threads: a step waits whenever either
// thread is held up). Delays only add time, so the chosen width is judged by its usual cost (the
// mean of its recent steps without the slowest quarter) and the other by its best recent probe, and
// the choice changes only for a clear gain: a few slow steps, or one lucky probe among slow ones,
// do not make it flap.
//
// Only steps of up to kMaxTunedTokens tokens (decode, small batches) are tuned. Larger ones
// (prefill, big batches) are compute-bound and every thread speeds them up unless a neighbour holds
// its core, which the pool notices loop by loop (ThreadPool's solo periods); probing one thread
// would cost a whole prompt at a fraction of the speed (a benchmark's second repetition ran at half
// speed).
#include <array>
#include <chrono>
#include <cstdint>
#include <vector>

#include "kernels/thread_pool.h"

namespace ember::kernels {

class WidthTuner {
 public:
  // Steps of one kind at one width: the last kSamples times.
  static constexpr int kSamples = 8;
  // The other width is chosen when its best probe takes less than this share of the chosen one's
  // usual time.
  static constexpr double kMargin = 0.85;
  // In steady state the other width is tried after kProbeEvery steps of a kind, then after twice
  // as many each time it is slower again, up to kMaxProbeEvery.
  static constexpr int kProbeEvery = 24;
  static constexpr int kMaxProbeEvery = 192;
  // Larger steps always run on every thread.
  static constexpr int64_t kMaxTunedTokens = 8;

  explicit WidthTuner(int threads) : threads_(threads) {}

  // How many threads the next step of `kind` (>= 0) should use: 1 or the pool's size.
  int choose(int kind);
  // Reports how long a step of `kind` took at `width`.
  void record(int kind, int width, double seconds);

  // The kind of a step that processes `tokens` tokens: steps within a factor of two share a kind.
  static int kind_of_tokens(int64_t tokens);

 private:
  struct Times {
    std::array<double, kSamples> s{};
    int count = 0;  // samples recorded so far (ring position = count % kSamples)
    void add(double seconds);
    double usual() const;  // mean of the fastest three quarters
    double best() const;   // infinity when empty
  };
  struct Kind {
    Times solo, full;
    int64_t steps = 0;
    bool solo_chosen = false;
    int64_t probe_every = kProbeEvery, next_probe = 0;
  };
  Kind& kind(int k);

  int threads_;
  std::vector<Kind> kinds_;
};

// One tuned step: sets the pool to the width the tuner chooses for a step of `tokens` tokens, and
// on destruction reports how long the step took.
class TunedStep {
 public:
  TunedStep(WidthTuner& tuner, ThreadPool& pool, int64_t tokens);
  ~TunedStep();
  TunedStep(const TunedStep&) = delete;
  TunedStep& operator=(const TunedStep&) = delete;

 private:
  WidthTuner& tuner_;
  int kind_, width_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace ember::kernels
