#include "tokenizer/decoders.h"

#include <unordered_map>

#include "base/utf8.h"
#include "tokenizer/pattern.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/unicode.h"

namespace ember::tokenizer {

bool parse_byte_token(const std::string& t, unsigned char& byte) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return false;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  if (hi < 0 || lo < 0) return false;
  byte = static_cast<unsigned char>(hi * 16 + lo);
  return true;
}

namespace {

const std::string kReplacementChar = "\xEF\xBF\xBD";

std::vector<char32_t> chars_of(const std::string& s) {
  std::vector<char32_t> out;
  for (size_t pos = 0; pos < s.size();) out.push_back(unicode::next(s, pos));
  return out;
}

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<const Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }
  void decode_chain_bytes(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain_bytes(tokens);
  }
  bool groups_bytes() const override {
    for (const auto& p : parts_)
      if (p->groups_bytes()) return true;
    return false;
  }

 private:
  std::vector<std::unique_ptr<const Decoder>> parts_;
};

class ByteLevelDecoder final : public Decoder {
 public:
  ByteLevelDecoder() {
    const auto& table = byte_chars();
    for (int b = 0; b < 256; ++b) {
      size_t pos = 0;
      char_to_byte_[unicode::next(table[static_cast<size_t>(b)], pos)] = static_cast<unsigned char>(b);
    }
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    decode_chain_bytes(tokens);
    tokens[0] = utf8::sanitize(tokens[0]);
  }
  void decode_chain_bytes(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const auto& t : tokens) {
      const size_t mark = bytes.size();
      bool ok = true;
      for (size_t pos = 0; pos < t.size() && ok;) {
        const auto it = char_to_byte_.find(unicode::next(t, pos));
        if (it == char_to_byte_.end())
          ok = false;
        else
          bytes += static_cast<char>(it->second);
      }
      if (!ok) bytes.resize(mark), bytes += t;  // a token outside the byte alphabet stays as it is
    }
    tokens.assign(1, std::move(bytes));
  }

 private:
  std::unordered_map<char32_t, unsigned char> char_to_byte_;
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool strip_first) : replacement_(replacement), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t pos = 0; pos < t.size();) {
        const size_t start = pos;
        const char32_t c = unicode::next(t, pos);
        if (c != replacement_)
          out.append(t, start, pos - start);
        else if (!(i == 0 && strip_first_))
          out += ' ';
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  char32_t replacement_;
  bool strip_first_;
};

class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override { run(tokens, false); }
  void decode_chain_bytes(std::vector<std::string>& tokens) const override { run(tokens, true); }
  bool groups_bytes() const override { return true; }

 private:
  static void run(std::vector<std::string>& tokens, bool keep_bytes) {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (keep_bytes || utf8::is_valid(pending))
        out.push_back(pending);
      else
        for (size_t i = 0; i < pending.size(); ++i) out.push_back(kReplacementChar);
      pending.clear();
    };
    for (auto& t : tokens) {
      unsigned char b = 0;
      if (parse_byte_token(t, b)) {
        pending += static_cast<char>(b);
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      if (content_ < 0x80) {  // an ASCII content strips bytes: bytes that are not UTF-8 stay as they are
        const char c = static_cast<char>(content_);
        size_t begin = 0, end = t.size();
        while (begin < start_ && begin < t.size() && t[begin] == c) ++begin;
        for (size_t i = 0; i < stop_ && end > begin && t[end - 1] == c; ++i) --end;
        t = t.substr(begin, end - begin);
        continue;
      }
      const auto chars = chars_of(t);
      size_t begin = 0, end = chars.size();
      while (begin < start_ && begin < chars.size() && chars[begin] == content_) ++begin;
      for (size_t i = 0; i < stop_ && end > begin && chars[end - 1] == content_; ++i) --end;
      std::string out;
      for (size_t i = begin; i < end; ++i) utf8::append(out, chars[i]);
      t = std::move(out);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Pattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) t = pattern_.replace_all(t, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

char32_t single_char(const std::string& s, const std::string& where) {
  const auto chars = chars_of(s);
  if (chars.size() != 1) fail("tokenizer.json", where + ": expected a single character, got \"" + s + "\"");
  return chars[0];
}

}  // namespace

std::unique_ptr<const Decoder> make_decoder(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, where);
  if (type == "Sequence")
    return std::make_unique<SequenceDecoder>(make_sequence<Decoder>(
        j, "decoders", where, [](const json& item, const std::string& w) { return make_decoder(item, w); }));
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    bool strip_first = true;
    if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null())
      strip_first = field<std::string>(j, "prepend_scheme", where) != "never";
    else
      strip_first = field_or<bool>(j, "add_prefix_space", true, where);
    return std::make_unique<MetaspaceDecoder>(
        single_char(field_or<std::string>(j, "replacement", "\xE2\x96\x81", where), where + ".replacement"),
        strip_first);
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip")
    return std::make_unique<StripDecoder>(single_char(field<std::string>(j, "content", where), where + ".content"),
                                          field_or<size_t>(j, "start", 0, where),
                                          field_or<size_t>(j, "stop", 0, where));
  if (type == "Replace")
    return std::make_unique<ReplaceDecoder>(Pattern::from_json(field<json>(j, "pattern", where), where),
                                            field<std::string>(j, "content", where));
  unsupported(where, type);
}

}  // namespace ember::tokenizer
