// The linear-attention kernels (Gated DeltaNet): the delta rule on every instruction set against a
// double-precision reference of its recurrence, the same bits on all of them and however the
// positions are split into calls; the causal conv against its definition.
#include "kernels/delta_rule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/causal_conv.h"

namespace ember::kernels {
namespace {

struct Inputs {
  int64_t dk, dv, n;
  std::vector<float> q, k, v, decay, beta, state;
  DeltaRuleHead head(std::vector<float>& out, int64_t from = 0) {
    DeltaRuleHead h;
    h.q = q.data() + from * dk;
    h.k = k.data() + from * dk;
    h.qk_stride = dk;
    h.v = v.data() + from * dv;
    h.v_stride = dv;
    h.decay = decay.data() + from;
    h.beta = beta.data() + from;
    h.gate_stride = 1;
    h.out = out.data() + from * dv;
    h.out_stride = dv;
    return h;
  }
};

// q and k of unit length (as the layer's l2 norm leaves them), decays in (0, 1), betas in (0, 1).
Inputs random_inputs(int64_t dk, int64_t dv, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.05f, 0.95f);
  Inputs in{dk, dv, n, {}, {}, {}, {}, {}, {}};
  auto unit_rows = [&](std::vector<float>& x) {
    x.resize(static_cast<size_t>(n * dk));
    for (int64_t t = 0; t < n; ++t) {
      double ss = 0;
      for (int64_t i = 0; i < dk; ++i) ss += std::pow(x[t * dk + i] = g(rng), 2);
      for (int64_t i = 0; i < dk; ++i) x[t * dk + i] /= static_cast<float>(std::sqrt(ss));
    }
  };
  unit_rows(in.q);
  unit_rows(in.k);
  for (int64_t i = 0; i < n * dv; ++i) in.v.push_back(g(rng));
  for (int64_t t = 0; t < n; ++t) {
    in.decay.push_back(unit(rng));
    in.beta.push_back(unit(rng));
  }
  for (int64_t i = 0; i < dk * dv; ++i) in.state.push_back(0.1f * g(rng));
  return in;
}

// The recurrence in double: S = decay S; u = beta (v - S^T k); S += k u^T; o = S^T q.
std::vector<double> reference(const Inputs& in) {
  std::vector<double> S(in.state.begin(), in.state.end()), out(static_cast<size_t>(in.n * in.dv));
  std::vector<double> u(static_cast<size_t>(in.dv));
  for (int64_t t = 0; t < in.n; ++t) {
    for (auto& s : S) s *= in.decay[t];
    for (int64_t j = 0; j < in.dv; ++j) {
      double kv = 0;
      for (int64_t i = 0; i < in.dk; ++i) kv += S[i * in.dv + j] * in.k[t * in.dk + i];
      u[j] = in.beta[t] * (in.v[t * in.dv + j] - kv);
    }
    for (int64_t i = 0; i < in.dk; ++i)
      for (int64_t j = 0; j < in.dv; ++j) S[i * in.dv + j] += in.k[t * in.dk + i] * u[j];
    for (int64_t j = 0; j < in.dv; ++j) {
      double o = 0;
      for (int64_t i = 0; i < in.dk; ++i) o += S[i * in.dv + j] * in.q[t * in.dk + i];
      out[t * in.dv + j] = o;
    }
  }
  return out;
}

TEST(DeltaRule, EveryIsaMatchesTheReferenceWithTheSameBits) {
  // Value widths around the 8- and 16-lane loops and their blocks of 4 and 8 vectors (tails).
  for (const auto& [dk, dv] : std::vector<std::pair<int64_t, int64_t>>{{16, 16}, {8, 7}, {32, 33}, {128, 128}, {64, 200}}) {
    Inputs in = random_inputs(dk, dv, 20, static_cast<uint32_t>(dk * 1000 + dv));
    const std::vector<double> want = reference(in);
    std::vector<float> scalar_out, scalar_state;
    for (Isa isa : supported_isas()) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " dk " + std::to_string(dk) + " dv " + std::to_string(dv));
      std::vector<float> S = in.state, out(static_cast<size_t>(in.n * dv));
      delta_rule(S.data(), dk, dv, in.head(out), in.n, isa);
      for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << i;
      if (isa == Isa::Scalar) {
        scalar_out = out;
        scalar_state = S;
      } else {
        EXPECT_EQ(out, scalar_out);
        EXPECT_EQ(S, scalar_state);
      }
    }
  }
}

TEST(DeltaRule, SplitIntoCallsGivesTheSameBits) {
  Inputs in = random_inputs(32, 48, 37, 5);
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    std::vector<float> whole_state = in.state, whole(static_cast<size_t>(in.n * in.dv));
    delta_rule(whole_state.data(), in.dk, in.dv, in.head(whole), in.n, isa);
    for (const std::vector<int64_t>& split : std::vector<std::vector<int64_t>>{{1, 36}, {7, 1, 20, 9}, {36, 1}}) {
      std::vector<float> S = in.state, out(whole.size());
      int64_t done = 0;
      for (int64_t part : split) {
        delta_rule(S.data(), in.dk, in.dv, in.head(out, done), part, isa);
        done += part;
      }
      ASSERT_EQ(done, in.n);
      EXPECT_EQ(out, whole);
      EXPECT_EQ(S, whole_state);
    }
  }
}

TEST(CausalConv, MatchesItsDefinition) {
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const int64_t channels = 5, kernel = 4, n = 6, window = kernel - 1;
  std::vector<float> x(static_cast<size_t>((window + n) * channels)), w(static_cast<size_t>(channels * kernel));
  for (auto& v : x) v = g(rng);
  for (auto& v : w) v = g(rng);
  std::vector<float> out(static_cast<size_t>(n * channels));
  causal_conv_silu(x.data(), w.data(), n, channels, kernel, out.data());
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < channels; ++c) {
      double s = 0;  // position t sees its own input and the kernel - 1 before it, no flip
      for (int64_t j = 0; j < kernel; ++j) s += double(w[c * kernel + j]) * x[(t + j) * channels + c];
      const double want = s / (1 + std::exp(-s));
      EXPECT_NEAR(out[t * channels + c], want, 1e-5 * (1 + std::fabs(want))) << t << " " << c;
    }
}

}  // namespace
}  // namespace ember::kernels
