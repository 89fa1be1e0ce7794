#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/kv_type.h"
#include "kernels/ops.h"

namespace ember::kernels {
namespace {

// Value i of a stored row as float32 (the test's own decoding of each format).
float stored_value(KvType t, const uint8_t* row, int64_t head_dim, int64_t i) {
  uint16_t h;
  switch (t) {
    case KvType::F32: {
      float f;
      std::memcpy(&f, row + 4 * i, 4);
      return f;
    }
    case KvType::F16: std::memcpy(&h, row + 2 * i, 2); return f16_to_f32(h);
    case KvType::BF16: std::memcpy(&h, row + 2 * i, 2); return bf16_to_f32(h);
    case KvType::Q8_0: {
      const int64_t b = kv_q8_block(head_dim);
      const uint8_t* blk = row + (i / b) * (b + 2);
      std::memcpy(&h, blk, 2);
      return f16_to_f32(h) * static_cast<float>(static_cast<int8_t>(blk[2 + i % b]));
    }
  }
  return 0;
}

// One sequence's cache in blocks, with random keys and values stored as `type` in the kernel's
// head-major block layout; k and v hold the stored values as float32, position-major ([pos][kv_dim]:
// what the reference computes with).
struct Cache {
  Cache(int64_t n_pos, int64_t kv_dim, int64_t head_dim, int64_t block, std::mt19937& rng, KvType type = KvType::F32)
      : kv_dim(kv_dim), block(block), type(type) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const int64_t n_blocks = (n_pos + block - 1) / block, n_kv = kv_dim / head_dim;
    const int64_t row_bytes = kv_row_bytes(type, head_dim), block_bytes = block * n_kv * row_bytes;
    k.resize(n_blocks * block * kv_dim);
    v.resize(k.size());
    for (auto& x : k) x = dist(rng);
    for (auto& x : v) x = dist(rng);
    ks.resize(static_cast<size_t>(n_blocks * block_bytes));
    vs.resize(ks.size());
    for (int64_t p = 0; p < n_blocks * block; ++p)
      for (int64_t h = 0; h < n_kv; ++h) {
        const int64_t at = (p / block) * block_bytes + kv_row(block, h, p % block) * row_bytes;
        float* kr = k.data() + p * kv_dim + h * head_dim;
        float* vr = v.data() + p * kv_dim + h * head_dim;
        store_kv_row(kr, head_dim, type, ks.data() + at);
        store_kv_row(vr, head_dim, type, vs.data() + at);
        for (int64_t i = 0; i < head_dim; ++i) {  // the reference uses what was stored
          kr[i] = stored_value(type, ks.data() + at, head_dim, i);
          vr[i] = stored_value(type, vs.data() + at, head_dim, i);
        }
      }
    for (int64_t b = 0; b < n_blocks; ++b) {
      kb.push_back(ks.data() + b * block_bytes);
      vb.push_back(vs.data() + b * block_bytes);
    }
  }
  KvView view() const { return KvView{kb.data(), vb.data(), block, type}; }
  int64_t kv_dim, block;
  KvType type;
  std::vector<float> k, v;
  std::vector<uint8_t> ks, vs;
  std::vector<const void*> kb, vb;
};

// Naive attention with an explicit softmax: the reference for the streaming kernel.
void expect_matches_naive(const std::vector<float>& q, const std::vector<float>& out, int64_t n_tok, int64_t first,
                          const Cache& c, const AttentionShape& s) {
  const int64_t hd = s.head_dim, group = s.n_heads / s.n_kv_heads;
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t h = 0; h < s.n_heads; ++h) {
      const int64_t pos = first + t, lo = s.sliding_window ? std::max<int64_t>(0, pos - s.sliding_window + 1) : 0;
      const int64_t kvo = (h / group) * hd;
      std::vector<float> sc;
      for (int64_t p = lo; p <= pos; ++p) {
        float d = 0;
        for (int64_t i = 0; i < hd; ++i) d += q[(t * s.n_heads + h) * hd + i] * c.k[p * c.kv_dim + kvo + i];
        sc.push_back(s.softcap > 0 ? std::tanh(d * s.scale / s.softcap) * s.softcap : d * s.scale);
      }
      if (s.sinks != nullptr) sc.push_back(s.sinks[h]);  // one more column of the softmax, then dropped
      softmax(sc.data(), static_cast<int64_t>(sc.size()));
      for (int64_t i = 0; i < hd; ++i) {
        float r = 0;
        for (int64_t p = lo; p <= pos; ++p) r += sc[p - lo] * c.v[p * c.kv_dim + kvo + i];
        EXPECT_NEAR(out[(t * s.n_heads + h) * hd + i], r, 1e-5) << "token " << t << " head " << h << " dim " << i;
      }
    }
}

std::vector<float> random_vector(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& e : x) e = dist(rng);
  return x;
}

// Every instruction set's output against the scalar reference kernel (the same streaming
// softmax with sequential sums).
void expect_matches_scalar(std::span<const AttentionItem> items, const AttentionShape& s, Isa isa, ThreadPool& pool) {
  std::vector<std::vector<float>> ref;
  std::vector<AttentionItem> ref_items(items.begin(), items.end());
  for (AttentionItem& it : ref_items) {
    ref.emplace_back(static_cast<size_t>(it.n_tokens * s.n_heads * s.head_dim));
    it.out = ref.back().data();
  }
  attention(ref_items, s, pool, Isa::Scalar);
  for (size_t i = 0; i < items.size(); ++i)
    for (size_t e = 0; e < ref[i].size(); ++e)
      ASSERT_NEAR(items[i].out[e], ref[i][e], 1e-5) << isa_name(isa) << " item " << i << " element " << e;
}

TEST(Attention, StreamingMatchesNaiveWithGqaAndWindow) {
  ThreadPool pool(2);
  std::mt19937 rng(3);
  const int64_t heads = 4, kv_heads = 2, n_pos = 37, block = 5;
  for (Isa isa : supported_isas())
  for (KvType kv_type : {KvType::F32, KvType::F16, KvType::BF16, KvType::Q8_0})
  for (int64_t hd : {8, 16, 32, 64})  // Q8_0: blocks of 8, 16, 32 and two of 32
  for (int64_t window : {0, 6})
  for (float cap : {0.0f, 0.5f}) {  // soft-capping (Gemma 2) small enough to change the weights
    const Cache cache(n_pos, kv_heads * hd, hd, block, rng, kv_type);
    const int64_t n_tok = 5, first = n_pos - n_tok;
    std::vector<float> q = random_vector(n_tok * heads * hd, rng), out(q.size());
    AttentionShape s{heads, kv_heads, hd, window, 1.0f / std::sqrt(static_cast<float>(hd)), cap};
    const AttentionItem item{q.data(), n_tok, first, cache.view(), out.data()};
    attention(std::span(&item, 1), s, pool, isa);
    expect_matches_naive(q, out, n_tok, first, cache, s);
    expect_matches_scalar(std::span(&item, 1), s, isa, pool);
  }
  // The default (best_isa) overload of one sequence.
  const int64_t hd = 8;
  const Cache cache(n_pos, kv_heads * hd, hd, block, rng);
  std::vector<float> q = random_vector(heads * hd, rng), out(q.size());
  const AttentionShape s{heads, kv_heads, hd, 0, 0.5f, 0.0f};
  attention(q.data(), 1, n_pos - 1, cache.view(), s, out.data(), pool);
  expect_matches_naive(q, out, 1, n_pos - 1, cache, s);
}

// A sequence's context and its new tokens, the last of them at position n_pos - 1.
struct Case {
  int64_t n_pos, n_tok;
};

// Random caches and queries of `cases` run as one batched call: each against the naive softmax and
// the scalar reference.
void expect_batch_matches(const std::vector<Case>& cases, const AttentionShape& s, Isa isa, ThreadPool& pool,
                          std::mt19937& rng) {
  const int64_t hd = s.head_dim;
  std::vector<Cache> caches;
  std::vector<std::vector<float>> qs, outs;
  std::vector<AttentionItem> items;
  for (const Case& c : cases) {
    caches.emplace_back(c.n_pos, s.n_kv_heads * hd, hd, 16, rng);
    qs.push_back(random_vector(static_cast<size_t>(c.n_tok * s.n_heads * hd), rng));
    outs.emplace_back(qs.back().size());
  }
  for (size_t i = 0; i < cases.size(); ++i)
    items.push_back({qs[i].data(), cases[i].n_tok, cases[i].n_pos - cases[i].n_tok, caches[i].view(), outs[i].data()});
  attention(items, s, pool, isa);
  for (size_t i = 0; i < cases.size(); ++i)
    expect_matches_naive(qs[i], outs[i], cases[i].n_tok, cases[i].n_pos - cases[i].n_tok, caches[i], s);
  expect_matches_scalar(items, s, isa, pool);
}

// gpt-oss's sinks: a learned logit per query head in each softmax's denominator, below and above
// the scores' maximum (the second takes the rescaled branch), in decode steps and prompts that cross
// a score tile, with and without a window, on every instruction set.
TEST(Attention, SinksJoinTheSoftmaxDenominator) {
  ThreadPool pool(2);
  std::mt19937 rng(11);
  const int64_t heads = 4, kv_heads = 2, hd = 32;
  for (Isa isa : supported_isas())
  for (float base : {-2.0f, 9.0f})
  for (int64_t window : {0, 6}) {
    const std::vector<float> sinks{base, base + 0.5f, base - 1.0f, base + 2.0f};
    AttentionShape s{heads, kv_heads, hd, window, 1.0f / std::sqrt(static_cast<float>(hd)), 0.0f};
    s.sinks = sinks.data();
    expect_batch_matches({{1, 1}, {40, 1}, {150, 9}, {30, 30}}, s, isa, pool, rng);
  }
}

// Several sequences of different lengths in one call (a decode step plus a prompt chunk), with
// contexts longer than the kernel's score tile, grouped query heads in pairs and alone, and head
// sizes that are not multiples of 8.
TEST(Attention, BatchedItemsMatchNaive) {
  ThreadPool pool(3);
  std::mt19937 rng(5);
  // Query heads per kv head: 4 (in pairs), 3 (a pair and one alone), 1; head sizes with tails past
  // the 16- and 8-wide loops.
  for (Isa isa : supported_isas())
  for (const auto& [heads, kv_heads] : {std::pair<int64_t, int64_t>{8, 2}, {6, 2}, {4, 4}})
  for (int64_t hd : {32, 12, 40}) {
    const AttentionShape s{heads, kv_heads, hd, 0, 1.0f / std::sqrt(static_cast<float>(hd)), 0.0f};
    expect_batch_matches({{1, 1}, {70, 1}, {33, 9}, {100, 1}, {300, 1}, {160, 9}}, s, isa, pool, rng);
  }
}

// Decode steps (one new token per sequence) on every instruction set against the naive softmax and
// the scalar kernel: the AVX-512 kernel's passes of 4, 2 and 1 query heads per kv head (groups of 1
// to 8), head sizes of whole and half 16-lane vectors (and one the AVX2 kernel takes: 12), every
// stored type, contexts inside one score tile and across three (the next tile's keys fetched
// ahead), with a window, soft-capping and sinks.
TEST(Attention, DecodeStepsMatchTheScalarKernel) {
  ThreadPool pool(2);
  std::mt19937 rng(17);
  for (Isa isa : supported_isas())
  for (const auto& [heads, kv_heads] : {std::pair<int64_t, int64_t>{2, 2}, {4, 2}, {6, 2}, {8, 2}, {5, 1}, {7, 1}, {16, 2}})
  for (KvType kv_type : {KvType::F32, KvType::F16, KvType::BF16, KvType::Q8_0})
  for (int64_t hd : {8, 24, 64, 12, 128}) {
    if (kv_type == KvType::Q8_0 && kv_q8_block(hd) == 0) continue;
    for (int variant = 0; variant < 2; ++variant) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " heads " + std::to_string(heads) + "/" + std::to_string(kv_heads) +
                   " hd " + std::to_string(hd) + " " + kv_type_name(kv_type) + " variant " + std::to_string(variant));
      AttentionShape s{heads, kv_heads, hd, variant ? 150 : 0, 1.0f / std::sqrt(static_cast<float>(hd)),
                       variant ? 0.5f : 0.0f};
      const std::vector<float> sinks = random_vector(static_cast<size_t>(heads), rng);
      if (variant) s.sinks = sinks.data();
      std::vector<Cache> caches;
      std::vector<std::vector<float>> qs, outs;
      std::vector<AttentionItem> items;
      const std::vector<int64_t> lengths = {1, 17, 130, 300};
      for (int64_t n_pos : lengths) {
        caches.emplace_back(n_pos, kv_heads * hd, hd, 16, rng, kv_type);
        qs.push_back(random_vector(static_cast<size_t>(heads * hd), rng));
        outs.emplace_back(qs.back().size());
      }
      for (size_t i = 0; i < lengths.size(); ++i)
        items.push_back({qs[i].data(), 1, lengths[i] - 1, caches[i].view(), outs[i].data()});
      attention(items, s, pool, isa);
      for (size_t i = 0; i < lengths.size(); ++i) expect_matches_naive(qs[i], outs[i], 1, lengths[i] - 1, caches[i], s);
      expect_matches_scalar(items, s, isa, pool);
    }
  }
}

// A prompt's tokens share work units (several tokens' query rows read each tile of keys once); each
// token's result must still have the same bits however the prompt is split into steps of two tokens
// or more (a server's chunks, a chat's turns), and the AVX-512 kernel's bits are the AVX2 one's:
// prompts that cross score tiles, with and without a window, soft-capping and sinks, every group shape. A
// single token (a decode step) is within the tolerance of the scalar reference, as above.
TEST(Attention, PromptTokensHaveTheSameBitsHoweverThePromptIsSplit) {
  ThreadPool pool(2);
  std::mt19937 rng(11);
  for (const auto& [heads, kv_heads] : {std::pair<int64_t, int64_t>{8, 2}, {7, 1}, {3, 3}, {32, 2}})
  for (KvType kv_type : {KvType::F16, KvType::Q8_0})
  for (int64_t hd : {64, 40})
  for (const auto& [window, cap, sinks] : {std::tuple<int64_t, float, bool>{0, 0.0f, false}, {100, 0.5f, false},
                                            {8, 0.0f, true}}) {  // gpt-oss: a window of 8 and sinks
    const int64_t n_pos = 300, n_tok = 45, first = n_pos - n_tok;  // tokens from 255 to 299: tiles 1 and 2
    const Cache cache(n_pos, kv_heads * hd, hd, 16, rng, kv_type);
    AttentionShape s{heads, kv_heads, hd, window, 1.0f / std::sqrt(static_cast<float>(hd)), cap};
    const std::vector<float> sink_logits = random_vector(static_cast<size_t>(heads), rng);
    if (sinks) s.sinks = sink_logits.data();
    const int64_t stride = heads * hd;
    const std::vector<float> q = random_vector(static_cast<size_t>(n_tok * stride), rng);
    std::vector<float> avx2;  // the AVX2 kernel's result, which the AVX-512 one must equal
    for (Isa isa : supported_isas()) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " heads " + std::to_string(heads) + "/" + std::to_string(kv_heads) +
                   " hd " + std::to_string(hd) + " window " + std::to_string(window));
      std::vector<float> out(q.size()), split(q.size());
      const AttentionItem prompt{q.data(), n_tok, first, cache.view(), out.data()};
      attention(std::span(&prompt, 1), s, pool, isa);
      std::vector<AttentionItem> steps;
      int64_t t = 0;
      for (int64_t len : {2, 7, 13, 23}) {
        steps.push_back({q.data() + t * stride, len, first + t, cache.view(), split.data() + t * stride});
        t += len;
      }
      attention(steps, s, pool, isa);
      for (size_t e = 0; e < out.size(); ++e)
        ASSERT_EQ(std::bit_cast<uint32_t>(out[e]), std::bit_cast<uint32_t>(split[e])) << "token " << e / stride;
      if (isa == Isa::Avx2) avx2 = out;
      if (isa == Isa::Avx512) {
        ASSERT_EQ(avx2.size(), out.size()) << "AVX2 runs before AVX-512";
        for (size_t e = 0; e < out.size(); ++e)
          ASSERT_EQ(std::bit_cast<uint32_t>(out[e]), std::bit_cast<uint32_t>(avx2[e])) << "AVX-512 token " << e / stride;
      }
    }
  }
}

}  // namespace
}  // namespace ember::kernels
