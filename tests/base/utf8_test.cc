#include "base/utf8.h"

#include <gtest/gtest.h>

namespace ember::utf8 {

TEST(Utf8, AppendAndDecodeRoundTrip) {
  for (char32_t cp : {U'a', U'\u00e9', U'\u20ac', U'\U0001F600', U'\u0000'}) {
    std::string s;
    append(s, cp);
    size_t pos = 0;
    EXPECT_EQ(decode(s, pos), cp);
    EXPECT_EQ(pos, s.size());
  }
}

TEST(Utf8, CompletePrefixHoldsBackPartialCharacter) {
  const std::string euro = "\xE2\x82\xAC";
  EXPECT_EQ(complete_prefix("ab" + euro.substr(0, 2)), 2u);
  EXPECT_EQ(complete_prefix("ab" + euro), 5u);
  EXPECT_EQ(complete_prefix("\xF0\x9F"), 0u);
  EXPECT_EQ(complete_prefix("a\x80"), 2u);  // a stray continuation byte can never complete
}

TEST(Utf8, ValidityAndSanitize) {
  EXPECT_TRUE(is_valid("h\xC3\xA9llo"));
  EXPECT_FALSE(is_valid("\xC0\xAF"));        // overlong
  EXPECT_FALSE(is_valid("\xED\xA0\x80"));    // surrogate
  EXPECT_EQ(sanitize("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  // A truncated sequence is one maximal invalid subpart: one replacement character.
  EXPECT_EQ(sanitize("\xE2\x82" "a"), "\xEF\xBF\xBD" "a");
  EXPECT_EQ(sanitize("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate: 3
}

}  // namespace ember::utf8
