#include "tokenizer/pre_tokenizers.h"

#include <optional>

#include "base/utf8.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace ember::tokenizer {

const std::array<std::string, 256>& byte_chars() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    char32_t extra = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      utf8::append(t[b], printable ? static_cast<char32_t>(b) : extra++);
    }
    return t;
  }();
  return table;
}

namespace {

SplitBehavior parse_behavior(const json& j, const std::string& where, const char* fallback) {
  const std::string b = field_or<std::string>(j, "behavior", fallback, where);
  if (b == "Removed") return SplitBehavior::Removed;
  if (b == "Isolated") return SplitBehavior::Isolated;
  if (b == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (b == "Contiguous") return SplitBehavior::Contiguous;
  fail("tokenizer.json", where + ".behavior: unknown split behavior \"" + b + "\"");
}

class SequencePre final : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<const PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (const auto& p : parts_) p->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<const PreTokenizer>> parts_;
};

// Splits with a character predicate (Punctuation, Digits, WhitespaceSplit).
template <typename Pred>
class CharSplitPre final : public PreTokenizer {
 public:
  CharSplitPre(Pred pred, SplitBehavior behavior) : pred_(pred), behavior_(behavior) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_pieces(
        pieces, [&](std::string_view s) { return apply_behavior(cover(s.size(), char_matches(s, pred_)), behavior_); });
  }

 private:
  Pred pred_;
  SplitBehavior behavior_;
};

template <typename Pred>
std::unique_ptr<const PreTokenizer> char_split(Pred pred, SplitBehavior behavior) {
  return std::make_unique<CharSplitPre<Pred>>(pred, behavior);
}

bool is_bert_punctuation(char32_t c) { return unicode::is_ascii_punctuation(c) || unicode::is_punctuation(c); }

class SplitPre final : public PreTokenizer {
 public:
  SplitPre(Pattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_pieces(pieces, [&](std::string_view s) {
      auto spans = cover(s.size(), pattern_.find_all(s));
      if (invert_)
        for (auto& sp : spans) sp.is_match = !sp.is_match;
      return apply_behavior(spans, behavior_);
    });
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPre final : public PreTokenizer {
 public:
  ByteLevelPre(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
    if (use_regex) regex_.emplace(kGpt2Pattern, "ByteLevel");
  }
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    if (add_prefix_space_)
      for (auto& p : pieces)
        if (p.added_id < 0 && !p.text.empty() && p.text[0] != ' ') p.text.insert(0, 1, ' ');
    if (regex_)
      split_pieces(pieces, [&](std::string_view s) {
        return apply_behavior(cover(s.size(), regex_->find_all(s)), SplitBehavior::Isolated);
      });
    const auto& table = byte_chars();
    for (auto& p : pieces) {
      if (p.added_id >= 0) continue;
      std::string mapped;
      mapped.reserve(p.text.size() * 2);
      for (unsigned char b : p.text) mapped += table[b];
      p.text = std::move(mapped);
    }
  }

 private:
  bool add_prefix_space_;
  std::optional<Regex> regex_;
};

enum class PrependScheme { Always, First, Never };

PrependScheme parse_prepend_scheme(const json& j, const std::string& where) {
  if (!j.contains("prepend_scheme") || j["prepend_scheme"].is_null())
    return field_or<bool>(j, "add_prefix_space", true, where) ? PrependScheme::Always : PrependScheme::Never;
  const std::string s = field<std::string>(j, "prepend_scheme", where);
  if (s == "always") return PrependScheme::Always;
  if (s == "first") return PrependScheme::First;
  if (s == "never") return PrependScheme::Never;
  fail("tokenizer.json", where + ".prepend_scheme: unknown value \"" + s + "\"");
}

class MetaspacePre final : public PreTokenizer {
 public:
  MetaspacePre(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    const Pattern space = Pattern::literal(" ");
    for (auto& p : pieces) {
      if (p.added_id >= 0) continue;
      p.text = space.replace_all(p.text, replacement_);
      const bool starts = p.text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == PrependScheme::Always || (scheme_ == PrependScheme::First && p.at_origin)))
        p.text.insert(0, replacement_);
    }
    if (split_)
      split_pieces(pieces, [&](std::string_view s) {
        return apply_behavior(cover(s.size(), find_all_literal(s, replacement_)), SplitBehavior::MergedWithNext);
      });
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

}  // namespace

std::unique_ptr<const PreTokenizer> make_pre_tokenizer(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, where);
  if (type == "Sequence")
    return std::make_unique<SequencePre>(make_sequence<PreTokenizer>(
        j, "pretokenizers", where, [](const json& item, const std::string& w) { return make_pre_tokenizer(item, w); }));
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPre>(field_or<bool>(j, "add_prefix_space", true, where),
                                          field_or<bool>(j, "use_regex", true, where));
  if (type == "Metaspace") {
    const std::string rep = field_or<std::string>(j, "replacement", "\xE2\x96\x81", where);
    size_t pos = 0;
    if (rep.empty() || (unicode::next(rep, pos), pos != rep.size()))
      fail("tokenizer.json", where + ".replacement: must be one character");
    return std::make_unique<MetaspacePre>(rep, parse_prepend_scheme(j, where), field_or<bool>(j, "split", true, where));
  }
  if (type == "Split")
    return std::make_unique<SplitPre>(Pattern::from_json(field<json>(j, "pattern", where), where),
                                      parse_behavior(j, where, "Isolated"), field_or<bool>(j, "invert", false, where));
  if (type == "Digits")
    return char_split(unicode::is_numeric, field_or<bool>(j, "individual_digits", false, where)
                                               ? SplitBehavior::Isolated
                                               : SplitBehavior::Contiguous);
  if (type == "Punctuation") return char_split(is_bert_punctuation, parse_behavior(j, where, "Isolated"));
  if (type == "WhitespaceSplit") return char_split(unicode::is_whitespace, SplitBehavior::Removed);
  if (type == "Whitespace") {
    // \w+|[^\w\s]+ kept, everything else (whitespace) removed.
    return std::make_unique<SplitPre>(Pattern::from_json(json{{"Regex", R"(\w+|[^\w\s]+)"}}, where),
                                      SplitBehavior::Removed, true);
  }
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<const PreTokenizer>> parts;
    parts.push_back(char_split(unicode::is_whitespace, SplitBehavior::Removed));
    parts.push_back(char_split(is_bert_punctuation, SplitBehavior::Isolated));
    return std::make_unique<SequencePre>(std::move(parts));
  }
  unsupported(where, type);
}

}  // namespace ember::tokenizer
