#include "sampling/logits_processors.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <utility>

#include "base/error.h"
#include "sampling/vec.h"

namespace ember::sampling {

void check_token_id(int32_t id, size_t vocab, const char* what) {
  if (id < 0 || static_cast<size_t>(id) >= vocab)
    fail(what, "token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(vocab));
}

namespace {

// Hoare partition of a[lo..hi] (inclusive, hi > lo) around the median of first, middle and last.
// Returns j in [lo, hi): nothing in [lo, j] ranks after anything in [j + 1, hi].
template <class Before>
ptrdiff_t partition(Candidate* a, ptrdiff_t lo, ptrdiff_t hi, Before before) {
  const ptrdiff_t mid = lo + (hi - lo) / 2;
  if (before(a[mid], a[lo])) std::swap(a[mid], a[lo]);
  if (before(a[hi], a[lo])) std::swap(a[hi], a[lo]);
  if (before(a[hi], a[mid])) std::swap(a[hi], a[mid]);
  const Candidate pivot = a[mid];
  ptrdiff_t i = lo - 1, j = hi + 1;
  for (;;) {
    do ++i;
    while (before(a[i], pivot));
    do --j;
    while (before(pivot, a[j]));
    if (i >= j) return j;
    std::swap(a[i], a[j]);
  }
}

template <class Before>
void insertion_sort(Candidate* a, ptrdiff_t lo, ptrdiff_t hi, Before before) {
  for (ptrdiff_t i = lo + 1; i <= hi; ++i) {
    const Candidate x = a[i];
    ptrdiff_t j = i;
    for (; j > lo && before(x, a[j - 1]); --j) a[j] = a[j - 1];
    a[j] = x;
  }
}

constexpr ptrdiff_t kSmall = 16;  // ranges this short are finished by insertion sort

// Quickselect: puts the element of rank `nth` (by `before`) at c[nth], better ones before it.
template <class Before>
void select_nth(std::span<Candidate> c, size_t nth, Before before) {
  ptrdiff_t lo = 0, hi = static_cast<ptrdiff_t>(c.size()) - 1;
  const auto n = static_cast<ptrdiff_t>(nth);
  while (hi - lo > kSmall) {
    const ptrdiff_t p = partition(c.data(), lo, hi, before);
    if (n <= p) hi = p; else lo = p + 1;
  }
  insertion_sort(c.data(), lo, hi, before);
}

// Quickselect on probability mass: moves to the front the shortest prefix (in `before` order) whose
// c[i].p sum reaches `target`, and returns its length (all of c when rounding keeps it short).
template <class Before>
size_t select_mass(std::span<Candidate> c, double target, Before before) {
  ptrdiff_t lo = 0, hi = static_cast<ptrdiff_t>(c.size()) - 1;
  double acc = 0;  // mass of c[0, lo), all of which is kept
  while (hi - lo > kSmall) {
    const ptrdiff_t p = partition(c.data(), lo, hi, before);
    double left = 0;
    for (ptrdiff_t i = lo; i <= p; ++i) left += c[i].p;
    if (acc + left >= target) {
      hi = p;
    } else {
      acc += left;
      lo = p + 1;
    }
  }
  insertion_sort(c.data(), lo, hi, before);
  for (ptrdiff_t i = lo; i <= hi; ++i) {
    acc += c[i].p;
    if (acc >= target) return static_cast<size_t>(i + 1);
  }
  return static_cast<size_t>(hi + 1);
}

// Moves the candidates of c[kept, end) for which keep() holds right after the kept ones.
template <class Keep>
size_t keep_also(std::span<Candidate> c, size_t kept, Keep keep) {
  for (size_t i = kept; i < c.size(); ++i)
    if (keep(c[i])) std::swap(c[kept++], c[i]);
  return kept;
}

float max_logit(std::span<const Candidate> c) {
  float m = -std::numeric_limits<float>::infinity();
  for (const Candidate& x : c) m = std::max(m, x.logit);
  return m;
}

}  // namespace

void apply_repetition_penalty(std::span<float> scores, std::span<const int32_t> context, float penalty,
                              std::vector<uint8_t>& seen) {
  if (penalty == 1.0f) return;
  for (int32_t t : context) {
    check_token_id(t, scores.size(), "repetition penalty");
    if (seen[t]) continue;
    seen[t] = 1;
    float& s = scores[t];
    s = s < 0 ? s * penalty : s / penalty;
  }
  for (int32_t t : context) seen[t] = 0;
}

void apply_frequency_presence(std::span<float> scores, std::span<const int32_t> generated, float frequency,
                              float presence, std::vector<int32_t>& counts) {
  if (frequency == 0.0f && presence == 0.0f) return;
  for (int32_t t : generated) {
    check_token_id(t, scores.size(), "frequency/presence penalty");
    ++counts[t];
  }
  for (int32_t t : generated) {
    if (counts[t] == 0) continue;  // already applied at an earlier occurrence
    scores[t] -= static_cast<float>(counts[t]) * frequency + presence;
    counts[t] = 0;
  }
}

void apply_logit_bias(std::span<float> scores, const std::map<int32_t, float>& bias) {
  for (const auto& [id, b] : bias) {
    check_token_id(id, scores.size(), "logit_bias");
    scores[id] += b;
  }
}

void apply_temperature(std::span<Candidate> c, float t) {
  for (Candidate& x : c) x.logit /= t;
}

double exponentiate(std::span<Candidate> c) {
  const float m = max_logit(c);
  double sum = 0;
  for (Candidate& x : c) {
    x.p = vec::exp_det(x.logit - m);
    sum += x.p;
  }
  return sum;
}

size_t top_k(std::span<Candidate> c, size_t k) {
  if (k == 0 || k >= c.size()) return c.size();
  select_nth(c, k - 1, ranks_before);
  const float kth = c[k - 1].logit;
  return keep_also(c, k, [kth](const Candidate& x) { return x.logit >= kth; });
}

size_t top_p(std::span<Candidate> c, float top_p, double total, double above) {
  if (c.empty()) return 0;
  if (top_p >= 1.0f) return c.size();
  if (total <= 0) total = exponentiate(c);
  const double target = top_p * total - above;
  const size_t kept = target > 0 ? select_mass(c, target, ranks_before) : 0;
  return above > 0 ? kept : std::max<size_t>(1, kept);
}

size_t min_p(std::span<Candidate> c, float min_p) {
  if (min_p <= 0.0f) return c.size();
  const float m = max_logit(c);
  return keep_also(c, 0, [&](const Candidate& x) { return vec::exp_det(x.logit - m) >= min_p; });
}

size_t typical_p(std::span<Candidate> c, float mass) {
  if (c.empty()) return 0;
  if (mass >= 1.0f) return c.size();
  const double total = exponentiate(c);
  const float m = max_logit(c);
  // -log p_i = log Z - (logit_i - m); entropy H = log Z - sum p_i (logit_i - m).
  const double log_z = std::log(total);
  double weighted = 0;
  for (const Candidate& x : c)
    if (x.p > 0) weighted += x.p * static_cast<double>(x.logit - m);
  const double entropy = log_z - weighted / total;
  const auto center = static_cast<float>(m + log_z - entropy);  // |-log p - H| = |center - logit|
  auto before = [center](const Candidate& a, const Candidate& b) {
    const float ka = std::fabs(center - a.logit), kb = std::fabs(center - b.logit);
    return ka < kb || (ka == kb && a.id < b.id);
  };
  const size_t kept = std::max<size_t>(1, select_mass(c, mass * total, before));
  const float last = std::fabs(center - c[kept - 1].logit);
  return keep_also(c, kept, [&](const Candidate& x) { return std::fabs(center - x.logit) == last; });
}

}  // namespace ember::sampling
