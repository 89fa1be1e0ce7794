#pragma once
// A forced tool call (tool_choice "required" or a named function) cut off by max_tokens or the
// context. The parser keeps an unfinished call as content, byte for byte; OpenAI returns what was
// written as tool_calls, finish_reason "length", the last call's arguments a prefix of its JSON.
#include <string_view>
#include <vector>

#include "chat/forced_tool_call.h"
#include "chat/tool_call_parser.h"

namespace ember::chat {

// The calls begun in `text`, a reply the grammar of `shapes` (forced_tool_calls) was forcing and
// that ended early: each with a whole name, the last with its arguments as far as they were written
// (the complete ones compact). Empty when the text does not get as far as a call's name.
std::vector<ToolCall> partial_tool_calls(const std::vector<ForcedToolCall>& shapes, std::string_view text,
                                         const CallIdSource& ids = {});

}  // namespace ember::chat
