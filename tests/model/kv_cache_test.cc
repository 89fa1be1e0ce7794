#include "model/kv_cache.h"

#include <gtest/gtest.h>

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
  KvCache cache(tiny_config(), 4, 2);
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

TEST(KvCache, ForkSharesThenCopiesOnWrite) {
  KvCache cache(tiny_config(), 8, 4);
  KvSequence a(cache);
  a.extend(6);  // blocks: full + half-full
  static_cast<float*>(cache.keys(a.blocks()[1], 0))[0] = 42.0f;
  KvSequence b = a.fork();
  EXPECT_EQ(b.blocks(), a.blocks());
  EXPECT_EQ(cache.free_blocks(), 6);
  b.extend(7);  // writes into the shared half-full block: b gets its own copy
  EXPECT_EQ(b.blocks()[0], a.blocks()[0]);
  EXPECT_NE(b.blocks()[1], a.blocks()[1]);
  EXPECT_EQ(static_cast<float*>(cache.keys(b.blocks()[1], 0))[0], 42.0f);
  EXPECT_EQ(cache.free_blocks(), 5);
}

TEST(KvCache, ExhaustionIsAnErrorAndLeaksNothing) {
  KvCache cache(tiny_config(), 2, 2);
  KvSequence s(cache);
  s.extend(2);
  EXPECT_THROW(s.extend(10), Error);
  EXPECT_EQ(s.length(), 2);
  EXPECT_EQ(cache.free_blocks(), 1);
}

}  // namespace
}  // namespace ember::model
