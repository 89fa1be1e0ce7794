#include "kernels/width_tuner.h"

#include <gtest/gtest.h>

#include <mutex>
#include <random>
#include <set>
#include <thread>

namespace ember::kernels {
namespace {

// Runs `steps` steps of one kind whose time at each width is given; returns how many ran solo.
int run(WidthTuner& t, int kind, int steps, double solo_s, double full_s) {
  int solo = 0;
  for (int i = 0; i < steps; ++i) {
    const int w = t.choose(kind);
    solo += w == 1;
    t.record(kind, w, w == 1 ? solo_s : full_s);
  }
  return solo;
}

TEST(WidthTuner, KeepsTheFasterWidthAndNoticesAChange) {
  WidthTuner t(2);
  // Two threads faster: after trying both, nearly every step runs on both, and probes of one
  // thread grow rarer (24, 48, 96 steps apart).
  EXPECT_LE(run(t, 0, 200, 0.010, 0.006), 3 + 3);
  // A neighbour takes the second core: full width now stalls, and the tuner moves to one thread
  // within a few steps.
  const int solo = run(t, 0, 200, 0.010, 0.030);
  EXPECT_GE(solo, 200 - 5 - 200 / WidthTuner::kProbeEvery - 1);
  // It leaves again: the next probe (at most kMaxProbeEvery steps away) sees full width fast, two
  // quick probes confirm it, and the tuner returns to it.
  EXPECT_LE(run(t, 0, 400, 0.010, 0.006), WidthTuner::kMaxProbeEvery + WidthTuner::kProbeEvery);
  EXPECT_LE(run(t, 0, WidthTuner::kProbeEvery, 0.010, 0.006), 1) << "settled on full width";
}

// Noisy steps (a shared host: 30% of steps take up to twice as long on one thread, 3.5 times on
// two) with two threads clearly faster on average: the tuner must not flap to one thread whenever a
// few fast one-thread probes meet a run of slow two-thread steps.
TEST(WidthTuner, NoiseDoesNotMakeItFlap) {
  WidthTuner t(2);
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> slow(1.0, 2.0);
  std::bernoulli_distribution hit(0.3);
  const int steps = 4000;
  int solo = 0;
  for (int i = 0; i < steps; ++i) {
    const int w = t.choose(0);
    solo += w == 1;
    // A step on two threads also waits whenever either thread is held up, so it suffers more.
    const double base = w == 1 ? 2.5e-3 : 1.5e-3, factor = slow(rng);
    t.record(0, w, hit(rng) ? base * (w == 1 ? factor : 2 * factor - 0.5) : base);
  }
  // Its probes (one per kMaxProbeEvery steps once settled) and a few switches and returns: about 2%
  // of the steps here. Comparing medians of the last five steps instead ran 35% on one thread.
  EXPECT_LE(solo, steps / 32);
}

TEST(WidthTuner, KindsAreIndependentAndOneThreadNeverProbes) {
  WidthTuner t(2);
  run(t, WidthTuner::kind_of_tokens(1), 100, 0.004, 0.008);    // decode: one thread wins
  run(t, WidthTuner::kind_of_tokens(8), 100, 0.008, 0.005);    // a small batch: two threads win
  EXPECT_GE(run(t, WidthTuner::kind_of_tokens(1), WidthTuner::kProbeEvery, 0.004, 0.008),
            WidthTuner::kProbeEvery - 1);
  EXPECT_LE(run(t, WidthTuner::kind_of_tokens(7), WidthTuner::kProbeEvery, 0.008, 0.005), 1);

  WidthTuner single(1);
  EXPECT_EQ(run(single, 0, 50, 0.001, 0.5), 50);

  EXPECT_EQ(WidthTuner::kind_of_tokens(1), 0);
  EXPECT_EQ(WidthTuner::kind_of_tokens(2), 1);
  EXPECT_EQ(WidthTuner::kind_of_tokens(3), WidthTuner::kind_of_tokens(4));
  EXPECT_NE(WidthTuner::kind_of_tokens(4), WidthTuner::kind_of_tokens(5));
}

// Prefill-sized steps are never probed on one thread, not even at their first steps (a benchmark's
// repetitions would alternate between full and half speed), whatever their times.
TEST(WidthTuner, LargeStepsAlwaysRunOnEveryThread) {
  WidthTuner t(2);
  EXPECT_EQ(run(t, WidthTuner::kind_of_tokens(WidthTuner::kMaxTunedTokens + 1), 50, 0.100, 0.300), 0);
  EXPECT_EQ(run(t, WidthTuner::kind_of_tokens(512), 50, 0.500, 0.800), 0);
  EXPECT_GT(run(t, WidthTuner::kind_of_tokens(WidthTuner::kMaxTunedTokens), 50, 0.100, 0.300), 40);
}

}  // namespace
}  // namespace ember::kernels

namespace ember::kernels {
namespace {

// A TunedStep sets the pool's width as chosen and reports the step: the first steps of a kind try
// both widths, so two steps in a row run once on one thread and once on all (in some order). Read
// from the pool's setting, not from which threads ran: a busy machine may leave a worker asleep.
TEST(TunedStep, SetsTheChosenWidthAndRecordsTheStep) {
  ThreadPool pool(2);
  WidthTuner tuner(pool.size());
  std::vector<bool> solo;
  for (int i = 0; i < 2; ++i) {
    const TunedStep step(tuner, pool, 1);
    solo.push_back(pool.caller_only());
  }
  EXPECT_NE(solo[0], solo[1]);
}

}  // namespace
}  // namespace ember::kernels
