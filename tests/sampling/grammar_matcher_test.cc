// The parser state and its token masks: acceptance byte by byte (UTF-8 split anywhere), and every
// mask against a brute-force reference on real vocabularies (each token's bytes fed to a second
// matcher in the same state).
#include <gtest/gtest.h>

#include "base/utf8.h"
#include "engine/grammar_constraint.h"
#include "sampling/json_schema.h"
#include "grammar_test_util.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace ember::grammar {
namespace {

using test::compile;

TEST(MatcherTest, CompleteAndContinue) {
  const auto g = compile("root ::= \"a\" \"b\"?");
  Matcher m(g, test::byte_vocabulary());
  EXPECT_FALSE(m.complete());
  EXPECT_TRUE(m.accept_bytes("a"));
  EXPECT_TRUE(m.complete());
  EXPECT_TRUE(m.can_continue());
  EXPECT_FALSE(m.accept_bytes("c"));  // refused, state unchanged
  EXPECT_TRUE(m.accept_bytes("b"));
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.can_continue());
}

TEST(MatcherTest, Utf8SplitAcrossFeeds) {
  const auto g = compile("root ::= [\\u0400-\\u04FF]+ \"\\U0001F600\"");
  const std::string text = "\xD0\xBF\xD1\x80\xF0\x9F\x98\x80";  // "пр😀"
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    Matcher m(g, test::byte_vocabulary());
    ASSERT_TRUE(m.accept_bytes(text.substr(0, cut))) << cut;
    ASSERT_TRUE(m.accept_bytes(text.substr(cut))) << cut;
    EXPECT_TRUE(m.complete());
  }
  Matcher m(g, test::byte_vocabulary());
  EXPECT_FALSE(m.accept_bytes("\xC3"));      // U+00C0..U+00FF: outside the class already
  EXPECT_TRUE(m.accept_bytes("\xD0"));
  EXPECT_FALSE(m.accept_bytes("a"));         // not a continuation byte
  EXPECT_FALSE(m.accept_bytes("\xC0\x80"));  // never an overlong form
}

TEST(MatcherTest, SurrogatesAndOverlongsAreNotCharacters) {
  const auto g = compile("root ::= .");
  EXPECT_TRUE(test::accepts(g, "\xE2\x82\xAC"));
  EXPECT_FALSE(test::accepts_prefix(g, "\xED\xA0"));      // U+D800..
  EXPECT_FALSE(test::accepts_prefix(g, "\xE0\x80"));      // overlong 3-byte
  EXPECT_FALSE(test::accepts_prefix(g, "\xF4\x90"));      // above U+10FFFF
  EXPECT_FALSE(test::accepts_prefix(g, "\xC1"));          // overlong lead
}

TEST(MatcherTest, LongRightRecursionKeepsWorking) {
  const auto g = compile("root ::= [a]* \"!\"");
  Matcher m(g, test::byte_vocabulary());
  for (int i = 0; i < 100000; ++i) ASSERT_TRUE(m.accept_bytes("a"));
  EXPECT_TRUE(m.accept_bytes("!"));
  EXPECT_TRUE(m.complete());
}

struct LoadedVocab {
  tokenizer::Tokenizer tok;
  std::shared_ptr<const Vocabulary> vocab;
};

const LoadedVocab& vocab_of(const std::string& name) {
  static std::map<std::string, LoadedVocab> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    auto tok = tokenizer::Tokenizer::from_folder(ember::test::shared_path("tokenizers", name));
    auto v = engine::grammar_vocabulary(tok);
    it = cache.emplace(name, LoadedVocab{std::move(tok), std::move(v)}).first;
  }
  return it->second;
}

TEST(VocabularyTest, TokenBytesAreTheDecodedBytes) {
  for (const char* name : {"qwen3", "llama-3.2"}) {
    const LoadedVocab& lv = vocab_of(name);
    size_t partial = 0, checked = 0;
    for (int32_t id = 0; id < lv.tok.vocab_size(); ++id) {
      const auto b = lv.tok.token_bytes(id);
      if (!b || lv.tok.is_special(id)) continue;
      if (utf8::is_valid(*b)) {
        ASSERT_EQ(*b, lv.tok.decode(std::vector<int32_t>{id}, false)) << name << " token " << id;
        ++checked;
      } else {
        ++partial;  // a piece of a character: decode alone shows U+FFFD, the bytes stay exact
      }
    }
    EXPECT_GT(partial, 0u) << name;
    EXPECT_GT(checked, partial) << name;
  }
}

// SentencePiece byte-fallback tokens ("<0x81>") are their byte, through Replace, Fuse and Strip too.
TEST(VocabularyTest, ByteFallbackTokensAreTheirByte) {
  const auto tok = tokenizer::Tokenizer::from_folder(ember::test::shared_path("tokenizers", "tinyllama-1.1b-chat"));
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    const auto id = tok.token_to_id(name);
    ASSERT_TRUE(id) << name;
    EXPECT_EQ(tok.token_bytes(*id), std::string(1, static_cast<char>(b))) << name;
  }
  EXPECT_EQ(tok.token_bytes(*tok.token_to_id("\xE2\x96\x81the")), " the");  // no leading space stripped
}

TEST(VocabularyTest, TrieHoldsEveryUsableTokenOnce) {
  const LoadedVocab& lv = vocab_of("qwen3");
  const Vocabulary& v = *lv.vocab;
  std::vector<int> seen(v.size(), 0);
  std::vector<std::string> prefix(v.max_depth() + 1);
  for (size_t i = 0; i < v.nodes(); ++i) {
    const Vocabulary::Node& nd = v.node_data()[i];
    const size_t d = nd.depth;
    prefix[d] = prefix[d - 1] + static_cast<char>(nd.byte);
    ASSERT_GT(nd.skip, i);
    for (uint32_t k = nd.tokens; k < v.node_data()[i + 1].tokens; ++k) {
      const int32_t id = v.node_tokens()[k];
      ASSERT_EQ(v.bytes(id), prefix[d]);
      ++seen[static_cast<size_t>(id)];
    }
  }
  for (size_t id = 0; id < v.size(); ++id)
    ASSERT_EQ(seen[id], v.usable(static_cast<int32_t>(id)) ? 1 : 0) << id;
  EXPECT_FALSE(v.usable(*lv.tok.token_to_id("<|im_end|>")));  // special: never in a grammar
}

// Feeds `text` byte by byte and, at each of the given cuts, compares the mask with the reference.
// The matchers made at each cut share one mask cache, filled in other contexts by the cuts before.
void check_masks(const std::string& tokenizer, const std::string& gbnf, const std::string& text) {
  const LoadedVocab& lv = vocab_of(tokenizer);
  const auto g = compile(gbnf);
  Matcher m(g, lv.vocab);  // fed along, its caches filled by every mask before
  const auto shared = std::make_shared<MaskCache>();
  size_t allowed_total = 0, fed_to = 0;
  for (size_t cut = 0; cut <= text.size(); cut += 1 + cut / 3) {
    Matcher fed(g, lv.vocab, shared), ref(g, lv.vocab);
    ASSERT_TRUE(fed.accept_bytes(text.substr(0, cut))) << "cut " << cut;
    ASSERT_TRUE(ref.accept_bytes(text.substr(0, cut)));
    const std::vector<uint64_t>& mask = fed.allowed();
    for (size_t id = 0; id < lv.vocab->size(); ++id) {
      const auto i = static_cast<int32_t>(id);
      const bool want = lv.vocab->usable(i) && ref.can_accept(lv.vocab->bytes(i));
      const bool got = (mask[id >> 6] >> (id & 63)) & 1;
      ASSERT_EQ(got, want) << tokenizer << " cut " << cut << " token " << id << " \"" << lv.vocab->bytes(i) << "\"";
      allowed_total += got;
    }
    ASSERT_TRUE(m.accept_bytes(text.substr(fed_to, cut - fed_to)));
    fed_to = cut;
    ASSERT_TRUE(m.allowed() == mask) << "cut " << cut;
  }
  EXPECT_GT(allowed_total, 0u);
}

const char* const kWordsGrammar = "root ::= (\"hello\" | \"help\" | \"hell\" [a-z]*) (\" \" [a-z]+){0,3} \".\"";
const char* const kCyrillicGrammar = "root ::= [\\u0430-\\u044F ]{1,40} \"!\"";

TEST(MaskTest, MatchesBruteForceOnQwen3) {
  const std::string schema = R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},
    "age":{"type":"integer","minimum":0,"maximum":150},"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":3}},
    "required":["name","age"]})";
  check_masks("qwen3", json_schema_to_gbnf(nlohmann::ordered_json::parse(schema)),
              R"({"name": "Zoë \"x\"", "age": 42, "tags": ["a", "b"]})");
  check_masks("qwen3", kWordsGrammar, "hellish day is over.");
  check_masks("qwen3", kCyrillicGrammar, "\xD0\xBF\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xD0\xBC\xD0\xB8\xD1\x80!");
  check_masks("qwen3", json_object_gbnf(), R"({"a": [1, 2.5e3, null, true], "b": {"c": "\u00e9"}})");
}

// Stacks deeper than the cut masks' top frames: values nested in objects and lists, where a cut
// top is reused under different stacks and its boundary subtrees decide.
TEST(MaskTest, DeepStacksMatchBruteForce) {
  const std::string schema = R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"object",
    "properties":{"b":{"type":"array","items":{"type":"array","items":{"type":"string","maxLength":4}},"maxItems":2},
    "c":{"anyOf":[{"type":"integer"},{"type":"object","properties":{"d":{"type":"boolean"}}}]}},"required":["b"]}},
    "e":{"type":"string"}},"required":["a"]})";
  check_masks("qwen3", json_schema_to_gbnf(nlohmann::ordered_json::parse(schema)),
              R"({"a": [{"b": [["ab", "cd"], ["e\"f"]], "c": {"d": true}}, {"b": [], "c": -12}], "e": "x,y"})");
  check_masks("qwen3", R"g(root ::= item
item ::= "(" item ")" | "[" item "]" | [a-z]+)g", "(([[((abc))]]))");
}

TEST(MaskTest, MatchesBruteForceOnLlama32) {
  check_masks("llama-3.2", kWordsGrammar, "help me now.");
  check_masks("llama-3.2", kCyrillicGrammar, "\xD0\xB4\xD0\xB0 \xD0\xBD\xD0\xB5\xD1\x82!");
  check_masks("llama-3.2", json_object_gbnf(), R"({"key": ["v", {"w": -0.5}], "n": false})");
}

TEST(MaskTest, AcceptTokenFollowsTheMask) {
  const LoadedVocab& lv = vocab_of("qwen3");
  const auto g = compile(kWordsGrammar);
  Matcher m(g, lv.vocab);
  const std::vector<int32_t> ids = lv.tok.encode("hello there.", false);
  for (const int32_t id : ids) {
    const auto& mask = m.allowed();
    ASSERT_TRUE((mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1) << id;
    ASSERT_TRUE(m.accept_token(id));
  }
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.accept_token(ids[0]));
}

}  // namespace
}  // namespace ember::grammar
