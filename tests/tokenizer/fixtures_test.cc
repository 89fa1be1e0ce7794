// Every line of every shared tokenizer fixture: ids, decoded and decoded_skip_special exact, and the
// streaming detokenizer agreeing with decode.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "stream_all.h"
#include "tokenizer_cases.h"

namespace ember::tokenizer {
namespace {

class Fixture : public ::testing::TestWithParam<std::string> {};

TEST_P(Fixture, EveryLineMatches) {
  const std::string name = GetParam();
  const Tokenizer tok = Tokenizer::from_folder(test::tokenizer_dir(name));
  const auto lines = test::read_jsonl(test::tokenizer_jsonl(name));
  ASSERT_FALSE(lines.empty());
  size_t failures = 0;
  for (const auto& line : lines) {
    const std::string text = line["text"];
    const bool add = line["add_special_tokens"];
    const auto expected = line["ids"].get<std::vector<int32_t>>();
    const auto ids = tok.encode(text, add);
    const std::string decoded = tok.decode(expected, false);
    const std::string skipped = tok.decode(expected, true);
    const bool ok = ids == expected && decoded == line["decoded"] && skipped == line["decoded_skip_special"] &&
                    test::stream_all(tok, expected, false) == decoded && test::stream_all(tok, expected, true) == skipped;
    if (!ok && ++failures <= 5) {
      ADD_FAILURE() << name << " " << line["case"].get<std::string>() << " add=" << add << "\n text: " << line["text"]
                    << "\n expected ids: " << line["ids"] << "\n got ids:      " << nlohmann::json(ids)
                    << "\n expected decoded: " << line["decoded"] << "\n got decoded:      " << nlohmann::json(decoded)
                    << "\n expected skip: " << line["decoded_skip_special"]
                    << "\n got skip:      " << nlohmann::json(skipped);
    }
  }
  EXPECT_EQ(failures, 0u) << name << ": " << failures << " of " << lines.size() << " lines differ";
}

INSTANTIATE_TEST_SUITE_P(Shared, Fixture, ::testing::ValuesIn(test::tokenizer_case_names()),
                         test::TokenizerParamName());

}  // namespace
}  // namespace ember::tokenizer
