// Property tests on random valid UTF-8 (fixed seed): round trips for the lossless tokenizers, and the
// streaming detokenizer agreeing with decode on encoded text and on arbitrary id sequences.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <set>

#include "base/error.h"
#include "base/utf8.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "stream_all.h"
#include "tokenizer_cases.h"

namespace ember::tokenizer {
namespace {

// Random text made of the pieces tokenizers find hard.
std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> fragments = {
      "Hello",
      "world",
      "the",
      "don't",
      "I'M",
      "we'll",
      "42",
      "3.14159",
      "1234567",
      ",",
      ".",
      "!?",
      "()",
      "{}",
      "def f(x):\n    return x",
      "<|im_star",
      "< s>",
      "</s",
      "<|endoftext",
      "[INST",
      "<0x41>",
      "<think",
      "|>",
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",  // family: ZWJ sequence
      "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",                                          // thumbs up + skin tone
      "\xF0\x9F\x8F\xB3\xEF\xB8\x8F\xE2\x80\x8D\xF0\x9F\x8C\x88",                  // rainbow flag
      "\xC3\xA9",
      "\xC3\xB1",
      "\xC3\x9F",
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82",                          // é ñ ß Привет
      "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7",                                  // Arabic
      "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87",  // Devanagari
  };
  static const std::vector<std::string> spaces = {" ",    "  ",   "   ",      "\t",           "\n",  "\r\n",
                                                  "\n\n", " \n ", "\xC2\xA0", "\xE3\x80\x80", "    "};
  std::string s;
  const int n = std::uniform_int_distribution<int>(0, 12)(rng);
  for (int i = 0; i < n; ++i) {
    switch (std::uniform_int_distribution<int>(0, 5)(rng)) {
      case 0:
        s += fragments[std::uniform_int_distribution<size_t>(0, fragments.size() - 1)(rng)];
        break;
      case 1:
        s += spaces[std::uniform_int_distribution<size_t>(0, spaces.size() - 1)(rng)];
        break;
      case 2:  // CJK ideographs
        for (int k = std::uniform_int_distribution<int>(1, 4)(rng); k > 0; --k)
          utf8::append(s, std::uniform_int_distribution<char32_t>(0x4E00, 0x9FFF)(rng));
        break;
      case 3:  // a letter with combining marks
        s += static_cast<char>('a' + std::uniform_int_distribution<int>(0, 25)(rng));
        for (int k = std::uniform_int_distribution<int>(1, 3)(rng); k > 0; --k)
          utf8::append(s, std::uniform_int_distribution<char32_t>(0x0300, 0x036F)(rng));
        break;
      case 4:  // any scalar value outside U+2581 (which Metaspace tokenizers use as their space)
      {
        char32_t c;
        do c = std::uniform_int_distribution<char32_t>(1, 0x10FFFF)(rng);
        while ((c >= 0xD800 && c <= 0xDFFF) || c == 0x2581);
        utf8::append(s, c);
        break;
      }
      default:
        s += fragments[std::uniform_int_distribution<size_t>(0, 5)(rng)];
        break;
    }
  }
  return s;
}

// What decode(encode(s)) gives back, found by running this test: s itself for the lossless
// tokenizers, NFC(s) for qwen3; nothing for the lossy ones (reason in the comment).
std::optional<std::string> round_trip(const std::string& name, const std::string& s) {
  if (name == "qwen3") return unicode::normalize(s, unicode::Form::NFC);
  if (name == "mistral-7b-instruct-v0.3") return std::nullopt;  // prepend_scheme first drops a leading space
  if (name == "phi-3-mini") return std::nullopt;                // rstrip added tokens eat spaces
  if (name == "falcon-7b") return std::nullopt;                 // vocab lacks bytes 0xF2, 0xF5.. and controls
  if (name == "tinystories-656k" || name == "chat-skills") return std::nullopt;  // few byte tokens: <unk>
  return s;
}

class Property : public ::testing::TestWithParam<std::string> {};

TEST_P(Property, RoundTripAndStreaming) {
  const std::string name = GetParam();
  const Tokenizer tok = Tokenizer::from_folder(test::tokenizer_dir(name));
  std::mt19937 rng(20240726);
  size_t failures = 0;
  for (int i = 0; i < 300 && failures < 5; ++i) {
    std::string text = random_text(rng);
    const auto plain = tok.encode(text, false);
    const auto expected = round_trip(name, text);
    if (expected && tok.decode(plain, false) != *expected) {
      ++failures;
      ADD_FAILURE() << name << ": round trip of " << nlohmann::json(text) << " gave "
                    << nlohmann::json(tok.decode(plain, false));
    }
    const auto ids = tok.encode(text, true);
    for (bool skip : {false, true})
      if (test::stream_all(tok, ids, skip) != tok.decode(ids, skip)) {
        ++failures;
        ADD_FAILURE() << name << ": stream differs from decode for " << nlohmann::json(text) << " skip=" << skip;
      }
  }
}

TEST_P(Property, StreamingRandomIds) {
  const std::string name = GetParam();
  const Tokenizer tok = Tokenizer::from_folder(test::tokenizer_dir(name));
  std::mt19937 rng(7);
  // Random ids, biased towards the low ids where byte tokens and specials live.
  std::uniform_int_distribution<int32_t> any(0, tok.vocab_size() - 1), low(0, std::min(tok.vocab_size() - 1, 300));
  size_t failures = 0;
  for (int i = 0; i < 300 && failures < 5; ++i) {
    std::vector<int32_t> ids;
    for (int k = std::uniform_int_distribution<int>(0, 20)(rng); k > 0; --k) {
      int32_t id = (rng() & 1) ? any(rng) : low(rng);
      try {
        tok.id_to_token(id);
      } catch (const Error&) {
        continue;  // a hole in the vocabulary
      }
      ids.push_back(id);
    }
    for (bool skip : {false, true}) {
      const std::string full = tok.decode(ids, skip);
      if (test::stream_all(tok, ids, skip) != full) {
        ++failures;
        ADD_FAILURE() << name << ": stream differs from decode for ids " << nlohmann::json(ids) << " skip=" << skip;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, Property, ::testing::ValuesIn(test::tokenizer_case_names()),
                         test::TokenizerParamName());

}  // namespace
}  // namespace ember::tokenizer
