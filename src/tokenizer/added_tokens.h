#pragma once
// Added tokens (tokenizer.json "added_tokens"): found in the input before normalization
// (normalized: false) or in each normalized piece (normalized: true), leftmost-longest, with
// lstrip, rstrip and single_word honoured as Hugging Face's AddedVocabulary does.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/normalizers.h"
#include "tokenizer/piece.h"

namespace ember::tokenizer {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = true;
};

// Leftmost-longest multi-pattern matcher over bytes.
class TokenTrie {
 public:
  void insert(std::string_view key, int32_t value);
  // The value and length of the longest key that starts at s[pos], or {-1, 0}.
  std::pair<int32_t, size_t> longest_at(std::string_view s, size_t pos) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // byte, node index
    int32_t value = -1;
  };
  std::vector<Node> nodes_{Node{}};
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // `normalizer` normalizes the contents of normalized tokens; it may be null.
  AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer);

  // Cuts `text` into added tokens and normalized pieces (Hugging Face extract_and_normalize).
  std::vector<Piece> extract_and_normalize(std::string_view text, const Normalizer* normalizer) const;

  const AddedToken* find(int32_t id) const;
  const AddedToken* find(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  void split(std::vector<Piece>& out, Piece piece, const TokenTrie& trie) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  TokenTrie raw_trie_, normalized_trie_;  // values: index into tokens_
};

}  // namespace ember::tokenizer
