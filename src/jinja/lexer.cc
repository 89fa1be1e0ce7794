#include "jinja/lexer.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "base/error.h"
#include "base/utf8.h"

namespace ember::jinja {

std::string at(Pos pos, std::string_view what) {
  return "line " + std::to_string(pos.line) + ", column " + std::to_string(pos.column) + ": " +
         std::string(what);
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Python's str.rstrip() for the ASCII whitespace Jinja2 strips around tags.
std::string_view rstrip_ws(std::string_view s) {
  size_t n = s.size();
  while (n > 0 && is_space(s[n - 1])) --n;
  return s.substr(0, n);
}

// Jinja2 treats \r\n, \r and \n as line breaks and drops one trailing newline.
std::string normalize_newlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t k = 0; k < src.size(); ++k) {
    if (src[k] == '\r') {
      out += '\n';
      if (k + 1 < src.size() && src[k + 1] == '\n') ++k;
    } else {
      out += src[k];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Python's "unicode-escape" decoding of a string literal body.
std::string unescape(std::string_view body, Pos pos) {
  std::string out;
  for (size_t k = 0; k < body.size(); ++k) {
    const char c = body[k];
    if (c != '\\' || k + 1 >= body.size()) {
      out += c;
      continue;
    }
    const char e = body[++k];
    auto hex = [&](size_t n) {
      if (k + n >= body.size()) throw Error(at(pos, "truncated \\" + std::string(1, e) + " escape"));
      uint32_t v = 0;
      for (size_t d = 1; d <= n; ++d) {
        const char h = body[k + d];
        if (!std::isxdigit(static_cast<unsigned char>(h)))
          throw Error(at(pos, "truncated \\" + std::string(1, e) + " escape"));
        v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
      }
      k += n;
      return v;
    };
    switch (e) {
      case '\n': break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x': utf8::append(out, hex(2)); break;
      case 'u': utf8::append(out, hex(4)); break;
      case 'U': {
        const uint32_t cp = hex(8);
        if (cp > 0x10FFFF) throw Error(at(pos, "illegal Unicode character"));
        utf8::append(out, cp);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = static_cast<uint32_t>(e - '0');
          for (int d = 0; d < 2 && k + 1 < body.size() && body[k + 1] >= '0' && body[k + 1] <= '7'; ++d)
            v = v * 8 + static_cast<uint32_t>(body[++k] - '0');
          utf8::append(out, v);
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize_newlines(source)) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      const size_t open = find_open(pos_);
      if (open == std::string::npos) {
        emit_data(std::string_view(src_).substr(pos_), pos_);
        pos_ = src_.size();
        break;
      }
      const char kind = src_[open + 1];  // '{', '%' or '#'
      char sign = 0;
      if (open + 2 < src_.size() && (src_[open + 2] == '-' || src_[open + 2] == '+')) sign = src_[open + 2];
      std::string_view text = std::string_view(src_).substr(pos_, open - pos_);
      const size_t text_start = pos_;
      if (sign == '-') {
        text = rstrip_ws(text);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: drop spaces and tabs between the line start and a block or comment tag.
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size()) {
          bool blank = true;
          for (size_t k = l_pos; k < text.size(); ++k) blank = blank && is_space(text[k]);
          if (blank) text = text.substr(0, l_pos);
        }
      }
      emit_data(text, text_start);
      pos_ = open + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        line_starting = lex_comment(open);
      } else if (kind == '%' && try_raw(open)) {
        line_starting = !out_.empty() && ends_with_newline_;
      } else {
        line_starting = lex_tag(kind == '{', open);
      }
    }
    out_.push_back(Token{Tok::End, "", pos_of(src_.size())});
    return std::move(out_);
  }

 private:
  std::string src_;
  size_t pos_ = 0;
  std::vector<Token> out_;
  bool ends_with_newline_ = false;
  // Line starts, for turning offsets into line/column.
  std::vector<size_t> line_starts_ = {0};
  size_t lines_scanned_ = 0;

  Pos pos_of(size_t offset) {
    while (lines_scanned_ < src_.size() && lines_scanned_ < offset + 1) {
      if (src_[lines_scanned_] == '\n') line_starts_.push_back(lines_scanned_ + 1);
      ++lines_scanned_;
    }
    size_t lo = 0, hi = line_starts_.size();
    while (hi - lo > 1) {
      const size_t mid = (lo + hi) / 2;
      if (line_starts_[mid] <= offset) lo = mid;
      else hi = mid;
    }
    return Pos{static_cast<uint32_t>(lo + 1), static_cast<uint32_t>(offset - line_starts_[lo] + 1)};
  }

  [[noreturn]] void fail(size_t offset, const std::string& what) { throw Error(at(pos_of(offset), what)); }

  size_t find_open(size_t from) const {
    for (size_t k = src_.find('{', from); k != std::string::npos; k = src_.find('{', k + 1)) {
      if (k + 1 < src_.size() && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#')) return k;
    }
    return std::string::npos;
  }

  void emit_data(std::string_view text, size_t offset) {
    if (text.empty()) return;
    out_.push_back(Token{Tok::Data, std::string(text), pos_of(offset)});
  }

  // After a block or comment end: `-` strips all following whitespace, `+` keeps it, and
  // otherwise trim_blocks removes one newline. Returns whether the consumed text ends in a newline.
  bool after_block_end(char sign) {
    const size_t before = pos_;
    if (sign == '-') {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    } else if (sign != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
    return pos_ > before ? src_[pos_ - 1] == '\n' : false;
  }

  bool lex_comment(size_t open) {
    const size_t close = src_.find("#}", pos_);
    if (close == std::string::npos) fail(open, "Missing end of comment tag");
    const char sign = close > pos_ && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
    pos_ = close + 2;
    return after_block_end(sign);
  }

  static bool match_word(std::string_view s, size_t& k, std::string_view word) {
    while (k < s.size() && is_space(s[k])) ++k;
    if (s.substr(k, word.size()) != word) return false;
    k += word.size();
    if (k < s.size() && (std::isalnum(static_cast<unsigned char>(s[k])) || s[k] == '_')) return false;
    while (k < s.size() && is_space(s[k])) ++k;
    return true;
  }

  // {% raw %}...{% endraw %}: the body is literal text.
  bool try_raw(size_t open) {
    size_t k = pos_;
    if (!match_word(src_, k, "raw")) return false;
    if (src_.compare(k, 3, "-%}") == 0) {
      k += 3;
      while (k < src_.size() && is_space(src_[k])) ++k;
    } else if (src_.compare(k, 2, "%}") == 0) {
      k += 2;
    } else {
      return false;
    }
    for (size_t s = src_.find("{%", k); s != std::string::npos; s = src_.find("{%", s + 1)) {
      size_t e = s + 2;
      char sign = 0;
      if (e < src_.size() && (src_[e] == '-' || src_[e] == '+')) sign = src_[e++];
      if (!match_word(src_, e, "endraw")) continue;
      char end_sign = 0;
      if (e < src_.size() && (src_[e] == '-' || src_[e] == '+')) end_sign = src_[e++];
      if (src_.compare(e, 2, "%}") != 0) continue;
      std::string_view body = std::string_view(src_).substr(k, s - k);
      if (sign == '-') {
        body = rstrip_ws(body);
      } else if (sign != '+') {
        const size_t nl = body.rfind('\n');
        const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
        bool blank = l_pos < body.size();
        for (size_t b = l_pos; b < body.size(); ++b) blank = blank && is_space(body[b]);
        if (blank && l_pos > 0) body = body.substr(0, l_pos);
      }
      emit_data(body, k);
      pos_ = e + 2;
      ends_with_newline_ = after_block_end(end_sign);
      return true;
    }
    fail(open, "Missing end of raw directive");
  }

  // Tokens of an expression or statement tag; returns whether the tag end consumed a newline.
  bool lex_tag(bool variable, size_t open) {
    out_.push_back(Token{variable ? Tok::VarBegin : Tok::BlockBegin, "", pos_of(open)});
    std::vector<char> balance;
    while (true) {
      if (pos_ >= src_.size()) fail(open, variable ? "unexpected end of template, expected '}}'" : "unexpected end of template, expected '%}'");
      if (balance.empty()) {
        if (variable) {
          if (src_.compare(pos_, 3, "-}}") == 0) {
            out_.push_back(Token{Tok::VarEnd, "", pos_of(pos_)});
            pos_ += 3;
            return after_block_end('-');
          }
          if (src_.compare(pos_, 2, "}}") == 0) {
            out_.push_back(Token{Tok::VarEnd, "", pos_of(pos_)});
            pos_ += 2;
            return false;
          }
        } else {
          char sign = 0;
          size_t k = pos_;
          if (src_[k] == '-' || src_[k] == '+') sign = src_[k++];
          if (src_.compare(k, 2, "%}") == 0) {
            out_.push_back(Token{Tok::BlockEnd, "", pos_of(pos_)});
            pos_ = k + 2;
            return after_block_end(sign);
          }
        }
      }
      const char c = src_[pos_];
      if (is_space(c)) {
        ++pos_;
        continue;
      }
      const size_t start = pos_;
      if (std::isdigit(static_cast<unsigned char>(c))) {
        lex_number();
        continue;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        while (pos_ < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
        out_.push_back(Token{Tok::Name, src_.substr(start, pos_ - start), pos_of(start)});
        continue;
      }
      if (c == '\'' || c == '"') {
        size_t k = pos_ + 1;
        while (k < src_.size() && src_[k] != c) k += src_[k] == '\\' ? 2 : 1;
        if (k >= src_.size()) fail(start, "unexpected end of string literal");
        const Pos p = pos_of(start);
        out_.push_back(Token{Tok::String, unescape(std::string_view(src_).substr(pos_ + 1, k - pos_ - 1), p), p});
        pos_ = k + 1;
        continue;
      }
      static constexpr std::string_view two[] = {"//", "**", "==", "!=", ">=", "<="};
      std::string op;
      for (auto t : two)
        if (src_.compare(pos_, 2, t) == 0) op = std::string(t);
      if (op.empty()) {
        if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos)
          fail(start, std::string("unexpected char '") + c + "'");
        op = std::string(1, c);
      }
      if (op == "(" || op == "[" || op == "{") {
        balance.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
      } else if (op == ")" || op == "]" || op == "}") {
        if (balance.empty()) fail(start, "unexpected '" + op + "'");
        if (balance.back() != op[0])
          fail(start, "unexpected '" + op + "', expected '" + std::string(1, balance.back()) + "'");
        balance.pop_back();
      }
      out_.push_back(Token{Tok::Op, op, pos_of(start)});
      pos_ += op.size();
    }
  }

  void lex_number() {
    const size_t start = pos_;
    auto digits = [&](auto pred) {
      const size_t b = pos_;
      while (pos_ < src_.size() && (pred(src_[pos_]) || (src_[pos_] == '_' && pos_ > b && pos_ + 1 < src_.size() && pred(src_[pos_ + 1])))) ++pos_;
      return pos_ > b;
    };
    auto dec = [](char ch) { return ch >= '0' && ch <= '9'; };
    std::string clean;
    if (src_[pos_] == '0' && pos_ + 1 < src_.size() && std::string_view("xXoObB").find(src_[pos_ + 1]) != std::string_view::npos) {
      const char base_c = static_cast<char>(std::tolower(src_[pos_ + 1]));
      const int base = base_c == 'x' ? 16 : base_c == 'o' ? 8 : 2;
      pos_ += 2;
      if (pos_ < src_.size() && src_[pos_] == '_') ++pos_;
      digits([&](char ch) {
        return base == 16 ? std::isxdigit(static_cast<unsigned char>(ch)) != 0 : (ch >= '0' && ch < '0' + base);
      });
      for (size_t k = start + 2; k < pos_; ++k)
        if (src_[k] != '_') clean += src_[k];
      out_.push_back(Token{Tok::Int, src_.substr(start, pos_ - start), pos_of(start), static_cast<int64_t>(std::strtoull(clean.c_str(), nullptr, base))});
      return;
    }
    digits(dec);
    bool is_float = false;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && dec(src_[pos_ + 1])) {
      ++pos_;
      digits(dec);
      is_float = true;
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t k = pos_ + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      if (k < src_.size() && dec(src_[k])) {
        pos_ = k;
        digits(dec);
        is_float = true;
      }
    }
    for (size_t k = start; k < pos_; ++k)
      if (src_[k] != '_') clean += src_[k];
    Token t{is_float ? Tok::Float : Tok::Int, src_.substr(start, pos_ - start), pos_of(start)};
    if (is_float) {
      t.float_value = std::strtod(clean.c_str(), nullptr);
    } else {
      errno = 0;
      t.int_value = std::strtoll(clean.c_str(), nullptr, 10);
      if (errno == ERANGE) fail(start, "integer literal too large");
    }
    out_.push_back(std::move(t));
  }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace ember::jinja
