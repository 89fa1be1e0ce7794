#pragma once
// Tool calls out of a model's reply, in the model family's own format (tool_call_format.h), whole or
// streamed. Text outside calls is the content, less the whitespace just before a call and at the end
// of the reply after a call. A block that is not a well-formed call (bad JSON, no name, a harmony
// message that is not addressed to a function) stays content, byte for byte, and so does a call cut off by the end of generation (finish reason
// "length"): no text is ever lost, and a reply with a partial call has no tool_calls.
//
// Streaming emits each call when its block is complete (a call is never retracted): its first chunk
// carries index, id and name, the next ones argument fragments that concatenate to `arguments`.
// For any split of a text into deltas, the concatenated stream equals parse_tool_calls() on it.
//
// Feed the parser the answer only: with a reasoning model, ReasoningParser (reasoning.h) runs first
// and its `content` goes here.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/tool_call_format.h"
#include "chat/tool_call_syntax.h"

namespace ember::chat {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // the arguments object as compact JSON
};

// One piece of a streamed call, as OpenAI's delta.tool_calls[i]: id and name only on a call's first.
struct ToolCallChunk {
  size_t index = 0;
  std::string id;
  std::string name;
  std::string arguments;
};

struct ToolCallDelta {
  std::string content;                    // comes before this delta's tool_calls
  std::vector<ToolCallChunk> tool_calls;
};

struct ParsedReply {
  std::string content;
  std::vector<ToolCall> tool_calls;
};

// Makes call ids. Default: OpenAI style "call_" + 24 random letters and digits; Mistral's template
// demands 9 letters and digits, so its calls get those.
using CallIdSource = std::function<std::string()>;
CallIdSource random_call_ids(ToolCallFormat format);

class ToolCallParser {
 public:
  explicit ToolCallParser(ToolCallFormat format, CallIdSource ids = {});
  // Holds back only a tail that may begin a call marker (and whitespace before it), or a call
  // still being written.
  ToolCallDelta push(std::string_view text);
  // End of generation: what was held back is content, or a call whose closing marker the stop
  // token replaced.
  ToolCallDelta flush();
  size_t calls() const { return calls_; }

 private:
  void advance(bool at_end, ToolCallDelta& out);
  bool start_block(ToolCallDelta& out);
  void emit_content(std::string_view text, ToolCallDelta& out);
  size_t held_tail() const;

  ToolCallFormat format_;
  CallIdSource ids_;
  std::string buf_;          // not yet decided
  bool in_block_ = false;    // buf_ starts with a marker (marker_len_ bytes) and the block after it
  size_t marker_len_ = 0;
  BlockScanCache cache_;     // the block's scan so far
  std::string space_before_; // whitespace before the block: dropped with a call, content without
  bool at_boundary_ = true;  // no content since the start or the last call (Llama's bare JSON call)
  bool after_call_ = false;  // no content since the last call: trailing whitespace is dropped
  size_t calls_ = 0;
};

ParsedReply parse_tool_calls(ToolCallFormat format, std::string_view text, CallIdSource ids = {});
// Adds a streamed delta to a reply (the way a client reassembles the stream).
void append_delta(ParsedReply& reply, const ToolCallDelta& delta);

// OpenAI's message.tool_calls and a streamed delta.tool_calls entry.
nlohmann::ordered_json tool_calls_json(const std::vector<ToolCall>& calls);
nlohmann::ordered_json tool_call_chunk_json(const ToolCallChunk& chunk);

}  // namespace ember::chat
