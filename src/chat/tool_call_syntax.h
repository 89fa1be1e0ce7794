#pragma once
// How each family writes a block of tool calls: the markers that open one and a scanner that
// reads the block after its marker. Used by ToolCallParser; the scanners are pure functions of the
// text so far, which is what makes streaming and whole-text parsing agree.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/tool_call_format.h"

namespace ember::chat {

struct RawToolCall {
  std::string name;
  nlohmann::ordered_json arguments;  // an object
};

enum class BlockStatus { kNeedMore, kDone, kBad };

struct BlockScan {
  BlockStatus status = BlockStatus::kNeedMore;
  size_t end = 0;  // kDone: bytes of the block consumed (from just after the marker)
  std::vector<RawToolCall> calls;
};

// The literal texts that open a block of calls anywhere in a reply.
const std::vector<std::string>& tool_call_markers(ToolCallFormat format);
// True when a bare JSON object opens a call where the reply starts (or a call just ended): Llama 3.
bool json_opens_tool_call(ToolCallFormat format);

// What scanning a block learned so far, kept between scans of the same growing block so that a
// long call costs linear time, not quadratic. A fresh one for each block.
struct BlockScanCache {
  struct Json {  // one JSON value of the block
    enum State { kScanning, kComplete, kBad };
    size_t begin = 0, next = 0, end = 0;  // where it starts, where scanning resumes, where it ended
    std::string closers;                  // the brackets still open
    bool in_string = false;
    State state = kScanning;
    nlohmann::ordered_json value;
  };
  std::vector<Json> values;
};

// Reads the block in `text` (which starts just after the marker, or at the '{' of a bare JSON call).
// Monotone: kDone or kBad for a text stays the same for every continuation of it; kNeedMore only
// when !at_end.
// `cache` must come from earlier scans of prefixes of this same block (or be fresh).
BlockScan scan_tool_call_block(ToolCallFormat format, std::string_view text, bool at_end, BlockScanCache& cache);

}  // namespace ember::chat
