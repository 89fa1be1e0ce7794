#pragma once
// A context-free grammar over Unicode code points, in the flattened form the matcher walks: every
// rule is a list of alternatives, every alternative a run of elements ended by kEnd. Groups and
// repetitions (`( )`, `? * + {m,n}`) are already lowered into helper rules.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::grammar {

// A set of code points: sorted, disjoint ranges [first, second], or their complement.
struct CharSet {
  std::vector<std::pair<char32_t, char32_t>> ranges;
  bool negated = false;
  bool contains(char32_t c) const;
  // True if some code point in [lo, hi] is in the set (a partial UTF-8 character's possible range).
  bool intersects(char32_t lo, char32_t hi) const;
  // True if every code point in [lo, hi] is in the set.
  bool covers(char32_t lo, char32_t hi) const;
};

struct Element {
  enum Kind : uint8_t { kEnd, kChars, kRef };
  Kind kind;
  uint32_t index;  // kChars: into Grammar::sets; kRef: the rule
};

class Grammar {
 public:
  // llama.cpp's GBNF text. Throws ember::Error naming the line and column of a syntax error, an
  // undefined rule, a missing `root` or left recursion.
  static Grammar from_gbnf(std::string_view text);

  struct Rule {
    std::string name;
    std::vector<uint32_t> alternatives;  // start positions in elements()
  };
  const std::vector<Rule>& rules() const { return rules_; }
  const std::vector<Element>& elements() const { return elements_; }
  const std::vector<CharSet>& sets() const { return sets_; }
  uint32_t root() const { return root_; }

  // Builder interface (for the GBNF parser): items of one alternative, then add_alternative.
  uint32_t add_set(CharSet s);
  void add_alternative(uint32_t rule, const std::vector<Element>& items);
  uint32_t add_rule(std::string name);
  void set_root(uint32_t r) { root_ = r; }
  // Throws ember::Error (prefixed by `where`) for a rule without alternatives or left recursion.
  void check(const std::string& where) const;

 private:
  std::vector<Rule> rules_;
  std::vector<Element> elements_;
  std::vector<CharSet> sets_;
  uint32_t root_ = 0;
};

}  // namespace ember::grammar
