#include "model/kv_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"

namespace ember::model {
namespace {

ModelConfig tiny_config() {
  ModelConfig c;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 4;
  return c;
}

TEST(KvCache, ExtendTruncateAndRelease) {
  KvCache cache(tiny_config(), 4, 2, kernels::KvType::F32);
  {
    KvSequence s(cache);
    s.extend(3);
    EXPECT_EQ(s.blocks().size(), 2u);
    EXPECT_EQ(cache.free_blocks(), 2);
    s.truncate(2);
    EXPECT_EQ(s.blocks().size(), 1u);
    EXPECT_EQ(cache.free_blocks(), 3);
  }
  EXPECT_EQ(cache.free_blocks(), 4);
}

// Keys of position `pos`, kv head 0, of `layer` as attention sees them.
float key_at(const KvSequence& s, int64_t layer, int64_t pos) {
  KvBatchView view;
  const KvSequence* seqs[] = {&s};
  const kernels::KvView v = view.build(seqs, layer)[0];
  const auto* block = static_cast<const float*>(v.k_blocks[pos / v.block_size]);
  return block[kernels::kv_row(v.block_size, 0, pos % v.block_size) * tiny_config().head_dim];
}

TEST(KvCache, StoreWritesWhereAttentionReads) {
  const ModelConfig c = tiny_config();
  KvCache cache(c, 8, 4, kernels::KvType::F32);
  KvSequence s(cache);
  s.extend(7);
  std::vector<float> k(static_cast<size_t>(c.kv_dim())), v(k.size());
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer)
    for (int64_t pos = 0; pos < 7; ++pos) {
      k[0] = static_cast<float>(100 * layer + pos);
      s.store(layer, pos, k.data(), v.data());
    }
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer)
    for (int64_t pos = 0; pos < 7; ++pos) EXPECT_EQ(key_at(s, layer, pos), static_cast<float>(100 * layer + pos));
  EXPECT_EQ(KvCache::bytes_per_token(c, kernels::KvType::F32), 2 * c.num_hidden_layers * c.kv_dim() * 4);
  EXPECT_EQ(KvCache::bytes_per_token(c, kernels::KvType::F16), 2 * c.num_hidden_layers * c.kv_dim() * 2);
}

TEST(KvCache, ForkSharesThenCopiesOnWrite) {
  const ModelConfig c = tiny_config();
  KvCache cache(c, 8, 4, kernels::KvType::F32);
  KvSequence a(cache);
  a.extend(6);  // blocks: full + half-full
  std::vector<float> k(static_cast<size_t>(c.kv_dim()), 42.0f), v(k.size());
  a.store(0, 4, k.data(), v.data());
  KvSequence b = a.fork();
  EXPECT_EQ(b.blocks(), a.blocks());
  EXPECT_EQ(cache.free_blocks(), 6);
  b.extend(7);  // writes into the shared half-full block: b gets its own copy
  EXPECT_EQ(b.blocks()[0], a.blocks()[0]);
  EXPECT_NE(b.blocks()[1], a.blocks()[1]);
  EXPECT_EQ(key_at(b, 0, 4), 42.0f);
  EXPECT_EQ(cache.free_blocks(), 5);
}

TEST(KvCache, ExhaustionIsAnErrorAndLeaksNothing) {
  KvCache cache(tiny_config(), 2, 2, kernels::KvType::F32);
  KvSequence s(cache);
  s.extend(2);
  EXPECT_THROW(s.extend(10), Error);
  EXPECT_EQ(s.length(), 2);
  EXPECT_EQ(cache.free_blocks(), 1);
}

// A cache larger than the machine can map: a clear error naming the KV cache and the size (not
// std::bad_alloc, not the weights).
TEST(KvCache, TooLargeIsAClearError) {
  try {
    KvCache cache(tiny_config(), int64_t{1} << 40, 1 << 12, kernels::KvType::F32);
    FAIL() << "the cache was allocated";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("KV cache"), std::string::npos) << what;
    EXPECT_NE(what.find("MiB"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace ember::model
