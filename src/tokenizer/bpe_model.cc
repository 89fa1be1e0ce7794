#include "tokenizer/bpe_model.h"

#include <cstdio>
#include <queue>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace ember::tokenizer {

namespace {
const std::string kWhere = "model";

std::optional<std::string> optional_string(const json& model, const char* key) {
  if (!model.contains(key) || model[key].is_null()) return std::nullopt;
  return field<std::string>(model, key, kWhere);
}
}  // namespace

BpeModel::BpeModel(const json& model) {
  const std::string type = component_type(model, kWhere);
  if (type != "BPE") unsupported(kWhere, type);
  if (field_or<double>(model, "dropout", 0.0, kWhere) != 0.0)
    fail("tokenizer.json", "model.dropout: BPE dropout is not supported by Ember");
  const json& vocab = field<json>(model, "vocab", kWhere);
  if (!vocab.is_object()) fail("tokenizer.json", "model.vocab: expected an object");
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxVocabSize)
      fail("tokenizer.json", "model.vocab[\"" + token + "\"]: expected an integer id from 0 to " +
                                 std::to_string(kMaxVocabSize - 1));
    const auto i = id.get<int32_t>();
    vocab_[token] = i;
    max_id = std::max(max_id, i);
  }
  id_to_token_.resize(static_cast<size_t>(max_id + 1));
  has_id_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [token, id] : vocab_) {
    id_to_token_[static_cast<size_t>(id)] = token;
    has_id_[static_cast<size_t>(id)] = true;
  }

  unk_token_ = optional_string(model, "unk_token");
  continuing_subword_prefix_ = optional_string(model, "continuing_subword_prefix");
  end_of_word_suffix_ = optional_string(model, "end_of_word_suffix");
  byte_fallback_ = field_or<bool>(model, "byte_fallback", false, kWhere);
  fuse_unk_ = field_or<bool>(model, "fuse_unk", false, kWhere);
  ignore_merges_ = field_or<bool>(model, "ignore_merges", false, kWhere);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    const auto it = vocab_.find(std::string_view(name));
    byte_ids_[static_cast<size_t>(b)] = it == vocab_.end() ? -1 : it->second;
  }

  const json merges = field_or<json>(model, "merges", json::array(), kWhere);
  if (!merges.is_array()) fail("tokenizer.json", "model.merges: expected an array");
  const size_t prefix_len = continuing_subword_prefix_ ? continuing_subword_prefix_->size() : 0;
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& m = merges[rank];
    std::string a, b;
    const std::string where = "model.merges[" + std::to_string(rank) + "]";
    if (m.is_string()) {
      const auto s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        fail("tokenizer.json", where + ": expected \"a b\"");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      fail("tokenizer.json", where + ": expected \"a b\" or [\"a\", \"b\"]");
    }
    const auto ia = vocab_.find(a), ib = vocab_.find(b);
    if (ia == vocab_.end() || ib == vocab_.end())
      fail("tokenizer.json", where + ": token \"" + (ia == vocab_.end() ? a : b) + "\" is not in the vocab");
    if (b.size() < prefix_len) fail("tokenizer.json", where + ": \"" + b + "\" lacks the continuing_subword_prefix");
    const std::string merged = a + b.substr(prefix_len);
    const auto im = vocab_.find(merged);
    if (im == vocab_.end()) fail("tokenizer.json", where + ": merged token \"" + merged + "\" is not in the vocab");
    // A repeated merge keeps its last rank, as in Hugging Face's hash map.
    merges_[pair_key(ia->second, ib->second)] = MergeInfo{static_cast<int32_t>(rank), im->second};
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_id_[static_cast<size_t>(id)]) return nullptr;
  return &id_to_token_[static_cast<size_t>(id)];
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  {
    std::lock_guard lock(cache_mutex_);
    const auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  merge_word(word, out);
  if (word.size() < kCacheMaxWord) {
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity)
      cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + first, out.end()));
  }
}

void BpeModel::merge_word(std::string_view w, std::vector<int32_t>& out) const {
  // Symbols as a doubly linked list over a vector; a removed symbol gets len 0.
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    size_t len;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(w.size());
  auto add = [&](int32_t id, size_t len) {
    const auto n = static_cast<int32_t>(symbols.size());
    if (n > 0) symbols.back().next = n;
    symbols.push_back(Symbol{id, n - 1, -1, len});
  };
  int32_t pending_unk = -1;  // id of an unknown run not yet added
  size_t pending_unk_len = 0;
  auto unk_id = [&]() {
    const auto id = token_to_id(*unk_token_);
    if (!id) fail("tokenizer.json", "model.unk_token \"" + *unk_token_ + "\" is not in the vocab");
    return *id;
  };
  std::string s;
  for (size_t pos = 0; pos < w.size();) {
    const size_t start = pos;
    unicode::next(w, pos);
    const size_t byte_len = pos - start;
    s.assign(w.substr(start, byte_len));
    if (start != 0 && continuing_subword_prefix_) s.insert(0, *continuing_subword_prefix_);
    if (pos == w.size() && end_of_word_suffix_) s += *end_of_word_suffix_;
    if (const auto it = vocab_.find(s); it != vocab_.end()) {
      if (pending_unk >= 0) add(pending_unk, pending_unk_len), pending_unk = -1;
      add(it->second, byte_len);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char b : s) all = all && byte_ids_[b] >= 0;
      if (all) {
        for (unsigned char b : s) add(byte_ids_[b], 1);
        continue;
      }
    }
    if (unk_token_) {
      if (pending_unk >= 0 && fuse_unk_) {
        pending_unk_len += byte_len;
      } else {
        if (pending_unk >= 0) add(pending_unk, pending_unk_len);
        pending_unk = unk_id();
        pending_unk_len = byte_len;
      }
    }
  }
  if (pending_unk >= 0) add(pending_unk, pending_unk_len);

  struct Merge {
    int32_t pos, rank, new_id;
    bool operator<(const Merge& o) const {  // max-heap: lower rank first, then lower position
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<Merge> heap_storage;
  heap_storage.reserve(symbols.size());
  std::priority_queue<Merge> queue(std::less<Merge>(), std::move(heap_storage));
  auto lookup = [&](int32_t a, int32_t b) -> const MergeInfo* {
    const auto it = merges_.find(pair_key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i)
    if (const MergeInfo* m = lookup(symbols[i].id, symbols[i + 1].id))
      queue.push(Merge{static_cast<int32_t>(i), m->rank, m->new_id});
  while (!queue.empty()) {
    const Merge top = queue.top();
    queue.pop();
    Symbol& cur = symbols[static_cast<size_t>(top.pos)];
    if (cur.len == 0 || cur.next == -1) continue;
    const Symbol right = symbols[static_cast<size_t>(cur.next)];
    const MergeInfo* m = lookup(cur.id, right.id);
    if (!m || m->new_id != top.new_id) continue;  // stale entry
    symbols[static_cast<size_t>(cur.next)].len = 0;
    cur.id = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = top.pos;
    if (cur.prev >= 0)
      if (const MergeInfo* pm = lookup(symbols[static_cast<size_t>(cur.prev)].id, cur.id))
        queue.push(Merge{cur.prev, pm->rank, pm->new_id});
    if (cur.next >= 0)
      if (const MergeInfo* nm = lookup(cur.id, symbols[static_cast<size_t>(cur.next)].id))
        queue.push(Merge{top.pos, nm->rank, nm->new_id});
  }
  for (const auto& sym : symbols)
    if (sym.len != 0) out.push_back(sym.id);
}

}  // namespace ember::tokenizer
