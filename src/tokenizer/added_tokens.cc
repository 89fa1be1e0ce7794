#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace ember::tokenizer {

void TokenTrie::insert(std::string_view key, int32_t value) {
  int32_t node = 0;
  for (unsigned char c : key) {
    auto& ch = nodes_[static_cast<size_t>(node)].children;
    auto it = std::find_if(ch.begin(), ch.end(), [c](const auto& p) { return p.first == c; });
    if (it != ch.end()) {
      node = it->second;
      continue;
    }
    const auto next = static_cast<int32_t>(nodes_.size());
    nodes_[static_cast<size_t>(node)].children.emplace_back(c, next);
    nodes_.emplace_back();
    node = next;
  }
  // Of equal keys the first one wins, as with Aho-Corasick pattern order.
  if (nodes_[static_cast<size_t>(node)].value < 0) nodes_[static_cast<size_t>(node)].value = value;
}

std::pair<int32_t, size_t> TokenTrie::longest_at(std::string_view s, size_t pos) const {
  std::pair<int32_t, size_t> best{-1, 0};
  int32_t node = 0;
  for (size_t i = pos; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const auto& ch = nodes_[static_cast<size_t>(node)].children;
    auto it = std::find_if(ch.begin(), ch.end(), [c](const auto& p) { return p.first == c; });
    if (it == ch.end()) break;
    node = it->second;
    if (nodes_[static_cast<size_t>(node)].value >= 0) best = {nodes_[static_cast<size_t>(node)].value, i + 1 - pos};
  }
  return best;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer)
    : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& t = tokens_[i];
    by_id_[t.id] = i;
    by_content_.emplace(t.content, i);
    if (t.content.empty()) continue;
    if (t.normalized) {
      std::string n = t.content;
      if (normalizer) normalizer->normalize(n);
      if (!n.empty()) normalized_trie_.insert(n, static_cast<int32_t>(i));
    } else {
      raw_trie_.insert(t.content, static_cast<int32_t>(i));
    }
  }
}

const AddedToken* AddedVocabulary::find(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::find(std::string_view content) const {
  const auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

namespace {

bool is_word_char(char32_t c) { return unicode::is_alphanumeric(c) || c == U'_'; }

// The last / first code point of a non-empty valid UTF-8 string.
char32_t last_char(std::string_view s) {
  size_t start = s.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  return unicode::next(s, start);
}
char32_t first_char(std::string_view s) {
  size_t pos = 0;
  return unicode::next(s, pos);
}

}  // namespace

void AddedVocabulary::split(std::vector<Piece>& out, Piece piece, const TokenTrie& trie) const {
  const std::string_view s = piece.text;
  auto emit = [&](size_t b, size_t e, int32_t id) {
    if (e > b) out.push_back(Piece{std::string(s.substr(b, e - b)), piece.at_origin && b == 0, id});
  };
  size_t start_offset = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    const auto [index, len] = trie.longest_at(s, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[static_cast<size_t>(index)];
    size_t start = pos, stop = pos + len;
    pos = stop;  // the matcher resumes after the match even when it is rejected
    if (tok.single_word) {
      const bool start_space = start == 0 || !is_word_char(last_char(s.substr(0, start)));
      const bool stop_space = stop == s.size() || !is_word_char(first_char(s.substr(stop)));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) {
      size_t b = start;
      while (b > 0) {
        size_t cs = b - 1;
        while (cs > 0 && (static_cast<unsigned char>(s[cs]) & 0xC0) == 0x80) --cs;
        size_t p = cs;
        if (!unicode::is_whitespace(unicode::next(s, p))) break;
        b = cs;
      }
      start = std::max(b, start_offset);
    }
    if (tok.rstrip) {
      while (stop < s.size()) {
        size_t p = stop;
        if (!unicode::is_whitespace(unicode::next(s, p))) break;
        stop = p;
      }
    }
    emit(start_offset, start, -1);
    emit(start, stop, tok.id);
    start_offset = stop;
  }
  emit(start_offset, s.size(), -1);
}

std::vector<Piece> AddedVocabulary::extract_and_normalize(std::string_view text, const Normalizer* normalizer) const {
  std::vector<Piece> raw;
  split(raw, Piece{std::string(text), true, -1}, raw_trie_);
  std::vector<Piece> out;
  out.reserve(raw.size());
  for (auto& p : raw) {
    if (p.added_id >= 0) {
      out.push_back(std::move(p));
      continue;
    }
    if (normalizer) normalizer->normalize(p.text);
    split(out, std::move(p), normalized_trie_);
  }
  return out;
}

}  // namespace ember::tokenizer
