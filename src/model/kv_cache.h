#pragma once
// The key/value cache: one pool of fixed-size blocks shared by all sequences. A block holds
// `block_size` positions of every layer. Sequences own block tables; blocks are reference counted so
// that sequences can share a prefix (forks, beams, a common system prompt) and copy a block only
// when they write into a shared one.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/attention.h"
#include "kernels/weight_buffer.h"
#include "model/config.h"
#include "model/recurrent_state.h"

namespace ember::model {

class KvCache {
 public:
  // type: how keys and values are stored (F32; F16/BF16 for half the memory and bandwidth; Q8_0 for
  // about a quarter); attention converts back and computes in float32. Throws ember::Error when the
  // type cannot store this model's head size.
  // Positions per block unless told: small enough that a prefix shared by conversations is reused
  // to within a few tokens.
  static constexpr int64_t kDefaultBlock = 16;
  KvCache(const ModelConfig& config, int64_t n_blocks, int64_t block_size, kernels::KvType type);

  int64_t block_size() const { return block_size_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t capacity_tokens() const { return n_blocks_ * block_size_; }
  kernels::KvType type() const { return type_; }

  int32_t allocate();                // throws ember::Error when the pool is exhausted
  void retain(int32_t block);
  void release(int32_t block);
  int refcount(int32_t block) const { return refs_[block]; }
  void copy_block(int32_t from, int32_t to);

  // Bytes of keys and values of one position over the layers that store them (not those reading
  // another layer's: LayerSpec::kv_source): what a token of context costs.
  static int64_t bytes_per_token(const ModelConfig& config, kernels::KvType type);
  // Bytes of keys and values one token's attention reads at a context of `context` positions: every
  // layer's, where a layer reading another's reads that layer's again and a sliding layer at most its
  // window (what bounds decode speed besides the weights).
  static double bytes_read_per_token(const ModelConfig& config, kernels::KvType type, double context);
  // A hybrid's recurrent state per sequence (0 for other models), and with the snapshots it may keep.
  static int64_t state_bytes(const ModelConfig& config) { return RecurrentLayout(config).bytes(); }
  static int64_t state_bytes_with_snapshots(const ModelConfig& config) {
    const RecurrentLayout layout(config);
    return layout.bytes() * (1 + layout.snapshot_limit);
  }
  const RecurrentLayout& recurrent_layout() const { return recurrent_; }
  // Snapshots of its recurrent state each sequence keeps from now on (a hybrid's; 0: none, so that a
  // sequence cut back always recomputes from its first position).
  void set_snapshot_limit(int64_t n) { recurrent_.snapshot_limit = n; }

 private:
  friend class KvSequence;
  friend class KvBatchView;
  // [n_kv_heads][block_size] rows of type() (see kernels::KvView); a layer that reads another's
  // keys and values gets that layer's.
  uint8_t* keys(int32_t block, int64_t layer) { return base(block, layer); }
  uint8_t* values(int32_t block, int64_t layer) { return base(block, layer) + shape_[layer].stride; }
  uint8_t* base(int32_t block, int64_t layer) { return data_.data() + block * block_stride_ + shape_[layer].offset; }

  // Where one layer's keys (then its values) lie in a block, and their shape.
  struct LayerShape {
    int64_t n_kv_heads, head_dim;
    int64_t row_bytes;  // one kv head at one position
    int64_t stride;     // bytes of keys (or values) of the layer in one block
    int64_t offset;     // of its keys in a block (its source layer's where it reads another's)
  };
  std::vector<LayerShape> shape_;  // per layer
  int64_t block_size_, n_blocks_;
  kernels::KvType type_;
  int64_t block_stride_;
  // The weights' kind of memory (on 2 MiB pages: decode reads a kv head's rows of every block, blocks
  // apart, and on 4 KiB pages each was a TLB miss); pages are touched only when used.
  kernels::WeightBuffer data_;
  std::vector<int> refs_;
  std::vector<int32_t> free_;
  RecurrentLayout recurrent_;
};

// One sequence's positions in a KvCache. Releases its blocks when destroyed.
class KvSequence {
 public:
  explicit KvSequence(KvCache& cache) : cache_(&cache), state_(cache.recurrent_layout()) {}
  ~KvSequence();
  KvSequence(const KvSequence&) = delete;
  KvSequence& operator=(const KvSequence&) = delete;
  KvSequence(KvSequence&& other) noexcept;
  KvSequence& operator=(KvSequence&& other) noexcept;

  int64_t length() const { return length_; }
  KvCache& cache() const { return *cache_; }
  const std::vector<int32_t>& blocks() const { return blocks_; }
  // The token id at each position, as the forward pass recorded it (-1 where none did): what a
  // recomputation of the sequence runs again.
  std::span<const int32_t> tokens() const { return tokens_; }
  void set_tokens(int64_t pos, std::span<const int32_t> ids);
  // The model's factor set the cached keys were rotated with (Rope::factor_set; LongRoPE's long
  // factors past the original context): a sequence whose next length needs another set is recomputed.
  int factor_set() const { return factor_set_; }
  void set_factor_set(int s) { factor_set_ = s; }

  // A new sequence sharing all of this one's positions (no copy until either writes).
  KvSequence fork() const;
  // A new sequence holding the same positions in blocks of its own.
  KvSequence copy() const;
  // Makes positions [length, new_length) writable: allocates blocks and un-shares the block that
  // position `length` falls into. Then length() == new_length.
  void extend(int64_t new_length) { rewrite(length_, new_length); }
  // The same for positions [from, new_length), those already held from `from` on included (to be
  // computed again): every block they fall into that another sequence shares is copied first.
  void rewrite(int64_t from, int64_t new_length);
  // Forgets positions >= new_length (keeps the prefix, e.g. the part of a chat already cached). A
  // hybrid's recurrent state cannot be cut back: its sequence goes back to the deepest snapshot at or
  // below new_length, or to 0, so length() may end below new_length and callers compute from there.
  void truncate(int64_t new_length);
  // The linear-attention layers' state (a hybrid model's), which fork() and copy() carry along.
  RecurrentState& state() { return state_; }
  const RecurrentState& state() const { return state_; }

  // Stores the keys and values of position `pos` (< length()) of `layer`: k and v hold
  // [n_kv_heads][head_dim] floats, converted to the cache's dtype.
  void store(int64_t layer, int64_t pos, const float* k, const float* v);

 private:
  KvCache* cache_;
  std::vector<int32_t> blocks_;
  int64_t length_ = 0;
  std::vector<int32_t> tokens_;  // [length_]
  int factor_set_ = 0;
  RecurrentState state_;
};

}  // namespace ember::model

namespace ember::model {

// The block tables of one layer for the sequences of a batch, as the attention kernel reads them.
class KvBatchView {
 public:
  // A view of `layer` per sequence, valid until the next call.
  std::span<const kernels::KvView> build(std::span<const KvSequence* const> seqs, int64_t layer);

 private:
  std::vector<const void*> k_, v_;
  std::vector<kernels::KvView> views_;
};

}  // namespace ember::model
