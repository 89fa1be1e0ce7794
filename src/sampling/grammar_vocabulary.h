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

  // The trie, one entry per node in preorder; the root (the empty prefix) is implicit. One array of
  // small records: a mask walks it front to back, so each node is one sequential read.
  struct Node {
    uint32_t skip;    // first node after the subtree
    uint32_t tokens;  // the ids ending here are node_tokens()[tokens, next node's tokens)
    uint16_t depth;   // 1 for the root's children
    uint8_t byte;
  };
  size_t nodes() const { return nodes_.size() - 1; }
  const Node* node_data() const { return nodes_.data(); }  // nodes() + 1 entries: a last one ends the tokens
  const int32_t* node_tokens() const { return tokens_.data(); }
  size_t max_depth() const { return max_depth_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<uint8_t> usable_;
  std::vector<Node> nodes_;
  std::vector<int32_t> tokens_;
  size_t max_depth_ = 0;
};

}  // namespace ember::grammar
