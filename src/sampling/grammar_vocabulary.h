#pragma once
// A tokenizer's vocabulary as the grammar sees it: each token's bytes, and a prefix tree of them in
// preorder (a node's subtree is the run of nodes up to its `skip`), walked against a parser state
// to find the allowed tokens. Immutable: build once per tokenizer, share across sequences/threads.
#include <cstdint>
#include <string>
#include <vector>

namespace ember::grammar {

class Vocabulary {
 public:
  // token_bytes[id]: the bytes token `id` adds to the text. `control[id]`: a special token no
  // grammar allows (end-of-sequence tokens are handled by the caller). Empty tokens are never allowed.
  Vocabulary(std::vector<std::string> token_bytes, const std::vector<bool>& control);

  size_t size() const { return bytes_.size(); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  bool usable(int32_t id) const { return usable_[static_cast<size_t>(id)] != 0; }

  // The trie, one entry per node in preorder; the root (the empty prefix) is implicit.
  size_t nodes() const { return byte_.size(); }
  const uint8_t* node_byte() const { return byte_.data(); }
  const uint16_t* node_depth() const { return depth_.data(); }  // 1 for the root's children
  const uint32_t* node_skip() const { return skip_.data(); }    // first node after the subtree
  const uint32_t* node_token_offsets() const { return token_off_.data(); }  // nodes() + 1 entries
  const int32_t* node_tokens() const { return tokens_.data(); }  // the ids ending at each node
  size_t max_depth() const { return max_depth_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<uint8_t> usable_;
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<uint32_t> skip_, token_off_;
  std::vector<int32_t> tokens_;
  size_t max_depth_ = 0;
};

}  // namespace ember::grammar
