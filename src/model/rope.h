#pragma once
// The rotary position embedding's angles: cos/sin per position, tabled once and grown on demand.
// Where the angles depend on the sequence's own length (dynamic NTK past the trained context,
// LongRoPE's short and long factors), each sequence's positions get the angles of its length: a
// token's rotation never depends on which other sequences share its batch.
#include <cstdint>
#include <span>
#include <vector>

#include "model/config.h"

namespace ember::model {

class Rope {
 public:
  // The angles of config.rope, or of another of its rope configs (Gemma 3's rope_local).
  explicit Rope(const ModelConfig& config);
  Rope(const ModelConfig& config, const RopeConfig& rope);

  // The factor set a sequence of length seq_len rotates with, where keys cached with one set are
  // wrong under the other: 1 for LongRoPE's long factors (past original_max_position_embeddings),
  // else 0.
  int factor_set(int64_t seq_len) const;

  // The angles of one pass's tokens, computed once for all layers: token t is at position pos[t]
  // of a sequence whose longest position in this pass is seq_len[t] - 1.
  void prepare(std::span<const int64_t> pos, std::span<const int64_t> seq_len);
  // Rotates q ([n_heads][head_dim]) and k ([n_kv_heads][head_dim]) of the pass's token t: the first
  // rope_dim() dims of each head (all of them unless partial_rotary_factor says otherwise).
  void apply(float* q, float* k, size_t t) const;
  // The same for a layer of its own shape (Gemma 4): q_heads and k_heads heads of this rope's head
  // size; k may be null (a layer that reads another's keys rotates only its queries).
  void apply(float* q, int64_t q_heads, float* k, int64_t k_heads, size_t t) const;

 private:
  // One frequency set's cos and sin by position ([pos][half]), times the attention factor.
  struct Table {
    std::vector<double> inv;
    std::vector<float> cos, sin;
    int64_t positions = 0;
  };
  void grow(Table& table, int64_t positions);
  const ModelConfig& c_;
  const RopeConfig& rope_;
  int64_t head_dim_;  // of the heads it rotates: rope.head_dim, else the model's
  int64_t half_;
  Table tables_[2];                         // by factor_set
  int64_t scaled_len_ = 0;                  // the length scaled_inv_ was computed for
  std::vector<double> scaled_inv_;          // dynamic scaling past the trained context
  std::vector<float> scaled_;               // [token][cos half, sin half] of the pass's scaled tokens
  std::vector<const float*> cos_of_, sin_of_;  // per token of the pass
};

}  // namespace ember::model
