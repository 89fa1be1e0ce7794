#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/error.h"

namespace ember::model {

int64_t KvCache::bytes_per_token(const ModelConfig& c, kernels::KvType type) {
  int64_t total = 0;
  for (size_t l = 0; l < static_cast<size_t>(c.num_hidden_layers); ++l)
    if (c.stores_kv(l)) total += 2 * c.kv_heads_of(l) * kernels::kv_row_bytes(type, c.head_dim_of(l));
  return total;
}

double KvCache::bytes_read_per_token(const ModelConfig& c, kernels::KvType type, double context) {
  double total = 0;
  for (size_t l = 0; l < static_cast<size_t>(c.num_hidden_layers); ++l) {
    if (l < c.layers.size() && c.layers[l].kind != LayerKind::kAttention) continue;  // a linear layer reads its state
    const int64_t window = l < c.layers.size() ? c.layers[l].sliding_window : 0;
    const double positions = window > 0 ? std::min(context, static_cast<double>(window)) : context;
    total += static_cast<double>(2 * c.kv_heads_of(l) * kernels::kv_row_bytes(type, c.head_dim_of(l))) * positions;
  }
  return total;
}

KvCache::KvCache(const ModelConfig& c, int64_t n_blocks, int64_t block_size, kernels::KvType type)
    : block_size_(block_size), n_blocks_(n_blocks), type_(type), block_stride_(0) {
  if (n_blocks <= 0 || block_size <= 0) fail("KV cache", "needs at least one block of at least one position");
  for (size_t l = 0; l < static_cast<size_t>(c.num_hidden_layers); ++l) {
    const int64_t heads = c.kv_heads_of(l), dim = c.head_dim_of(l), row = kernels::kv_row_bytes(type, dim);
    if (l < c.layers.size() && c.layers[l].kind != LayerKind::kAttention) {  // a linear layer: its state is apart
      shape_.push_back(LayerShape{});
      continue;
    }
    const int64_t source = c.kv_layer_of(l);
    if (source > static_cast<int64_t>(l)) fail("KV cache", "layer " + std::to_string(l) + " reads the keys of a later layer");
    if (source < static_cast<int64_t>(l)) {  // the source's place, whose shape this layer has
      shape_.push_back(shape_[static_cast<size_t>(source)]);
      continue;
    }
    shape_.push_back(LayerShape{heads, dim, row, block_size_ * heads * row, block_stride_});
    block_stride_ += 2 * shape_.back().stride;
  }
  recurrent_ = RecurrentLayout(c);
  data_ = kernels::WeightBuffer(n_blocks_ * block_stride_, "KV cache");
  refs_.assign(static_cast<size_t>(n_blocks_), 0);
  free_.reserve(static_cast<size_t>(n_blocks_));
  for (int64_t b = n_blocks_ - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

int32_t KvCache::allocate() {
  if (free_.empty())
    fail("KV cache", "out of memory: all " + std::to_string(n_blocks_) + " blocks of " + std::to_string(block_size_) +
                         " positions are in use (raise the context size)");
  const int32_t b = free_.back();
  free_.pop_back();
  refs_[b] = 1;
  return b;
}

void KvCache::retain(int32_t block) { ++refs_[block]; }

void KvCache::release(int32_t block) {
  if (--refs_[block] == 0) free_.push_back(block);
}

void KvCache::copy_block(int32_t from, int32_t to) {
  std::memcpy(data_.data() + to * block_stride_, data_.data() + from * block_stride_,
              static_cast<size_t>(block_stride_));
}

KvSequence::~KvSequence() {
  if (cache_ != nullptr)
    for (int32_t b : blocks_) cache_->release(b);
}

KvSequence::KvSequence(KvSequence&& other) noexcept
    : cache_(std::exchange(other.cache_, nullptr)), blocks_(std::move(other.blocks_)),
      length_(std::exchange(other.length_, 0)), tokens_(std::move(other.tokens_)),
      factor_set_(std::exchange(other.factor_set_, 0)), state_(std::move(other.state_)) {}

KvSequence& KvSequence::operator=(KvSequence&& other) noexcept {
  if (this != &other) {
    if (cache_ != nullptr)
      for (int32_t b : blocks_) cache_->release(b);
    cache_ = std::exchange(other.cache_, nullptr);
    blocks_ = std::move(other.blocks_);
    length_ = std::exchange(other.length_, 0);
    tokens_ = std::move(other.tokens_);
    factor_set_ = std::exchange(other.factor_set_, 0);
    state_ = std::move(other.state_);
  }
  return *this;
}

KvSequence KvSequence::fork() const {
  KvSequence s(*cache_);
  s.blocks_ = blocks_;
  s.length_ = length_;
  s.tokens_ = tokens_;
  s.factor_set_ = factor_set_;
  s.state_ = state_;
  for (int32_t b : blocks_) cache_->retain(b);
  return s;
}

KvSequence KvSequence::copy() const {
  KvSequence s(*cache_);
  s.extend(length_);
  for (size_t b = 0; b < blocks_.size(); ++b) cache_->copy_block(blocks_[b], s.blocks_[b]);
  s.tokens_ = tokens_;
  s.factor_set_ = factor_set_;
  s.state_ = state_;
  return s;
}

void KvSequence::set_tokens(int64_t pos, std::span<const int32_t> ids) {
  std::copy(ids.begin(), ids.end(), tokens_.begin() + pos);
}

void KvSequence::rewrite(int64_t from, int64_t new_length) {
  if (new_length <= from) return;
  const int64_t bs = cache_->block_size();
  // Held blocks that will be written: copy those another sequence shares (a copy holds the same
  // values, so a failure part way leaves the sequence as it was).
  for (size_t b = static_cast<size_t>(from / bs); b < blocks_.size() && static_cast<int64_t>(b) * bs < length_; ++b)
    if (cache_->refcount(blocks_[b]) > 1) {
      const int32_t copy = cache_->allocate();
      cache_->copy_block(blocks_[b], copy);
      cache_->release(blocks_[b]);
      blocks_[b] = copy;
    }
  const size_t needed = static_cast<size_t>((new_length + bs - 1) / bs);
  while (blocks_.size() < needed) {
    try {
      blocks_.push_back(cache_->allocate());
    } catch (...) {
      truncate(length_);  // give back what this call took
      throw;
    }
  }
  length_ = std::max(length_, new_length);
  tokens_.resize(static_cast<size_t>(length_), -1);
}

void KvSequence::truncate(int64_t new_length) {
  new_length = std::clamp<int64_t>(new_length, 0, length_);
  if (state_.active() && new_length < state_.position()) new_length = state_.restore(new_length);
  const int64_t bs = cache_->block_size();
  const size_t keep = static_cast<size_t>((new_length + bs - 1) / bs);
  while (blocks_.size() > keep) {
    cache_->release(blocks_.back());
    blocks_.pop_back();
  }
  length_ = new_length;
  tokens_.resize(static_cast<size_t>(length_));
}

void KvSequence::store(int64_t layer, int64_t pos, const float* k, const float* v) {
  KvCache& c = *cache_;
  const int32_t block = blocks_[static_cast<size_t>(pos / c.block_size_)];
  const int64_t slot = pos % c.block_size_;
  uint8_t* kb = c.keys(block, layer);
  uint8_t* vb = c.values(block, layer);
  const KvCache::LayerShape& s = c.shape_[static_cast<size_t>(layer)];
  for (int64_t h = 0; h < s.n_kv_heads; ++h) {  // head-major blocks (kernels::KvView)
    const int64_t at = kernels::kv_row(c.block_size_, h, slot) * s.row_bytes;
    kernels::store_kv_row(k + h * s.head_dim, s.head_dim, c.type_, kb + at);
    kernels::store_kv_row(v + h * s.head_dim, s.head_dim, c.type_, vb + at);
  }
}

std::span<const kernels::KvView> KvBatchView::build(std::span<const KvSequence* const> seqs, int64_t layer) {
  k_.clear();
  v_.clear();
  for (const KvSequence* s : seqs)
    for (int32_t b : s->blocks()) {
      k_.push_back(s->cache().keys(b, layer));
      v_.push_back(s->cache().values(b, layer));
    }
  views_.clear();
  size_t at = 0;  // the tables are complete: pointers into them stay valid
  for (const KvSequence* s : seqs) {
    views_.push_back(kernels::KvView{k_.data() + at, v_.data() + at, s->cache().block_size(), s->cache().type()});
    at += s->blocks().size();
  }
  return views_;
}

}  // namespace ember::model
