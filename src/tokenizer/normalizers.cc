#include "tokenizer/normalizers.h"

#include <vector>

#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace ember::tokenizer {
namespace {

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<const Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& s) const override {
    for (const auto& p : parts_) p->normalize(s);
  }

 private:
  std::vector<std::unique_ptr<const Normalizer>> parts_;
};

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(unicode::Form form) : form_(form) {}
  void normalize(std::string& s) const override { s = unicode::normalize(s, form_); }

 private:
  unicode::Form form_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  void normalize(std::string& s) const override { s = unicode::lowercase(s); }
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& s) const override {
    size_t begin = 0, end = s.size();
    if (left_) {
      while (begin < end) {
        size_t pos = begin;
        if (!unicode::is_whitespace(unicode::next(s, pos))) break;
        begin = pos;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
        size_t pos = start;
        if (!unicode::is_whitespace(unicode::next(s, pos))) break;
        end = start;
      }
    }
    s = s.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class StripAccentsNormalizer final : public Normalizer {
 public:
  void normalize(std::string& s) const override {
    std::string out;
    for (size_t pos = 0; pos < s.size();) {
      const size_t start = pos;
      if (!unicode::is_mark(unicode::next(s, pos))) out.append(s, start, pos - start);
    }
    s = std::move(out);
  }
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& s) const override { s = pattern_.replace_all(s, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& s) const override {
    if (!s.empty()) s.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

}  // namespace

std::unique_ptr<const Normalizer> make_normalizer(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, where);
  if (type == "Sequence")
    return std::make_unique<SequenceNormalizer>(make_sequence<Normalizer>(
        j, "normalizers", where, [](const json& item, const std::string& w) { return make_normalizer(item, w); }));
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(unicode::Form::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(unicode::Form::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(unicode::Form::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(unicode::Form::NFKD);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  if (type == "Strip")
    return std::make_unique<StripNormalizer>(field_or<bool>(j, "strip_left", true, where),
                                             field_or<bool>(j, "strip_right", true, where));
  if (type == "Replace")
    return std::make_unique<ReplaceNormalizer>(Pattern::from_json(field<json>(j, "pattern", where), where),
                                               field<std::string>(j, "content", where));
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(field<std::string>(j, "prepend", where));
  unsupported(where, type);
}

}  // namespace ember::tokenizer
