#include "sampling/grammar_matcher.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace ember::grammar {

namespace {
constexpr uint32_t kAcceptPos = 0xFFFFFFFFu, kBoundaryPos = 0xFFFFFFFEu;
// Frame 0: the root rule has ended. Frame 1: a cut stack's boundary (what lies below is unknown).
constexpr uint32_t kAcceptFrame = 0, kBoundaryFrame = 1;
constexpr int32_t kBoundaryParent = -2;  // the parent of a cut stack's lowest frame
// Frames a cut stack keeps: deep enough that a string, a number or a list item stays inside
// them (the boundary is rarely reached), shallow enough that stacks deeper in the same kind of
// value share their cut.
constexpr int kTopFrames = 4;
constexpr size_t kMaxStates = 8192;  // × 1 KiB of transitions each
constexpr size_t kMaxMasks = 64;
constexpr size_t kMaxCutMasks = 1024;  // × one bit per token each: 19 MB on a 150k vocabulary
constexpr uint32_t kAnyCp = 0xFFFFFFFFu;  // a partial character whose exact bits no longer matter

uint64_t state_hash(uint32_t cp, uint8_t need, uint8_t len, const std::vector<uint32_t>& stacks) {
  uint64_t h = (static_cast<uint64_t>(cp) << 16) ^ (static_cast<uint64_t>(need) << 8) ^ len;
  for (const uint32_t st : stacks) h = (h ^ st) * 0x9E3779B97F4A7C15ull, h ^= h >> 29;
  return h;
}
}  // namespace

std::shared_ptr<const MaskCache::Entry> MaskCache::find(const std::vector<uint32_t>& key) {
  std::lock_guard lock(mu_);
  const auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second;
}

void MaskCache::insert(const std::vector<uint32_t>& key, std::shared_ptr<const Entry> entry) {
  std::lock_guard lock(mu_);
  if (entries_.size() >= kMaxCutMasks) entries_.clear();  // matchers keep the entries they hold
  entries_.emplace(key, std::move(entry));
}

size_t MaskCache::size() {
  std::lock_guard lock(mu_);
  return entries_.size();
}

Matcher::Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab,
                 std::shared_ptr<MaskCache> cache)
    : g_(std::move(grammar)), vocab_(std::move(vocab)), cache_(cache ? std::move(cache) : std::make_shared<MaskCache>()) {
  frames_.push_back({kAcceptPos, -1});
  frames_.push_back({kBoundaryPos, -1});
  // ASCII bytes that every character class of the grammar treats alike lead to the same state.
  std::map<std::vector<bool>, uint8_t> rep_of;
  for (uint32_t b = 0; b < 0x80; ++b) {
    std::vector<bool> in;
    for (const CharSet& set : g_->sets()) in.push_back(set.contains(b));
    ascii_rep_[b] = rep_of.try_emplace(std::move(in), static_cast<uint8_t>(b)).first->second;
  }
  walk_stack_.resize(vocab_->max_depth() + 1);
  current_ = start_state();
}

uint32_t Matcher::frame(uint32_t pos, int32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(pos) << 32) | static_cast<uint32_t>(parent + 1);
  const auto [it, fresh] = frame_ids_.try_emplace(key, static_cast<uint32_t>(frames_.size()));
  if (fresh) frames_.push_back({pos, parent});
  return it->second;
}

void Matcher::expand(uint32_t pos, int32_t parent, std::vector<uint32_t>& out) {
  if (!seen_.insert((static_cast<uint64_t>(pos + 1) << 32) | static_cast<uint32_t>(parent + 1))) return;
  const auto& elems = g_->elements();
  const Element e = elems[pos];
  switch (e.kind) {
    case Element::kEnd:
      if (parent == -1) {
        out.push_back(kAcceptFrame);
      } else if (parent == kBoundaryParent) {
        out.push_back(kBoundaryFrame);
      } else {
        const Frame f = frames_[static_cast<size_t>(parent)];
        expand(f.pos, f.parent, out);
      }
      return;
    case Element::kChars: out.push_back(frame(pos, parent)); return;
    case Element::kRef: {
      // A rule that ends its alternative returns straight to our caller: no frame (tail call), so
      // right recursion (repetition) does not grow the stack.
      const int32_t back = elems[pos + 1].kind == Element::kEnd ? parent : static_cast<int32_t>(frame(pos + 1, parent));
      for (const uint32_t alt : g_->rules()[e.index].alternatives) expand(alt, back, out);
      return;
    }
  }
}

bool Matcher::VisitedPairs::insert(uint64_t key) {
  if (used.size() * 2 >= slots.size()) {  // grow: rehash the keys in use
    std::vector<uint64_t> keys;
    for (const uint32_t i : used) keys.push_back(slots[i]);
    slots.assign(slots.size() * 2, 0);
    used.clear();
    for (const uint64_t k : keys) insert(k);
  }
  const size_t mask = slots.size() - 1;
  for (size_t i = (key * 0x9E3779B97F4A7C15ull) >> 40 & mask;; i = (i + 1) & mask) {
    if (slots[i] == key) return false;
    if (slots[i] == 0) {
      slots[i] = key;
      used.push_back(static_cast<uint32_t>(i));
      return true;
    }
  }
}

void Matcher::VisitedPairs::clear() {
  for (const uint32_t i : used) slots[i] = 0;
  used.clear();
}

int32_t Matcher::intern(State s) {
  std::sort(s.stacks.begin(), s.stacks.end());
  s.stacks.erase(std::unique(s.stacks.begin(), s.stacks.end()), s.stacks.end());
  if (s.stacks.empty()) return kDead;
  const uint64_t h = state_hash(s.cp, s.need, s.len, s.stacks);
  for (auto [it, last] = state_ids_.equal_range(h); it != last; ++it) {
    const State& o = states_[static_cast<size_t>(it->second)];
    if (o.cp == s.cp && o.need == s.need && o.len == s.len && o.stacks == s.stacks) return it->second;
  }
  const auto id = static_cast<int32_t>(states_.size());
  state_ids_.emplace(h, id);
  states_.push_back(std::move(s));
  trans_.resize(trans_.size() + 256, kUnknown);
  mask_of_.push_back(-1);
  const std::vector<uint32_t>& st = states_.back().stacks;
  at_boundary_.push_back(std::binary_search(st.begin(), st.end(), kBoundaryFrame) ? 1 : 0);
  return id;
}

int32_t Matcher::start_state() {
  State s{0, 0, 0, {}};
  seen_.clear();
  for (const uint32_t alt : g_->rules()[g_->root()].alternatives) expand(alt, -1, s.stacks);
  const int32_t id = intern(std::move(s));
  if (id == kDead) fail("grammar", "the root rule matches nothing");
  return id;
}

int32_t Matcher::compute(int32_t state, uint8_t b) {
  if (b < 0x80 && ascii_rep_[b] != b && states_[static_cast<size_t>(state)].need == 0) {
    const int32_t same = next(state, ascii_rep_[b]);
    trans_[static_cast<size_t>(state) * 256 + b] = same;
    return same;
  }
  const State& from = states_[static_cast<size_t>(state)];
  uint32_t cp = 0;
  uint8_t need = 0xFF, len = 0;  // need 0xFF: not UTF-8
  int32_t result = kDead;
  if (from.need == 0) {
    if (b < 0x80) cp = b, need = 0, len = 1;
    else if ((b >> 5) == 0x6) cp = b & 0x1F, need = 1, len = 2;
    else if ((b >> 4) == 0xE) cp = b & 0x0F, need = 2, len = 3;
    else if ((b >> 3) == 0x1E) cp = b & 0x07, need = 3, len = 4;
  } else if ((b >> 6) == 2) {
    cp = from.cp == kAnyCp ? kAnyCp : (from.cp << 6) | (b & 0x3F);
    need = static_cast<uint8_t>(from.need - 1), len = from.len;
  }
  if (need != 0xFF) {
    State to{cp, need, len, {}};
    const auto& elems = g_->elements();
    const auto& sets = g_->sets();
    // The code points this character can still become: no overlong form, no surrogate.
    static constexpr char32_t kMinOfLength[5] = {0, 0, 0x80, 0x800, 0x10000};
    const char32_t lo = std::max<char32_t>(cp << (6 * need), kMinOfLength[len]);
    const char32_t hi_raw = (cp << (6 * need)) | ((1u << (6 * need)) - 1);
    const char32_t hi = std::min<char32_t>(hi_raw, 0x10FFFF);
    const auto viable = [&](const CharSet& set) {
      if (lo > hi) return false;
      if (hi < 0xD800 || lo > 0xDFFF) return set.intersects(lo, hi);
      return (lo < 0xD800 && set.intersects(lo, 0xD7FF)) || (hi > 0xDFFF && set.intersects(0xE000, hi));
    };
    if (cp == kAnyCp) {  // every completion is valid for every stack (see below)
      if (need > 0) {
        to.stacks = from.stacks;
      } else {
        seen_.clear();  // expand grows frames_, never states_: `from` stays valid
        for (const uint32_t st : from.stacks) expand(frames_[st].pos + 1, frames_[st].parent, to.stacks);
      }
    } else if (need > 0) {  // keep the stacks whose class holds some character with this prefix
      bool all_cover = true;
      for (const uint32_t st : from.stacks)
        if (st > kBoundaryFrame && viable(sets[elems[frames_[st].pos].index])) {
          to.stacks.push_back(st);
          all_cover = all_cover && sets[elems[frames_[st].pos].index].covers(cp << (6 * need), hi_raw);
        }
      // When every completion of the prefix is a valid character that every stack takes, the prefix
      // itself no longer matters: one state for all of them keeps the number of states small.
      const char32_t lo_raw = cp << (6 * need);
      if (all_cover && lo_raw >= kMinOfLength[len] && hi_raw <= 0x10FFFF && (hi_raw < 0xD800 || lo_raw > 0xDFFF))
        to.cp = kAnyCp;
    } else if (viable(CharSet{{{0, 0x10FFFF}}, false})) {
      seen_.clear();
      for (const uint32_t st : from.stacks) {
        if (st <= kBoundaryFrame) continue;  // neither takes a byte
        const Frame f = frames_[st];
        if (sets[elems[f.pos].index].contains(cp)) expand(f.pos + 1, f.parent, to.stacks);
      }
    }
    result = intern(std::move(to));
  }
  trans_[static_cast<size_t>(state) * 256 + b] = result;
  return result;
}

int32_t Matcher::walk(int32_t state, std::string_view bytes) {
  for (const char c : bytes) {
    state = next(state, static_cast<uint8_t>(c));
    if (state < 0) return kDead;
  }
  return state;
}

void Matcher::reset_caches() {
  if (states_.size() <= kMaxStates) return;
  State cur = states_[static_cast<size_t>(current_)];
  states_.clear();
  state_ids_.clear();
  trans_.clear();
  mask_of_.clear();
  at_boundary_.clear();
  masks_.clear();
  current_ = intern(std::move(cur));
}

bool Matcher::accept_bytes(std::string_view bytes) {
  reset_caches();
  const int32_t s = walk(current_, bytes);
  if (s < 0) return false;
  current_ = s;
  return true;
}

bool Matcher::can_accept(std::string_view bytes) { return walk(current_, bytes) >= 0; }

bool Matcher::accept_token(int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= vocab_->size() || !vocab_->usable(id)) return false;
  return accept_bytes(vocab_->bytes(id));
}

bool Matcher::complete() const {
  const State& s = states_[static_cast<size_t>(current_)];
  return s.need == 0 && s.stacks.front() == 0;
}

bool Matcher::can_continue() const {
  const State& s = states_[static_cast<size_t>(current_)];
  return s.stacks.back() != 0;
}

void Matcher::walk_trie(int32_t state, uint32_t begin, uint32_t end, std::vector<uint64_t>& mask,
                        std::vector<uint32_t>* roots) {
  if (begin >= end) return;
  const Vocabulary::Node* node = vocab_->node_data();
  const int32_t* toks = vocab_->node_tokens();
  int32_t* st = walk_stack_.data();
  st[node[begin].depth - 1] = state;
  for (uint32_t i = begin; i < end;) {
    const Vocabulary::Node& nd = node[i];
    const int32_t t = next(st[nd.depth - 1], nd.byte);
    if (t < 0 || (roots && at_boundary_[static_cast<size_t>(t)])) {
      if (t >= 0) roots->push_back(i);
      i = nd.skip;
      continue;
    }
    st[nd.depth] = t;
    for (uint32_t k = nd.tokens, e = node[i + 1].tokens; k < e; ++k) {
      const auto id = static_cast<uint32_t>(toks[k]);
      mask[id >> 6] |= uint64_t{1} << (id & 63);
    }
    ++i;
  }
}

uint32_t Matcher::cut(uint32_t st) {
  uint32_t pos[kTopFrames];
  int n = 0;
  auto f = static_cast<int32_t>(st);
  for (; f >= 0 && n < kTopFrames; f = frames_[static_cast<size_t>(f)].parent) pos[n++] = frames_[static_cast<size_t>(f)].pos;
  if (f < 0) return st;  // no deeper than the cut: the mask is exact
  int32_t below = kBoundaryParent;
  while (n > 0) below = static_cast<int32_t>(frame(pos[--n], below));
  return static_cast<uint32_t>(below);
}

std::shared_ptr<const MaskCache::Entry> Matcher::cut_mask(uint32_t cut_frame) {
  if (const auto it = cut_masks_.find(cut_frame); it != cut_masks_.end()) return it->second;
  std::vector<uint32_t> key;
  int32_t f = static_cast<int32_t>(cut_frame);
  for (; f >= 0; f = frames_[static_cast<size_t>(f)].parent) key.push_back(frames_[static_cast<size_t>(f)].pos);
  key.push_back(f == kBoundaryParent ? kBoundaryPos : kAcceptPos);
  std::shared_ptr<const MaskCache::Entry> entry = cache_->find(key);
  if (!entry) {
    MaskCache::Entry e{std::vector<uint64_t>((vocab_->size() + 63) / 64, 0), {}};
    const int32_t from = intern(State{0, 0, 0, {cut_frame}});
    walk_trie(from, 0, static_cast<uint32_t>(vocab_->nodes()), e.accepted, &e.roots);
    entry = std::make_shared<const MaskCache::Entry>(std::move(e));
    cache_->insert(key, entry);
  }
  if (cut_masks_.size() >= kMaxCutMasks) cut_masks_.clear();
  cut_masks_.emplace(cut_frame, entry);
  return entry;
}

void Matcher::add_stack_mask(uint32_t st, std::vector<uint64_t>& mask) {
  const std::shared_ptr<const MaskCache::Entry> top = cut_mask(cut(st));
  for (size_t w = 0; w < mask.size(); ++w) mask[w] |= top->accepted[w];
  if (top->roots.empty()) return;
  // The boundary subtrees, against the whole stack: the bytes down to each root's parent, then the
  // subtree. Any token under a root starts with the root's path.
  const std::vector<uint32_t>& roots = top->roots;
  const int32_t whole = intern(State{0, 0, 0, {st}});
  const Vocabulary::Node* node = vocab_->node_data();
  for (const uint32_t r : roots) {
    const std::string& path = vocab_->bytes(vocab_->node_tokens()[node[r].tokens]);
    const int32_t s = walk(whole, std::string_view(path).substr(0, node[r].depth - 1u));
    if (s >= 0) walk_trie(s, r, node[r].skip, mask, nullptr);
  }
}

const std::vector<uint64_t>& Matcher::allowed() {
  reset_caches();
  const int32_t cached = mask_of_[static_cast<size_t>(current_)];
  if (cached >= 0) return masks_[static_cast<size_t>(cached)];
  if (masks_.size() >= kMaxMasks) {
    masks_.clear();
    std::fill(mask_of_.begin(), mask_of_.end(), -1);
  }
  std::vector<uint64_t> mask((vocab_->size() + 63) / 64, 0);
  const int32_t here = current_;
  if (vocab_->nodes() > 0) {
    if (states_[static_cast<size_t>(here)].need != 0) {
      walk_trie(here, 0, static_cast<uint32_t>(vocab_->nodes()), mask, nullptr);  // inside a character: rare
    } else {
      const std::vector<uint32_t> stacks = states_[static_cast<size_t>(here)].stacks;  // interning moves states_
      for (const uint32_t st : stacks)
        if (st != kAcceptFrame) add_stack_mask(st, mask);
    }
  }
  mask_of_[static_cast<size_t>(here)] = static_cast<int32_t>(masks_.size());
  masks_.push_back(std::move(mask));
  return masks_.back();
}

}  // namespace ember::grammar
