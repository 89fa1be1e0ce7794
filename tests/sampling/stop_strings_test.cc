#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "base/utf8.h"
#include "sampling/stop_strings.h"

namespace ember::sampling {
namespace {

// Feeds the deltas; returns everything emitted (plus flush() when no stop happened).
std::string run(StopStringMatcher& m, const std::vector<std::string>& deltas) {
  std::string out;
  for (const std::string& d : deltas) {
    const auto r = m.feed(d);
    EXPECT_TRUE(utf8::is_valid(r.text)) << "emitted a split character";
    out += r.text;
    if (r.stopped) return out;
  }
  return out + m.flush();
}

TEST(StopStrings, StopSpanningTwoDeltasIsNotPrinted) {
  StopStringMatcher m({"\nUser:"});
  const auto r1 = m.feed("Hello there.\nUs");
  EXPECT_EQ(r1.text, "Hello there.");  // "\nUs" could begin the stop string: held back
  EXPECT_FALSE(r1.stopped);
  EXPECT_EQ(m.held(), 3u);
  const auto r2 = m.feed("er: next");
  EXPECT_TRUE(r2.stopped);
  EXPECT_EQ(r2.text, "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), 0);
  EXPECT_EQ(m.feed("more").text, "");
}

TEST(StopStrings, FalseStartIsReleased) {
  StopStringMatcher m({"STOP"});
  EXPECT_EQ(m.feed("a ST").text, "a ");
  EXPECT_EQ(m.feed("ATE").text, "STATE");
  EXPECT_EQ(run(m, {" S", "TO", "P!"}), " ");
}

TEST(StopStrings, StopInsideOneDeltaKeepsTheTextBefore) {
  StopStringMatcher m({"###", "END"});
  const auto r = m.feed("abc END def ### ghi");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "abc ");
  EXPECT_EQ(m.matched(), 1);  // the earliest occurrence wins
}

TEST(StopStrings, StopOverManySingleByteDeltas) {
  StopStringMatcher m({"</answer>"});
  std::vector<std::string> deltas;
  for (char c : std::string("42</answ</answer>tail")) deltas.emplace_back(1, c);
  EXPECT_EQ(run(m, deltas), "42</answ");
}

TEST(StopStrings, NeverSplitsUtf8) {
  // "é" (C3 A9) and "€" (E2 82 AC) fed byte by byte; the stop string starts with "€" too.
  StopStringMatcher m({"€$"});
  const std::string text = "caf\xC3\xA9 \xE2\x82\xAC 5 \xE2\x82\xAC$ rest";
  std::vector<std::string> deltas;
  for (char c : text) deltas.emplace_back(1, c);
  EXPECT_EQ(run(m, deltas), "caf\xC3\xA9 \xE2\x82\xAC 5 ");
}

TEST(StopStrings, FlushReleasesHeldText) {
  StopStringMatcher m({"<|end|>"});
  EXPECT_EQ(m.feed("bye <|en").text, "bye ");
  EXPECT_EQ(m.flush(), "<|en");
  StopStringMatcher cut({"x"});
  EXPECT_EQ(cut.feed("ab\xE2\x82").text, "ab");
  const std::string tail = cut.flush();  // a truncated character ends as U+FFFD
  EXPECT_TRUE(utf8::is_valid(tail));
  EXPECT_NE(tail.find("\xEF\xBF\xBD"), std::string::npos);
}

TEST(StopStrings, NoStopsPassesTextThrough) {
  StopStringMatcher m({});
  EXPECT_EQ(m.feed("anything").text, "anything");
}

TEST(StopStrings, RejectsBadStops) {
  EXPECT_THROW(StopStringMatcher({""}), Error);
  EXPECT_THROW(StopStringMatcher({"\xC3"}), Error);
}

}  // namespace
}  // namespace ember::sampling
