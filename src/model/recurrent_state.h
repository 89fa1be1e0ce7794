#pragma once
// A hybrid model's per-sequence recurrent state: for each linear-attention (Gated DeltaNet) layer the
// conv window (the last K-1 conv inputs, [K-1][channels]) and the delta-rule state S ([value
// heads][key_dim][value_dim]). Unlike KV blocks it cannot be cut back to a shorter prefix, so it
// keeps snapshots of itself at block boundaries of the sequence's history (a bounded number, the
// oldest dropped first): a sequence cut back restarts from the deepest one at or below the cut.
#include <cstdint>
#include <memory>
#include <vector>

#include "model/config.h"

namespace ember::model {

struct RecurrentLayout {
  RecurrentLayout() = default;
  explicit RecurrentLayout(const ModelConfig& c);

  std::vector<int64_t> slot;  // per layer: its index among the linear layers, -1 for an attention layer
  int64_t layers = 0;         // linear-attention layers
  int64_t conv_floats = 0, state_floats = 0;  // per linear layer
  // Snapshots a sequence keeps; each holds a whole state (bytes()).
  int64_t snapshot_limit = 8;

  int64_t layer_floats() const { return conv_floats + state_floats; }
  int64_t floats() const { return layers * layer_floats(); }
  int64_t bytes() const { return floats() * static_cast<int64_t>(sizeof(float)); }
};

class RecurrentState {
 public:
  RecurrentState() = default;
  explicit RecurrentState(const RecurrentLayout& layout) : layout_(&layout) {}

  // Whether the model has linear-attention layers (else every call below is a no-op).
  bool active() const { return layout_ != nullptr && layout_->layers > 0; }
  // Layer `layer`'s conv window and S (zeros until first written).
  float* conv(int64_t layer);
  float* matrix(int64_t layer) { return conv(layer) + layout_->conv_floats; }

  // The position whose state this holds (the sequence's length once its passes are done).
  int64_t position() const { return at_; }
  // Before a pass of positions [from, to) that cannot fail any more: makes room for the snapshots at
  // the block boundaries (multiples of `block`) in (from, to] that will be kept, dropping the oldest
  // over the limit; position() becomes `to`.
  void begin_pass(int64_t from, int64_t to, int64_t block);
  // Where layer `layer`'s state after position pos - 1 is to be copied, or null where pos is no kept
  // snapshot of this pass.
  float* snapshot_at(int64_t pos, int64_t layer);

  // Goes back to the deepest snapshot at or below pos (zeros and 0 where there is none), forgetting
  // the later ones; returns the position it holds the state of.
  int64_t restore(int64_t pos);
  // The positions snapshots are held for, ascending.
  std::vector<int64_t> snapshot_positions() const;

 private:
  struct Snapshot {
    int64_t pos;
    std::shared_ptr<std::vector<float>> data;  // shared with forks: written only in the pass that made it
  };
  const RecurrentLayout* layout_ = nullptr;
  int64_t at_ = 0;
  std::vector<float> data_;  // [layers][conv window | S]; empty: all zeros
  std::vector<Snapshot> snaps_;  // ascending positions
};

}  // namespace ember::model
