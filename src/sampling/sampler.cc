#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "base/error.h"
#include "sampling/vec.h"

namespace ember::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr size_t kDrawBlock = 4096;  // dense draws find the block first, then the token inside it
// Draws draw_nucleus() may reject before it settles for the exact nucleus; with top_p >= 1/2 each
// draw is kept with probability >= 1/2, so all 8 are rejected less than once in 256 tokens.
constexpr int kNucleusAttempts = 8;
// Float sums over a row are trusted to this relative error (as in dense_top_p).
constexpr double kMassMargin = 1e-4;

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t initial_seed(const SamplingParams& p) {
  if (p.seed) return *p.seed;
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// The first index whose running sum of w passes target; the last index with weight when rounding
// leaves the target unreached. Returns false if no weight is positive.
template <class Weight>
bool walk(size_t n, double& acc, double target, Weight w, size_t& out) {
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    const double x = w(i);
    if (x <= 0) continue;
    acc += x;
    out = i;
    any = true;
    if (acc > target) return true;
  }
  return any;
}

}  // namespace

int32_t draw(std::span<const Candidate> dist, Rng& rng) {
  double acc = 0;
  size_t i = 0;
  if (!walk(dist.size(), acc, rng.uniform(), [&](size_t j) { return static_cast<double>(dist[j].p); }, i))
    fail("sampler", "no token has a probability above 0");
  return dist[i].id;
}

Rng::Rng(uint64_t seed) {
  for (uint64_t& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

Sampler::Sampler(SamplingParams params)
    : params_((params.validate(), std::move(params))),
      rng_(initial_seed(params_)),
      want_logprobs_(params_.logprobs || params_.top_logprobs > 0) {}

std::span<const float> Sampler::apply_penalties(std::span<const float> logits, std::span<const int32_t> context,
                                                size_t n_prompt) {
  if (n_prompt > context.size()) fail("sampler", "n_prompt exceeds the context length");
  if (logits.empty()) fail("sampler", "empty logit row");
  const size_t vocab = logits.size();
  if (cand_.size() != vocab) {  // first token, or another vocabulary: the only allocations
    scores_.assign(vocab, 0.0f);
    weights_.assign(vocab, 0.0f);
    cand_.resize(vocab);
    idx_.resize(vocab);
    seen_.assign(vocab, 0);
    counts_.assign(vocab, 0);
    heap_.reserve(static_cast<size_t>(std::max(params_.top_k, params_.top_logprobs)) + 1);
    block_sums_.resize((vocab + kDrawBlock - 1) / kDrawBlock);
    logprobs_.top.reserve(static_cast<size_t>(params_.top_logprobs) + 1);
  }
  const SamplingParams& p = params_;
  if (p.repetition_penalty == 1.0f && p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f &&
      p.logit_bias.empty())
    return logits;
  std::copy(logits.begin(), logits.end(), scores_.begin());
  apply_repetition_penalty(scores_, context, p.repetition_penalty, seen_);
  apply_frequency_presence(scores_, context.subspan(n_prompt), p.frequency_penalty, p.presence_penalty, counts_);
  apply_logit_bias(scores_, p.logit_bias);
  return scores_;
}

int32_t Sampler::greedy(std::span<const float> row) const {
  const int32_t t = vec::argmax(row);
  if (t < 0) fail("sampler", "no token has a finite logit");
  return t;
}

size_t Sampler::materialize(std::span<const float> row, float threshold, bool with_p) {
  const size_t n = vec::indices_at_least(row, threshold, idx_.data());
  const float t = params_.temperature;
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = idx_[i];
    cand_[i] = Candidate{id, row[id] / t, with_p ? weights_[id] : 0.0f};
  }
  return n;
}

void Sampler::set_max(std::span<const float> row) {
  max_ = vec::max_value(row);
  if (max_ == -kInf) fail("sampler", "no token has a finite logit");
}

bool Sampler::warp(std::span<const float> row) {
  const SamplingParams& p = params_;
  const float t = p.temperature;
  set_max(row);
  bool list = false;
  p_set_ = false;
  auto cands = [&] { return std::span<Candidate>(cand_.data(), n_); };

  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < row.size()) {
    // The k-th largest value decides: everything at or above it is the top-k set, ties included.
    n_ = materialize(row, vec::kth_largest(row, static_cast<size_t>(p.top_k), heap_), false);
    list = true;
  }
  if (p.top_p < 1.0f) {
    if (list) {
      n_ = top_p(cands(), p.top_p);
      p_set_ = true;
    } else {
      n_ = dense_top_p(row);
      p_set_ = true;
      list = true;
    }
  }
  if (p.min_p > 0.0f) {
    // Dense rows are first cut a little below the exact bound, then min_p() decides.
    if (!list) n_ = materialize(row, max_ + t * (std::log(p.min_p) - 1e-3f), false);
    n_ = min_p(cands(), p.min_p);
    list = true;
  }
  if (p.typical_p < 1.0f) {
    if (!list) n_ = materialize(row, -kInf, false);
    n_ = typical_p(cands(), p.typical_p);
    p_set_ = true;
    list = true;
  }
  return list;
}

size_t Sampler::dense_top_p(std::span<const float> row) {
  const float t = params_.temperature;
  const float total = vec::sum_exp(row, t, max_ / t, -kInf, weights_);
  const double target = static_cast<double>(params_.top_p) * total;
  // The tokens at or above a threshold holding more than the nucleus' mass include the nucleus (each
  // token below has that much mass ranked before it); those above one holding less are all in it.
  // Margins keep float sums on the safe side; only the band between is ranked one by one.
  const double up = target * (1 + 1e-4), down = target * (1 - 1e-4);
  float lo = -kInf, hi = kInf;
  size_t count_lo = row.size(), count_hi = 0, count = 0;
  auto mass = [&](float threshold) { return vec::sum_where_at_least(weights_, row, threshold, &count); };
  for (float d = 0; d / t < 87.0f; d = d == 0 ? t : 2 * d) {
    const double f = mass(max_ - d);
    if (f >= up) {
      lo = max_ - d;
      count_lo = count;
      break;
    }
    if (f < down) {
      hi = max_ - d;
      count_hi = count;
    }
  }
  constexpr size_t kBand = 256;  // small enough to rank; more passes would cost more than they save
  for (int i = 0; i < 24 && lo > -kInf && hi < kInf && count_lo - count_hi > kBand; ++i) {
    const float mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) break;
    const double f = mass(mid);
    if (f >= up) {
      lo = mid;
      count_lo = count;
    } else if (f < down) {
      hi = mid;
      count_hi = count;
    } else {
      break;
    }
  }
  const size_t n = materialize(row, lo, true);
  size_t sure = 0;
  double above = 0;
  for (size_t i = 0; i < n; ++i) {
    if (row[cand_[i].id] >= hi) {
      above += cand_[i].p;
      std::swap(cand_[sure++], cand_[i]);
    }
  }
  return sure + top_p(std::span<Candidate>(cand_.data() + sure, n - sure), params_.top_p, total, above);
}

int32_t Sampler::draw_list() {
  std::span<Candidate> c(cand_.data(), n_);
  double total = 0;
  if (p_set_) {
    for (const Candidate& x : c) total += x.p;
  } else {
    total = exponentiate(c);
  }
  double acc = 0;
  size_t i = 0;
  if (!walk(c.size(), acc, rng_.uniform() * total, [&](size_t j) { return c[j].p; }, i))
    fail("sampler", "no token has a finite logit");
  return c[i].id;
}

double Sampler::fill_weights(std::span<const float> row) {
  const float t = params_.temperature, shift = max_ / t;
  double total = 0;
  for (size_t b = 0; b < block_sums_.size(); ++b) {
    const size_t start = b * kDrawBlock, len = std::min(kDrawBlock, row.size() - start);
    block_sums_[b] = vec::sum_exp(row.subspan(start, len), t, shift, -kInf,
                                  std::span<float>(weights_).subspan(start, len));
    total += block_sums_[b];
  }
  return total;
}

int32_t Sampler::draw_weighted(double total) {
  const double target = rng_.uniform() * total;
  double acc = 0;
  size_t b = 0;
  if (!walk(block_sums_.size(), acc, target, [&](size_t j) { return block_sums_[j]; }, b))
    fail("sampler", "no token has a finite logit");
  acc -= block_sums_[b];
  const size_t start = b * kDrawBlock;
  size_t i = 0;
  walk(std::min(kDrawBlock, weights_.size() - start), acc, target, [&](size_t j) { return weights_[start + j]; }, i);
  return static_cast<int32_t>(start + i);
}

int32_t Sampler::draw_dense(std::span<const float> row) { return draw_weighted(fill_weights(row)); }

bool Sampler::nucleus_by_rejection() const {
  const SamplingParams& p = params_;
  // min_p could leave a small part of the nucleus' mass, and then most draws would be rejected.
  return p.top_p >= 0.5f && p.top_p < 1.0f && p.top_k <= 0 && p.min_p <= 0.0f && p.typical_p >= 1.0f;
}

// Top-p without ranking the row: draw from the whole distribution and keep the draw only
// if it lies in the kept set, else draw again. Rejection sampling yields exactly the kept set's
// renormalised distribution; a test costs two threshold sums over the row, where finding the nucleus
// costs a threshold search and a list of all its tokens (most of a flat 150k row).
int32_t Sampler::draw_nucleus(std::span<const float> row) {
  set_max(row);
  const double total = fill_weights(row);
  const double target = static_cast<double>(params_.top_p) * total;
  for (int attempt = 0; attempt < kNucleusAttempts; ++attempt) {
    const int32_t x = draw_weighted(total);
    // The mass ranked before x (ranks_before on logit / t) lies between the mass from a few ulps over
    // row[x] and the mass from a few ulps under it, less x's own: dividing by t rounds at most a few
    // neighbouring values to one logit, and those rank by id.
    float hi = row[x], lo = row[x];
    for (int i = 0; i < 8; ++i) {
      hi = std::nextafter(hi, kInf);
      lo = std::nextafter(lo, -kInf);
    }
    const double before_min = vec::sum_where_at_least(weights_, row, hi);
    const double before_max = vec::sum_where_at_least(weights_, row, lo) - weights_[x];
    bool kept;
    if (before_max < target * (1 - kMassMargin)) {
      kept = true;
    } else if (before_min >= target * (1 + kMassMargin)) {
      kept = false;
    } else {  // too close to call with float sums: the exact kept set decides
      warp(row);
      kept = std::any_of(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(n_),
                         [x](const Candidate& c) { return c.id == x; });
    }
    if (kept) return x;
  }
  return warp(row) ? draw_list() : draw_dense(row);
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> context, size_t n_prompt) {
  const std::span<const float> row = apply_penalties(logits, context, n_prompt);
  int32_t token;
  if (!params_.sampling())
    token = greedy(row);
  else if (nucleus_by_rejection())
    token = draw_nucleus(row);
  else
    token = warp(row) ? draw_list() : draw_dense(row);
  if (want_logprobs_) compute_logprobs(logits, token);
  return token;
}

std::span<const Candidate> Sampler::distribution(std::span<const float> logits, std::span<const int32_t> context,
                                                 size_t n_prompt) {
  const std::span<const float> row = apply_penalties(logits, context, n_prompt);
  if (!params_.sampling()) {
    const int32_t t = greedy(row);
    cand_[0] = Candidate{t, row[t], 1.0f};
    return {cand_.data(), 1};
  }
  if (!warp(row)) n_ = materialize(row, -kInf, false);
  std::span<Candidate> c(cand_.data(), n_);
  const double total = exponentiate(c);
  for (Candidate& x : c) x.p = static_cast<float>(x.p / total);
  return c;
}

int32_t Sampler::sample_proposed(std::span<const float> logits, std::span<const int32_t> context, size_t n_prompt,
                                 int32_t proposed, std::span<const Candidate> q) {
  if (!params_.sampling()) return sample(logits, context, n_prompt);
  const std::span<const Candidate> p = distribution(logits, context, n_prompt);
  if (q_dense_.size() < logits.size()) q_dense_.assign(logits.size(), 0.0f);
  for (const Candidate& c : q)
    if (c.id >= 0 && static_cast<size_t>(c.id) < q_dense_.size()) q_dense_[static_cast<size_t>(c.id)] = c.p;
  const float q_of_proposed =
      proposed >= 0 && static_cast<size_t>(proposed) < q_dense_.size() ? q_dense_[static_cast<size_t>(proposed)] : 0.0f;
  float p_of_proposed = 0.0f;
  for (const Candidate& c : p)
    if (c.id == proposed) p_of_proposed = c.p;
  int32_t token = -1;
  if (q_of_proposed > 0.0f && rng_.uniform() * q_of_proposed < p_of_proposed) {
    token = proposed;
  } else {
    // The residual max(0, p - q), walked in the candidates' order; p itself where it is empty (p equal
    // to q to the last bit, where a rejection has probability 0 anyway).
    auto residual = [&](size_t j) { return std::max(0.0f, p[j].p - q_dense_[static_cast<size_t>(p[j].id)]); };
    double total = 0;
    for (size_t j = 0; j < p.size(); ++j) total += residual(j);
    double acc = 0;
    size_t i = 0;
    const bool found = total > 0 ? walk(p.size(), acc, rng_.uniform() * total, residual, i)
                                 : walk(p.size(), acc, rng_.uniform(), [&](size_t j) { return p[j].p; }, i);
    if (found) token = p[i].id;
  }
  for (const Candidate& c : q)
    if (c.id >= 0 && static_cast<size_t>(c.id) < q_dense_.size()) q_dense_[static_cast<size_t>(c.id)] = 0.0f;
  if (token < 0) throw Error("internal: speculative sampling found no token with probability above 0");
  if (want_logprobs_) compute_logprobs(logits, token);
  return token;
}

void Sampler::compute_logprobs(std::span<const float> logits, int32_t token) {
  const float m = vec::max_value(logits);
  const double lse = m + std::log(static_cast<double>(vec::sum_exp(logits, 1.0f, m)));
  auto logprob = [&](int32_t id) { return static_cast<float>(logits[id] - lse); };
  logprobs_.chosen = {token, logprob(token)};
  logprobs_.top.clear();
  const auto want = static_cast<size_t>(params_.top_logprobs);
  if (want == 0) return;
  // Every raw logit at or above the want-th largest, best first; ties past `want` are cut by id.
  const size_t n = vec::indices_at_least(logits, vec::kth_largest(logits, want, heap_), idx_.data());
  std::span<Candidate> c(cand_.data(), n);
  for (size_t i = 0; i < n; ++i) c[i] = Candidate{idx_[i], logits[idx_[i]], 0.0f};
  std::sort(c.begin(), c.end(), ranks_before);
  const size_t kept = std::min(want, n);
  for (size_t i = 0; i < kept; ++i) logprobs_.top.push_back({c[i].id, logprob(c[i].id)});
}

}  // namespace ember::sampling
