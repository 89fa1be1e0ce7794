#pragma once
// The parser state of one sequence under a grammar: a set of pushdown stacks (interned, sharing
// their tails) plus a partial UTF-8 character, fed byte by byte. Each distinct state gets an id,
// and its byte transitions and token mask are cached.
//
// A mask is the union over the state's stacks of what each stack allows, and what a stack allows
// mostly depends on its top frames only: tokens that the top kTopFrames frames accept or reject
// without popping the last of them are the same for every stack below. So each distinct top (the
// stack cut below kTopFrames frames) gets its mask once, by a walk of the vocabulary trie pruned at
// the first dead byte, plus the trie nodes where the cut was reached ("boundary" roots); only
// those subtrees are walked again against the whole stack. A new state thus costs a few bitmap ORs
// and short walks, instead of a walk of the whole trie. The cut masks depend only on the grammar
// and the vocabulary, so a MaskCache shares them among all the matchers of a grammar (the choices
// of a request, the requests of one schema).
// Not thread-safe: one Matcher per sequence; the Grammar, Vocabulary and MaskCache are shared.
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sampling/grammar.h"
#include "sampling/grammar_vocabulary.h"

namespace ember::grammar {

// What cut stacks allow, for one grammar and one vocabulary; thread-safe, bounded.
class MaskCache {
 public:
  // The tokens a cut stack accepts before reaching its boundary, and the trie nodes where it
  // reached it (each subtree is to be walked against the whole stack).
  struct Entry {
    std::vector<uint64_t> accepted;
    std::vector<uint32_t> roots;
  };
  // Keyed by the cut's element positions, top first, and whether it was cut at all.
  std::shared_ptr<const Entry> find(const std::vector<uint32_t>& key);
  void insert(const std::vector<uint32_t>& key, std::shared_ptr<const Entry> entry);
  size_t size();

 private:
  std::mutex mu_;
  std::map<std::vector<uint32_t>, std::shared_ptr<const Entry>> entries_;
};

class Matcher {
 public:
  // Without a cache, the matcher keeps its own.
  Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab,
          std::shared_ptr<MaskCache> cache = nullptr);

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
  // Sets the bits of the tokens in trie nodes [begin, end) (whole subtrees) that `state`, the
  // state at begin's parent, accepts. With `roots`, a node whose state holds the boundary frame is
  // recorded there instead and its subtree skipped.
  void walk_trie(int32_t state, uint32_t begin, uint32_t end, std::vector<uint64_t>& mask,
                 std::vector<uint32_t>* roots);
  // The stack `st` cut below its top kTopFrames frames (st itself when it is no deeper).
  uint32_t cut(uint32_t st);
  // What the cut stack (its lowest frame's parent is the boundary) allows, from the cache or walked.
  std::shared_ptr<const MaskCache::Entry> cut_mask(uint32_t cut_frame);
  // Adds what stack `st` allows to mask.
  void add_stack_mask(uint32_t st, std::vector<uint64_t>& mask);
  void reset_caches();  // bounds the memory a long generation can hold

  std::shared_ptr<const Grammar> g_;
  std::array<uint8_t, 128> ascii_rep_;  // the first ASCII byte every character class treats alike
  std::shared_ptr<const Vocabulary> vocab_;
  std::vector<Frame> frames_;
  std::unordered_map<uint64_t, uint32_t> frame_ids_;
  std::vector<State> states_;
  std::unordered_multimap<uint64_t, int32_t> state_ids_;  // by hash of the state
  std::vector<int32_t> trans_;        // states × 256
  std::vector<int32_t> mask_of_;      // per state: index into masks_, or -1
  std::vector<uint8_t> at_boundary_;  // per state: holds the boundary frame (a cut stack reached it)
  std::vector<std::vector<uint64_t>> masks_;
  std::shared_ptr<MaskCache> cache_;
  std::unordered_map<uint32_t, std::shared_ptr<const MaskCache::Entry>> cut_masks_;  // by cut frame
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
