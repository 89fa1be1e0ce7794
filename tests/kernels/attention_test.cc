#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/ops.h"

namespace ember::kernels {
namespace {

// Naive attention with an explicit softmax as the reference for the streaming kernel.
TEST(Attention, StreamingMatchesNaiveWithGqaAndWindow) {
  ThreadPool pool(2);
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t heads = 4, kv_heads = 2, hd = 8, n_pos = 37, block = 5;
  const int64_t kv_dim = kv_heads * hd;
  const int64_t n_blocks = (n_pos + block - 1) / block;
  std::vector<float> k(n_blocks * block * kv_dim), v(k.size());
  for (auto& x : k) x = dist(rng);
  for (auto& x : v) x = dist(rng);
  std::vector<const float*> kb, vb;
  for (int64_t b = 0; b < n_blocks; ++b) {
    kb.push_back(k.data() + b * block * kv_dim);
    vb.push_back(v.data() + b * block * kv_dim);
  }
  for (int64_t window : {0, 6}) {
    const int64_t n_tok = 5, first = n_pos - n_tok;
    std::vector<float> q(n_tok * heads * hd), out(q.size());
    for (auto& x : q) x = dist(rng);
    AttentionShape s{heads, kv_heads, hd, window, 1.0f / std::sqrt(8.0f)};
    attention(q.data(), n_tok, first, KvView{kb.data(), vb.data(), block}, s, out.data(), pool);
    for (int64_t t = 0; t < n_tok; ++t)
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t pos = first + t, lo = window ? std::max<int64_t>(0, pos - window + 1) : 0;
        std::vector<float> sc;
        for (int64_t p = lo; p <= pos; ++p) {
          float d = 0;
          for (int64_t i = 0; i < hd; ++i) d += q[(t * heads + h) * hd + i] * k[p * kv_dim + (h / 2) * hd + i];
          sc.push_back(d * s.scale);
        }
        softmax(sc.data(), static_cast<int64_t>(sc.size()));
        for (int64_t i = 0; i < hd; ++i) {
          float r = 0;
          for (int64_t p = lo; p <= pos; ++p) r += sc[p - lo] * v[p * kv_dim + (h / 2) * hd + i];
          EXPECT_NEAR(out[(t * heads + h) * hd + i], r, 1e-5);
        }
      }
  }
}

}  // namespace
}  // namespace ember::kernels
