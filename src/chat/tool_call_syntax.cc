#include "chat/tool_call_syntax.h"

#include <initializer_list>
#include <optional>

namespace ember::chat {
namespace {

using nlohmann::ordered_json;

enum class TcStep { kOk, kNeedMore, kBad };

bool tc_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Characters JSON allows outside strings: whitespace, punctuation, numbers, true/false/null.
bool tc_json_bare_char(char c) {
  if (tc_space(c) || (c >= '0' && c <= '9')) return true;
  for (char a : std::string_view("{}[],:-+.eEtrufalsn"))
    if (c == a) return true;
  return false;
}

constexpr int kMaxCallNesting = 64;  // deeper arguments stay text (and keep JSON recursion bounded)

// Reads a block left to right; each step says whether the text so far decides it.
class TcCursor {
 public:
  TcCursor(std::string_view text, bool at_end, BlockScanCache& cache) : s_(text), at_end_(at_end), cache_(cache) {}

  size_t pos() const { return pos_; }
  bool at_end() const { return at_end_; }
  bool rest_is_space() const {
    for (size_t i = pos_; i < s_.size(); ++i)
      if (!tc_space(s_[i])) return false;
    return true;
  }
  void ws() {
    while (pos_ < s_.size() && tc_space(s_[pos_])) ++pos_;
  }
  TcStep lit(std::string_view l) {
    const std::string_view rest = s_.substr(pos_);
    if (rest.substr(0, l.size()) == l) {
      pos_ += l.size();
      return TcStep::kOk;
    }
    if (rest.size() < l.size() && l.substr(0, rest.size()) == rest && !at_end_) return TcStep::kNeedMore;
    return TcStep::kBad;
  }
  TcStep optional_lit(std::string_view l) {
    const TcStep r = lit(l);
    return r == TcStep::kBad ? TcStep::kOk : r;
  }
  // Text up to `delim` (at most `max` bytes), which is consumed too.
  TcStep until(std::string_view delim, size_t max, std::string& out) {
    const std::string_view rest = s_.substr(pos_);
    const size_t at = rest.find(delim);
    if (at != std::string_view::npos && at <= max) {
      out = std::string(rest.substr(0, at));
      pos_ += at + delim.size();
      return TcStep::kOk;
    }
    return rest.size() >= max + delim.size() || at_end_ ? TcStep::kBad : TcStep::kNeedMore;
  }
  // One JSON object or array. Scanning resumes where the last call on this block stopped.
  TcStep json(ordered_json& out) {
    if (pos_ == s_.size()) return at_end_ ? TcStep::kBad : TcStep::kNeedMore;
    if (s_[pos_] != '{' && s_[pos_] != '[') return TcStep::kBad;
    BlockScanCache::Json* v = nullptr;
    for (auto& known : cache_.values)
      if (known.begin == pos_) v = &known;
    if (v == nullptr) {
      cache_.values.push_back({});
      v = &cache_.values.back();
      v->begin = v->next = pos_;
    }
    if (v->state == BlockScanCache::Json::kScanning) scan(*v);
    if (v->state == BlockScanCache::Json::kBad) return TcStep::kBad;
    if (v->state == BlockScanCache::Json::kScanning) return at_end_ ? TcStep::kBad : TcStep::kNeedMore;
    out = v->value;
    pos_ = v->end;
    return TcStep::kOk;
  }

 private:
  void scan(BlockScanCache::Json& v) const {
    using J = BlockScanCache::Json;
    for (size_t& i = v.next; i < s_.size(); ++i) {
      const char c = s_[i];
      if (v.in_string) {
        if (c == '\\') ++i;  // the escaped character is skipped, even when it has not arrived yet
        else if (c == '"') v.in_string = false;
        else if (static_cast<unsigned char>(c) < 0x20) v.state = J::kBad;
        if (v.state == J::kBad) return;
        continue;
      }
      if (c == '"') {
        v.in_string = true;
      } else if (c == '{' || c == '[') {
        if (v.closers.size() == kMaxCallNesting) {
          v.state = J::kBad;
          return;
        }
        v.closers.push_back(c == '{' ? '}' : ']');
      } else if (c == '}' || c == ']') {
        if (v.closers.back() != c) {
          v.state = J::kBad;
          return;
        }
        v.closers.pop_back();
        if (v.closers.empty()) return parse(v, i + 1);
      } else if (!tc_json_bare_char(c)) {
        v.state = J::kBad;
        return;
      }
    }
  }

  void parse(BlockScanCache::Json& v, size_t end) const {
    try {
      v.value = ordered_json::parse(s_.substr(v.begin, end - v.begin));
    } catch (const nlohmann::json::exception&) {  // a syntax error, or a number out of range
      v.state = BlockScanCache::Json::kBad;
      return;
    }
    v.end = end;
    v.state = BlockScanCache::Json::kComplete;
  }

  std::string_view s_;
  size_t pos_ = 0;
  bool at_end_;
  BlockScanCache& cache_;
};

// {name_key: "NAME", args_key: {...}} (the arguments may also come as a string holding an object).
std::optional<RawToolCall> tc_call_from(const ordered_json& v, const char* name_key,
                                        std::initializer_list<const char*> args_keys) {
  if (!v.is_object()) return std::nullopt;
  const auto name = v.find(name_key);
  if (name == v.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) return std::nullopt;
  for (const char* key : args_keys) {
    const auto args = v.find(key);
    if (args == v.end()) continue;
    RawToolCall call{name->get<std::string>(), *args};
    if (args->is_string()) {
      try {
        call.arguments = ordered_json::parse(args->get_ref<const std::string&>());
      } catch (const nlohmann::json::exception&) {
        return std::nullopt;
      }
    }
    if (!call.arguments.is_object()) return std::nullopt;
    return call;
  }
  return std::nullopt;
}

// A JSON list of calls (a lone object counts as a list of one).
bool tc_calls_from_list(const ordered_json& v, const char* name_key, std::initializer_list<const char*> args_keys,
                        std::vector<RawToolCall>& out) {
  if (v.is_object()) {
    auto call = tc_call_from(v, name_key, args_keys);
    if (!call) return false;
    out.push_back(std::move(*call));
    return true;
  }
  if (v.empty()) return false;
  for (const auto& item : v) {
    auto call = tc_call_from(item, name_key, args_keys);
    if (!call) return false;
    out.push_back(std::move(*call));
  }
  return true;
}

BlockScan tc_status(TcStep s) {
  BlockScan b;
  b.status = s == TcStep::kNeedMore ? BlockStatus::kNeedMore : BlockStatus::kBad;
  return b;
}

BlockScan tc_done(size_t end, std::vector<RawToolCall> calls) {
  BlockScan b;
  b.status = BlockStatus::kDone;
  b.end = end;
  b.calls = std::move(calls);
  return b;
}

#define TC_STEP(expr)                        \
  do {                                       \
    const TcStep tc_step_ = (expr);            \
    if (tc_step_ != TcStep::kOk) return tc_status(tc_step_); \
  } while (0)

// A closing literal that may be missing when the reply ended right after the call (its end token
// was the stop token).
BlockScan tc_close(TcCursor& c, std::string_view close, std::vector<RawToolCall> calls) {
  c.ws();
  const TcStep r = c.lit(close);
  if (r == TcStep::kOk || (c.at_end() && c.rest_is_space())) return tc_done(c.pos(), std::move(calls));
  return tc_status(r);
}

// One {"name", ARGS} object, then `close` (none for Llama 3).
BlockScan tc_scan_object(TcCursor& c, std::initializer_list<const char*> args_keys, std::string_view close) {
  c.ws();
  ordered_json v;
  TC_STEP(c.json(v));
  auto call = tc_call_from(v, "name", args_keys);
  if (!call) return tc_status(TcStep::kBad);
  if (close.empty()) return tc_done(c.pos(), {std::move(*call)});
  return tc_close(c, close, {std::move(*call)});
}

BlockScan tc_scan_list(TcCursor& c, const char* name_key, std::initializer_list<const char*> args_keys) {
  c.ws();
  ordered_json v;
  TC_STEP(c.json(v));
  std::vector<RawToolCall> calls;
  if (!tc_calls_from_list(v, name_key, args_keys, calls)) return tc_status(TcStep::kBad);
  return tc_done(c.pos(), std::move(calls));
}

BlockScan tc_scan_command_r(TcCursor& c) {
  c.ws();
  TC_STEP(c.optional_lit("```json"));
  c.ws();
  ordered_json v;
  TC_STEP(c.json(v));
  std::vector<RawToolCall> calls;
  if (!tc_calls_from_list(v, "tool_name", {"parameters"}, calls)) return tc_status(TcStep::kBad);
  c.ws();
  TC_STEP(c.optional_lit("```"));
  return tc_done(c.pos(), std::move(calls));
}

// The header between <|start|> or <|channel|> and <|message|>; a call names its recipient there.
BlockScan tc_scan_harmony(TcCursor& c) {
  std::string header;
  TC_STEP(c.until("<|message|>", 256, header));
  for (size_t at = header.find("<|"); at != std::string::npos; at = header.find("<|", at + 2)) {
    const std::string_view tok = std::string_view(header).substr(at);
    if (tok.substr(0, 11) != "<|channel|>" && tok.substr(0, 13) != "<|constrain|>") return tc_status(TcStep::kBad);
  }
  const std::string_view kTo = "to=functions.";
  const size_t to = header.find(kTo);
  if (to == std::string::npos) return tc_status(TcStep::kBad);  // a message, not a call
  size_t end = to + kTo.size();
  while (end < header.size() && !tc_space(header[end]) && header[end] != '<') ++end;
  RawToolCall call{header.substr(to + kTo.size(), end - to - kTo.size()), ordered_json()};
  if (call.name.empty()) return tc_status(TcStep::kBad);
  c.ws();
  TC_STEP(c.json(call.arguments));
  if (!call.arguments.is_object()) return tc_status(TcStep::kBad);
  return tc_close(c, "<|call|>", {std::move(call)});
}

BlockScan tc_scan_deepseek(TcCursor& c) {
  std::vector<RawToolCall> calls;
  for (;;) {
    c.ws();
    if (!calls.empty() && c.at_end() && c.rest_is_space()) return tc_done(c.pos(), std::move(calls));
    TC_STEP(c.lit("<｜tool▁call▁begin｜>"));
    std::string type;
    RawToolCall call;
    TC_STEP(c.until("<｜tool▁sep｜>", 32, type));
    TC_STEP(c.until("\n", 256, call.name));
    if (call.name.empty()) return tc_status(TcStep::kBad);
    c.ws();
    TC_STEP(c.lit("```json"));
    c.ws();
    TC_STEP(c.json(call.arguments));
    if (!call.arguments.is_object()) return tc_status(TcStep::kBad);
    c.ws();
    TC_STEP(c.lit("```"));
    c.ws();
    TC_STEP(c.lit("<｜tool▁call▁end｜>"));
    calls.push_back(std::move(call));
    c.ws();
    const TcStep end = c.lit("<｜tool▁calls▁end｜>");
    if (end == TcStep::kOk) return tc_done(c.pos(), std::move(calls));
    if (end == TcStep::kNeedMore) return tc_status(end);
  }
}

#undef TC_STEP

}  // namespace

const std::vector<std::string>& tool_call_markers(ToolCallFormat format) {
  static const std::vector<std::string> kHermes{"<tool_call>"}, kLlama{"<|python_tag|>"}, kMistral{"[TOOL_CALLS]"},
      kCommandR{"Action:"}, kGranite{"<|tool_call|>"}, kHarmony{"<|start|>", "<|channel|>"},
      kDeepSeek{"<｜tool▁calls▁begin｜>"};
  switch (format) {
    case ToolCallFormat::kHermes: return kHermes;
    case ToolCallFormat::kLlama3: return kLlama;
    case ToolCallFormat::kMistral: return kMistral;
    case ToolCallFormat::kCommandR: return kCommandR;
    case ToolCallFormat::kGranite: return kGranite;
    case ToolCallFormat::kHarmony: return kHarmony;
    case ToolCallFormat::kDeepSeekR1: return kDeepSeek;
  }
  return kHermes;
}

bool json_opens_tool_call(ToolCallFormat format) { return format == ToolCallFormat::kLlama3; }

BlockScan scan_tool_call_block(ToolCallFormat format, std::string_view text, bool at_end, BlockScanCache& cache) {
  TcCursor c(text, at_end, cache);
  switch (format) {
    case ToolCallFormat::kHermes: return tc_scan_object(c, {"arguments", "parameters"}, "</tool_call>");
    case ToolCallFormat::kLlama3: return tc_scan_object(c, {"parameters", "arguments"}, "");
    case ToolCallFormat::kMistral:
    case ToolCallFormat::kGranite: return tc_scan_list(c, "name", {"arguments", "parameters"});
    case ToolCallFormat::kCommandR: return tc_scan_command_r(c);
    case ToolCallFormat::kHarmony: return tc_scan_harmony(c);
    case ToolCallFormat::kDeepSeekR1: return tc_scan_deepseek(c);
  }
  return tc_status(TcStep::kBad);
}

}  // namespace ember::chat
