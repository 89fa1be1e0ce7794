// The GGUF architecture table: every row runs as a model_type of the architecture table, and what the
// row says about the file agrees with what that model_type needs (experts stacked where it has
// experts, fused projections split where it binds them apart, (1 + w) norms stored as 1 + w, the hybrids' linear layers in a layout of their own).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/architecture.h"
#include "model/gguf_architecture.h"

namespace ember::model {
namespace {

std::vector<std::string> gguf_archs() {
  std::vector<std::string> out;
  const std::string all = supported_gguf_architectures();
  for (size_t at = 0; at <= all.size();) {
    const size_t comma = std::min(all.find(", ", at), all.size());
    out.push_back(all.substr(at, comma - at));
    at = comma + 2;
  }
  return out;
}

TEST(GgufArchitectureTable, RowsAgreeWithTheirModelTypes) {
  const std::vector<std::string> archs = gguf_archs();
  ASSERT_FALSE(archs.empty());
  for (const std::string& name : archs) {
    SCOPED_TRACE(name);
    const GgufArchitecture* g = find_gguf_architecture(name);
    ASSERT_NE(g, nullptr);
    ASSERT_NE(g->names, nullptr);
    EXPECT_EQ(g->arch, name);
    for (const std::string_view type : {g->model_type, g->moe_model_type}) {
      if (type.empty()) continue;
      const Architecture* a = find_architecture(type);
      ASSERT_NE(a, nullptr) << type;
      // The (1 + w) norms (Gemma's, the hybrids') are stored as 1 + w.
      EXPECT_EQ(g->norms_stored_plus_one, a->gemma_norms || a->linear != LinearRule::kNone) << type;
      // A hybrid's linear-attention layers are bound in the layout the row names, with its shared expert.
      EXPECT_EQ(g->linear_layout == LinearRule::kNone, a->linear == LinearRule::kNone) << type;
      EXPECT_EQ(a->names->shared_expert.empty(), g->names->shared_expert.empty() || g->moe_model_type.empty()) << type;
      // A default period only where a pattern may be absent (0 there: the pattern key is required).
      if (g->windows != GgufWindows::kPattern) {
        EXPECT_EQ(g->default_period, 0);
      }
      // The model_type a file with experts runs as binds them from the stacked tensors, under names
      // of its own.
      if (a->moe != MoeRule::kNone && type == g->moe_model_type) {
        EXPECT_TRUE(g->stacked_experts) << type;
        EXPECT_FALSE(g->expert_width_key.empty()) << type;
        EXPECT_FALSE(g->names->router.empty()) << type;
      }
      // One the Hugging Face reader binds from fused projections: the GGUF file stores them fused.
      EXPECT_EQ(a->names->fused_qkv.empty(), g->fused_qkv.empty()) << type;
      EXPECT_EQ(a->names->fused_gate_up.empty(), g->fused_gate_up.empty()) << type;
      EXPECT_EQ(a->names->post_attn_norm.empty(), g->names->post_attn_norm.empty()) << type;
    }
    // The model_type of a file without experts has none, or (Gemma 4's) needs none.
    const Architecture* dense = find_architecture(g->model_type);
    ASSERT_NE(dense, nullptr);
    if (g->moe_model_type != g->model_type) {
      EXPECT_TRUE(dense->moe == MoeRule::kNone || dense->moe == MoeRule::kGemma4);
    }
  }
  EXPECT_EQ(find_gguf_architecture("gemma3_text"), nullptr);  // a model_type, not a GGUF arch
}

}  // namespace
}  // namespace ember::model
