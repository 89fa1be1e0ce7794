// GBNF (llama.cpp's grammar format) to Grammar: `name ::= alternatives`, `|`, groups, `? * +`,
// `{m}`, `{m,}`, `{m,n}`, string literals, `[...]` classes with ranges and `^`, `.`, `#` comments.
#include <map>
#include <optional>

#include "base/error.h"
#include "sampling/grammar.h"

namespace ember::grammar {

namespace {

bool gbnf_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : s_(text) {}

  Grammar parse() {
    skip_space(true);
    while (pos_ < s_.size()) {
      parse_rule();
      skip_space(true);
    }
    for (const auto& [name, info] : names_)
      if (!info.defined) error_at(info.first_use, "undefined rule '" + name + "'");
    const auto root = names_.find("root");
    if (root == names_.end()) fail("grammar", "no 'root' rule");
    g_.set_root(root->second.id);
    g_.check("grammar");
    return std::move(g_);
  }

 private:
  struct RuleInfo {
    uint32_t id;
    bool defined = false;
    size_t first_use = 0;
  };

  [[noreturn]] void error_at(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') ++line, col = 1;
      else ++col;
    }
    fail("grammar", "line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
  }
  [[noreturn]] void error(const std::string& what) const { error_at(pos_, what); }

  char peek(size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }
  bool at_end() const { return pos_ >= s_.size(); }

  // Spaces and comments; newlines only when `newlines` (inside groups, between rules).
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  // After a line break at the top level: true (and positioned there) if the next line goes on with `|`.
  bool continues_with_bar() {
    const size_t save = pos_;
    skip_space(true);
    if (peek() == '|') return true;
    pos_ = save;
    return false;
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && gbnf_word_char(peek())) ++pos_;
    if (pos_ == start) error("expected a rule name");
    return std::string(s_.substr(start, pos_ - start));
  }

  uint32_t rule_id(const std::string& name, size_t at) {
    auto it = names_.find(name);
    if (it == names_.end()) it = names_.emplace(name, RuleInfo{g_.add_rule(name), false, at}).first;
    return it->second.id;
  }

  void parse_rule() {
    const size_t at = pos_;
    const std::string name = parse_name();
    skip_space(false);
    if (s_.substr(pos_, 3) != "::=") error("expected '::=' after rule name '" + name + "'");
    pos_ += 3;
    const uint32_t id = rule_id(name, at);
    RuleInfo& info = names_.at(name);
    if (info.defined) error_at(at, "rule '" + name + "' is defined twice");
    info.defined = true;
    skip_space(true);
    parse_alternatives(id, false);
    if (!at_end() && peek() != '\n') error(std::string("unexpected character '") + peek() + "'");
  }

  void parse_alternatives(uint32_t rule, bool nested) {
    for (;;) {
      g_.add_alternative(rule, parse_sequence(nested));
      if (peek() == '|') {
        ++pos_;
        skip_space(true);
        continue;
      }
      if (!nested && peek() == '\n' && continues_with_bar()) {
        ++pos_;
        skip_space(true);
        continue;
      }
      return;
    }
  }

  std::vector<Element> parse_sequence(bool nested) {
    std::vector<Element> items;
    size_t last_start = 0;  // where the last element's items begin (a repetition applies to them)
    for (;;) {
      const char c = peek();
      const size_t mark = items.size();
      if (c == '"') {
        ++pos_;
        while (peek() != '"') {
          if (at_end() || peek() == '\n') error("unterminated string literal");
          const char32_t ch = parse_char();
          items.push_back(chars_item({{ch, ch}}, false));
        }
        ++pos_;
        last_start = mark;
        if (items.size() == mark) {  // "" is the empty string: nothing to repeat
          skip_space(nested);
          continue;
        }
      } else if (c == '[') {
        ++pos_;
        const bool neg = peek() == '^';
        if (neg) ++pos_;
        std::vector<std::pair<char32_t, char32_t>> ranges;
        while (peek() != ']') {
          if (at_end()) error("unterminated character class");
          const char32_t lo = parse_char();
          char32_t hi = lo;
          if (peek() == '-' && peek(1) != ']' && pos_ + 1 < s_.size()) {
            ++pos_;
            hi = parse_char();
            if (hi < lo) error("character range is reversed");
          }
          ranges.push_back({lo, hi});
        }
        ++pos_;
        last_start = mark;
        items.push_back(chars_item(std::move(ranges), neg));
      } else if (c == '.') {
        ++pos_;
        last_start = mark;
        items.push_back(chars_item({{0, 0x10FFFF}}, false));
      } else if (gbnf_word_char(c)) {
        const size_t at = pos_;
        const std::string name = parse_name();
        last_start = mark;
        items.push_back({Element::kRef, rule_id(name, at)});
      } else if (c == '(') {
        ++pos_;
        skip_space(true);
        const uint32_t group = g_.add_rule(names_hint("group"));
        parse_alternatives(group, true);
        if (peek() != ')') error("expected ')'");
        ++pos_;
        last_start = mark;
        items.push_back({Element::kRef, group});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (items.empty()) error(std::string("'") + c + "' has nothing before it to repeat");
        ++pos_;
        size_t lo = 0;
        std::optional<size_t> hi;
        if (c == '*') lo = 0;
        else if (c == '+') lo = 1;
        else if (c == '?') lo = 0, hi = 1;
        else parse_braces(lo, hi);
        repeat(items, last_start, lo, hi);
      } else {
        break;
      }
      skip_space(nested);
    }
    return items;
  }

  void parse_braces(size_t& lo, std::optional<size_t>& hi) {
    skip_space(true);
    lo = parse_count();
    skip_space(true);
    if (peek() == ',') {
      ++pos_;
      skip_space(true);
      if (peek() != '}') hi = parse_count();
    } else {
      hi = lo;
    }
    skip_space(true);
    if (peek() != '}') error("expected '}'");
    ++pos_;
    if (hi && *hi < lo) error("repetition {m,n} with n < m");
  }

  size_t parse_count() {
    const size_t start = pos_;
    size_t n = 0;
    while (peek() >= '0' && peek() <= '9') {
      n = n * 10 + static_cast<size_t>(peek() - '0');
      if (n > 100000) error("repetition count too large");
      ++pos_;
    }
    if (pos_ == start) error("expected a number");
    return n;
  }

  // items[from, end) repeated lo..hi times (hi empty: no limit), lowered into helper rules.
  void repeat(std::vector<Element>& items, size_t from, size_t lo, std::optional<size_t> hi) {
    Element unit;
    if (items.size() - from == 1) {
      unit = items[from];
    } else {  // a literal of several characters: one rule
      const uint32_t r = g_.add_rule(names_hint("literal"));
      g_.add_alternative(r, std::vector<Element>(items.begin() + static_cast<std::ptrdiff_t>(from), items.end()));
      unit = {Element::kRef, r};
    }
    items.resize(from);
    for (size_t i = 0; i < lo; ++i) items.push_back(unit);
    if (!hi) {  // star ::= unit star | ε
      const uint32_t star = g_.add_rule(names_hint("star"));
      g_.add_alternative(star, {unit, {Element::kRef, star}});
      g_.add_alternative(star, {});
      items.push_back({Element::kRef, star});
    } else if (*hi > lo) {  // opt_k ::= unit opt_{k-1} | ε, opt_1 ::= unit | ε
      std::optional<uint32_t> prev;
      for (size_t k = 1; k <= *hi - lo; ++k) {
        const uint32_t r = g_.add_rule(names_hint("opt"));
        std::vector<Element> alt{unit};
        if (prev) alt.push_back({Element::kRef, *prev});
        g_.add_alternative(r, alt);
        g_.add_alternative(r, {});
        prev = r;
      }
      items.push_back({Element::kRef, *prev});
    }
  }

  std::string names_hint(const char* what) { return std::string("_") + what + std::to_string(++helpers_); }

  Element chars_item(std::vector<std::pair<char32_t, char32_t>> ranges, bool negated) {
    return {Element::kChars, g_.add_set({std::move(ranges), negated})};
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      int d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else error("expected " + std::to_string(digits) + " hex digits");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > 0x10FFFF) error("code point out of range");
    return v;
  }

  // One character of a literal or class: an escape or one UTF-8 character.
  char32_t parse_char() {
    if (at_end()) error("unexpected end of grammar");
    const unsigned char c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      const size_t at = pos_++;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': return '\\';
        case '"': return '"';
        case '[': return '[';
        case ']': return ']';
        case '-': return '-';
        case '^': return '^';
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        default: error_at(at, std::string("unknown escape '\\") + e + "'");
      }
    }
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || pos_ + static_cast<size_t>(len) > s_.size()) error("invalid UTF-8");
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < len; ++i) {
      const unsigned char b = static_cast<unsigned char>(s_[pos_ + static_cast<size_t>(i)]);
      if ((b >> 6) != 2) error("invalid UTF-8");
      cp = (cp << 6) | (b & 0x3F);
    }
    pos_ += static_cast<size_t>(len);
    return cp;
  }

  std::string_view s_;
  size_t pos_ = 0;
  Grammar g_;
  std::map<std::string, RuleInfo> names_;
  int helpers_ = 0;
};

}  // namespace

Grammar Grammar::from_gbnf(std::string_view text) { return GbnfParser(text).parse(); }

}  // namespace ember::grammar
