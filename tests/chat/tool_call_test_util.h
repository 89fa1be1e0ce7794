#pragma once
// Helpers of the tool-call tests: deterministic ids, streaming a text in pieces, comparing replies.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_call_parser.h"

namespace ember::chat::test {

inline CallIdSource counting_ids() {
  auto n = std::make_shared<int>(0);
  return [n] { return "call_" + std::to_string((*n)++); };
}

inline ParsedReply parse_counted(ToolCallFormat f, std::string_view text) {
  return parse_tool_calls(f, text, counting_ids());
}

// The text fed as the given pieces, then flushed.
inline ParsedReply stream_pieces(ToolCallFormat f, const std::vector<std::string_view>& pieces) {
  ToolCallParser p(f, counting_ids());
  ParsedReply r;
  for (std::string_view piece : pieces) append_delta(r, p.push(piece));
  append_delta(r, p.flush());
  return r;
}

inline void expect_same_reply(const ParsedReply& got, const ParsedReply& want, const std::string& how) {
  EXPECT_EQ(got.content, want.content) << how;
  ASSERT_EQ(got.tool_calls.size(), want.tool_calls.size()) << how;
  for (size_t i = 0; i < want.tool_calls.size(); ++i) {
    EXPECT_EQ(got.tool_calls[i].id, want.tool_calls[i].id) << how << ", call " << i;
    EXPECT_EQ(got.tool_calls[i].name, want.tool_calls[i].name) << how << ", call " << i;
    EXPECT_EQ(got.tool_calls[i].arguments, want.tool_calls[i].arguments) << how << ", call " << i;
  }
}

// Streaming equals the whole-text parse for a split at every position, byte by byte, and for
// random splits.
inline void expect_split_invariant(ToolCallFormat f, std::string_view text) {
  const ParsedReply whole = parse_counted(f, text);
  for (size_t i = 0; i <= text.size(); ++i)
    expect_same_reply(stream_pieces(f, {text.substr(0, i), text.substr(i)}), whole, "split at " + std::to_string(i));
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
  expect_same_reply(stream_pieces(f, bytes), whole, "byte by byte");
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string_view> pieces;
    for (size_t at = 0; at < text.size();) {
      const size_t n = std::min<size_t>(text.size() - at, std::uniform_int_distribution<size_t>(1, 12)(rng));
      pieces.push_back(text.substr(at, n));
      at += n;
    }
    expect_same_reply(stream_pieces(f, pieces), whole, "random split, round " + std::to_string(round));
  }
}

}  // namespace ember::chat::test
