#include "sampling/grammar.h"

#include <algorithm>

#include "base/error.h"

namespace ember::grammar {

bool CharSet::contains(char32_t c) const {
  bool in = false;
  for (const auto& [lo, hi] : ranges)
    if (c >= lo && c <= hi) {
      in = true;
      break;
    }
  return in != negated;
}

bool CharSet::intersects(char32_t lo, char32_t hi) const {
  if (!negated) {
    for (const auto& [a, b] : ranges)
      if (a <= hi && b >= lo) return true;
    return false;
  }
  // The complement misses [lo, hi] only if the ranges cover all of it.
  char32_t next = lo;
  for (const auto& [a, b] : ranges) {  // sorted and disjoint
    if (b < next) continue;
    if (a > next) return true;
    if (b >= hi) return false;
    next = b + 1;
  }
  return true;
}

bool CharSet::covers(char32_t lo, char32_t hi) const {
  if (negated) {
    for (const auto& [a, b] : ranges)
      if (a <= hi && b >= lo) return false;
    return true;
  }
  for (const auto& [a, b] : ranges)  // merged: a covered range lies inside one of them
    if (a <= lo && b >= hi) return true;
  return false;
}

uint32_t Grammar::add_set(CharSet s) {
  std::sort(s.ranges.begin(), s.ranges.end());
  std::vector<std::pair<char32_t, char32_t>> merged;
  for (const auto& r : s.ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  s.ranges = std::move(merged);
  sets_.push_back(std::move(s));
  return static_cast<uint32_t>(sets_.size() - 1);
}

uint32_t Grammar::add_rule(std::string name) {
  rules_.push_back({std::move(name), {}});
  return static_cast<uint32_t>(rules_.size() - 1);
}

void Grammar::add_alternative(uint32_t rule, const std::vector<Element>& items) {
  rules_[rule].alternatives.push_back(static_cast<uint32_t>(elements_.size()));
  elements_.insert(elements_.end(), items.begin(), items.end());
  elements_.push_back({Element::kEnd, 0});
}

void Grammar::check(const std::string& where) const {
  const size_t n = rules_.size();
  for (const Rule& r : rules_)
    if (r.alternatives.empty()) fail(where, "rule '" + r.name + "' has no alternatives");
  // Nullable rules (they can match the empty string), to a fixed point.
  std::vector<char> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (uint32_t p : rules_[r].alternatives) {
        while (elements_[p].kind == Element::kRef && nullable[elements_[p].index]) ++p;
        if (elements_[p].kind == Element::kEnd) {
          nullable[r] = 1, changed = true;
          break;
        }
      }
    }
  }
  // Left edges: rule -> the rules it can begin with. A cycle would make the matcher expand forever.
  std::vector<std::vector<uint32_t>> left(n);
  for (size_t r = 0; r < n; ++r)
    for (uint32_t p : rules_[r].alternatives)
      for (; elements_[p].kind == Element::kRef; ++p) {
        left[r].push_back(elements_[p].index);
        if (!nullable[elements_[p].index]) break;
      }
  std::vector<char> color(n, 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<uint32_t, size_t>> path;
  for (uint32_t start = 0; start < n; ++start) {
    if (color[start]) continue;
    path.push_back({start, 0});
    color[start] = 1;
    while (!path.empty()) {
      auto& [r, i] = path.back();
      if (i == left[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t next = left[r][i++];
      if (color[next] == 1) fail(where, "rule '" + rules_[next].name + "' is left-recursive (it can begin with itself)");
      if (color[next] == 0) {
        color[next] = 1;
        path.push_back({next, 0});
      }
    }
  }
}

}  // namespace ember::grammar
