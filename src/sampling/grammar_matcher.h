#pragma once
// The parser state of one sequence under a grammar: a set of pushdown stacks (interned, sharing
// their tails) plus a partial UTF-8 character, fed byte by byte. Each distinct state gets an id,
// its byte transitions and its token mask are cached, so a mask is a walk of the vocabulary trie
// with one table lookup per node, pruned at the first dead byte, and free when the state recurs.
// Not thread-safe: one Matcher per sequence; the Grammar and Vocabulary are shared.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sampling/grammar.h"
#include "sampling/grammar_vocabulary.h"

namespace ember::grammar {

class Matcher {
 public:
  Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab);

  // Feeds a token's bytes; returns false (and changes nothing) if they leave the grammar.
  bool accept_token(int32_t id);
  bool accept_bytes(std::string_view bytes);
  // Whether `bytes` could be fed now (the state stays as it is).
  bool can_accept(std::string_view bytes);
  // The text so far is a whole sentence of the grammar (an end-of-sequence token may come now).
  bool complete() const;
  // Some byte may still follow.
  bool can_continue() const;
  // Bit `id` set: the token's bytes keep the text inside the grammar (control tokens never).
  // Valid until the next call on this matcher.
  const std::vector<uint64_t>& allowed();

  const Vocabulary& vocabulary() const { return *vocab_; }

 private:
  struct Frame {
    uint32_t pos;    // kChars element to match (a stack top) or where to go on after a rule
    int32_t parent;  // the frame below, -1 at the bottom
  };
  struct State {
    uint32_t cp;   // bits of the partial UTF-8 character
    uint8_t need;  // continuation bytes it still needs
    uint8_t len;   // its length in bytes
    std::vector<uint32_t> stacks;  // sorted frame ids; frame 0 is "the root rule has ended"
  };
  static constexpr int32_t kDead = -1, kUnknown = -2;

  int32_t start_state();
  int32_t intern(State s);
  uint32_t frame(uint32_t pos, int32_t parent);
  void expand(uint32_t pos, int32_t parent, std::vector<uint32_t>& out);
  int32_t compute(int32_t state, uint8_t byte);
  int32_t next(int32_t state, uint8_t byte) {
    const int32_t t = trans_[static_cast<size_t>(state) * 256 + byte];
    return t != kUnknown ? t : compute(state, byte);
  }
  int32_t walk(int32_t state, std::string_view bytes);
  void reset_caches();  // bounds the memory a long generation can hold

  std::shared_ptr<const Grammar> g_;
  std::shared_ptr<const Vocabulary> vocab_;
  std::vector<Frame> frames_;
  std::unordered_map<uint64_t, uint32_t> frame_ids_;
  std::vector<State> states_;
  std::unordered_multimap<uint64_t, int32_t> state_ids_;  // by hash of the state
  std::vector<int32_t> trans_;        // states × 256
  std::vector<int32_t> mask_of_;      // per state: index into masks_, or -1
  std::vector<std::vector<uint64_t>> masks_;
  std::vector<int32_t> walk_stack_;   // per trie depth
  // expand's visited (pos, parent) pairs: open addressing, cleared through the slots it used.
  struct VisitedPairs {
    std::vector<uint64_t> slots = std::vector<uint64_t>(256, 0);
    std::vector<uint32_t> used;
    bool insert(uint64_t key);  // key != 0; false if present
    void clear();
  };
  VisitedPairs seen_;
  int32_t current_;
};

}  // namespace ember::grammar
