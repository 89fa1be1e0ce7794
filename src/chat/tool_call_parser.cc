#include "chat/tool_call_parser.h"

#include <algorithm>
#include <memory>
#include <random>

#include "chat/tool_call_syntax.h"

namespace ember::chat {
namespace {

bool tcp_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

CallIdSource random_call_ids(ToolCallFormat format) {
  auto rng = std::make_shared<std::mt19937_64>(std::random_device{}());
  const bool mistral = format == ToolCallFormat::kMistral;
  return [rng, mistral] {
    static constexpr std::string_view kAlnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    std::uniform_int_distribution<size_t> pick(0, kAlnum.size() - 1);
    std::string id = mistral ? "" : "call_";
    for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlnum[pick(*rng)];
    return id;
  };
}

ToolCallParser::ToolCallParser(ToolCallFormat format, CallIdSource ids)
    : format_(format), ids_(ids ? std::move(ids) : random_call_ids(format)) {}

ToolCallDelta ToolCallParser::push(std::string_view text) {
  ToolCallDelta out;
  buf_ += text;
  advance(/*at_end=*/false, out);
  return out;
}

ToolCallDelta ToolCallParser::flush() {
  ToolCallDelta out;
  advance(/*at_end=*/true, out);
  return out;
}

void ToolCallParser::emit_content(std::string_view text, ToolCallDelta& out) {
  if (text.empty()) return;
  out.content += text;
  if (std::any_of(text.begin(), text.end(), [](char c) { return !tcp_space(c); })) at_boundary_ = after_call_ = false;
}

// The earliest marker (the families' markers never contain one another, so the earliest complete
// one is the earliest at all) or, where a bare JSON call may start, its '{'.
bool ToolCallParser::start_block(ToolCallDelta& out) {
  size_t at = std::string::npos, len = 0;
  if (json_opens_tool_call(format_) && at_boundary_) {
    const size_t first = buf_.find_first_not_of(" \t\n\r");
    if (first != std::string::npos && buf_[first] == '{') at = first;
  }
  if (at == std::string::npos)
    for (const std::string& m : tool_call_markers(format_)) {
      const size_t found = buf_.find(m);
      if (found < at) {
        at = found;
        len = m.size();
      }
    }
  if (at == std::string::npos) return false;
  size_t text_end = at;
  while (text_end > 0 && tcp_space(buf_[text_end - 1])) --text_end;
  emit_content(std::string_view(buf_).substr(0, text_end), out);
  space_before_ = buf_.substr(text_end, at - text_end);
  buf_.erase(0, at);
  in_block_ = true;
  marker_len_ = len;
  cache_ = {};
  return true;
}

// The longest tail that is a proper prefix of a marker, and the whitespace before it.
size_t ToolCallParser::held_tail() const {
  size_t keep = 0;
  for (const std::string& m : tool_call_markers(format_))
    for (size_t n = std::min(m.size() - 1, buf_.size()); n > keep; --n)
      if (buf_.compare(buf_.size() - n, n, m, 0, n) == 0) {
        keep = n;
        break;
      }
  while (keep < buf_.size() && tcp_space(buf_[buf_.size() - keep - 1])) ++keep;
  return keep;
}

void ToolCallParser::advance(bool at_end, ToolCallDelta& out) {
  for (;;) {
    if (in_block_) {
      BlockScan scan = scan_tool_call_block(format_, std::string_view(buf_).substr(marker_len_), at_end, cache_);
      if (scan.status == BlockStatus::kNeedMore) return;
      if (scan.status == BlockStatus::kDone) {
        for (RawToolCall& call : scan.calls) {
          out.tool_calls.push_back({calls_, ids_(), std::move(call.name), ""});
          out.tool_calls.push_back(
              {calls_, "", "", call.arguments.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)});
          ++calls_;
        }
        buf_.erase(0, marker_len_ + scan.end);
        space_before_.clear();
        in_block_ = false;
        after_call_ = at_boundary_ = true;
        continue;
      }
      // Not a call: its marker (or the '{' of a bare JSON block) is content, what follows is read again.
      const size_t n = std::max<size_t>(marker_len_, 1);
      const std::string text = space_before_ + buf_.substr(0, n);
      space_before_.clear();
      buf_.erase(0, n);
      in_block_ = false;
      emit_content(text, out);
      at_boundary_ = false;
      continue;
    }
    if (start_block(out)) continue;
    // Whitespace is held back (a call may follow it); after the last call it ends the reply unseen.
    if (at_end && after_call_ && buf_.find_first_not_of(" \t\n\r") == std::string::npos) buf_.clear();
    const size_t ready = buf_.size() - (at_end ? 0 : held_tail());
    emit_content(std::string_view(buf_).substr(0, ready), out);
    buf_.erase(0, ready);
    return;
  }
}

ParsedReply parse_tool_calls(ToolCallFormat format, std::string_view text, CallIdSource ids) {
  ToolCallParser parser(format, std::move(ids));
  ParsedReply reply;
  append_delta(reply, parser.push(text));
  append_delta(reply, parser.flush());
  return reply;
}

void append_delta(ParsedReply& reply, const ToolCallDelta& delta) {
  reply.content += delta.content;
  for (const ToolCallChunk& c : delta.tool_calls) {
    if (c.index >= reply.tool_calls.size()) reply.tool_calls.resize(c.index + 1);
    ToolCall& call = reply.tool_calls[c.index];
    if (!c.id.empty()) call.id = c.id;
    if (!c.name.empty()) call.name = c.name;
    call.arguments += c.arguments;
  }
}

nlohmann::ordered_json tool_calls_json(const std::vector<ToolCall>& calls) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const ToolCall& c : calls)
    out.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return out;
}

nlohmann::ordered_json tool_call_chunk_json(const ToolCallChunk& chunk) {
  nlohmann::ordered_json out{{"index", chunk.index}};
  nlohmann::ordered_json function = nlohmann::ordered_json::object();
  if (!chunk.id.empty()) {
    out["id"] = chunk.id;
    out["type"] = "function";
    function["name"] = chunk.name;
  }
  function["arguments"] = chunk.arguments;
  out["function"] = function;
  return out;
}

}  // namespace ember::chat
