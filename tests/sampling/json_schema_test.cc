// JSON Schema to grammar: the corpus compiles, bounds are exact, unsupported keywords are named
// with their pointer, and on the JSON-Schema-Test-Suite no instance the suite calls invalid is
// accepted by the grammar of its schema.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "base/error.h"
#include "sampling/json_schema.h"
#include "grammar_test_util.h"

namespace ember::grammar {
namespace {

using nlohmann::ordered_json;
using test::accepts;

std::shared_ptr<const Grammar> from_schema(const std::string& schema) {
  return test::compile(json_schema_to_gbnf(ordered_json::parse(schema)));
}

std::string conversion_error(const std::string& schema) {
  try {
    json_schema_to_gbnf(ordered_json::parse(schema));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

ordered_json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ordered_json::parse(ss.str());
}

TEST(JsonSchemaTest, CorpusCompiles) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(EMBER_SCHEMA_CORPUS)) {
    if (e.path().extension() != ".json") continue;
    SCOPED_TRACE(e.path().string());
    EXPECT_NO_THROW(Grammar::from_gbnf(json_schema_to_gbnf(read_json(e.path()))));
    ++n;
  }
  EXPECT_GE(n, 30u);
}

TEST(JsonSchemaTest, ObjectsRequiredOptionalAndOrder) {
  const auto g = from_schema(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},
      "c":{"type":"boolean"}},"required":["b"]})");
  EXPECT_TRUE(accepts(g, R"({"b":"x"})"));
  EXPECT_TRUE(accepts(g, R"({ "b" : "x", "a": 1, "c": true })"));
  EXPECT_TRUE(accepts(g, R"({"b":"x","c":false})"));
  EXPECT_FALSE(accepts(g, R"({})"));                       // b is required
  EXPECT_FALSE(accepts(g, R"({"b":"x","a":1,"a":2})"));    // each key once
  EXPECT_FALSE(accepts(g, R"({"b":"x","d":1})"));          // no other keys when absent
  EXPECT_FALSE(accepts(g, R"({"b":"x",})"));
  const auto extra = from_schema(R"({"type":"object","properties":{"ab":{"type":"integer"}},"additionalProperties":true})");
  EXPECT_TRUE(accepts(extra, R"({"ab":1,"a":[2],"abc":{},"":null})"));
  EXPECT_FALSE(accepts(extra, R"({"ab":1,"ab":"s"})"));  // a declared key never as an extra one
}

TEST(JsonSchemaTest, ArraysStringsAndLengths) {
  const auto g = from_schema(R"({"type":"array","items":{"type":"string","minLength":1,"maxLength":2},"minItems":1,"maxItems":2})");
  EXPECT_TRUE(accepts(g, R"(["a"])"));
  EXPECT_TRUE(accepts(g, R"(["ab", "\u00e9\n"])"));
  EXPECT_FALSE(accepts(g, R"([])"));
  EXPECT_FALSE(accepts(g, R"(["a","b","c"])"));
  EXPECT_FALSE(accepts(g, R"(["abc"])"));
  EXPECT_FALSE(accepts(g, R"([""])"));
  EXPECT_FALSE(accepts(g, R"(["\ud800"])"));  // no lone surrogate escapes
  EXPECT_FALSE(accepts(g, "[\"a\x01\"]"));
}

TEST(JsonSchemaTest, IntegerBoundsAreExact) {
  for (const auto& [lo, hi] : std::vector<std::pair<int, int>>{{-123, 4567}, {7, 7}, {-50, -3}, {0, 1000}, {99, 101}}) {
    const auto g = from_schema(R"({"type":"integer","minimum":)" + std::to_string(lo) + R"(,"maximum":)" +
                               std::to_string(hi) + "}");
    for (int v = -6000; v <= 6000; ++v)
      ASSERT_EQ(accepts(g, std::to_string(v)), v >= lo && v <= hi) << v << " in [" << lo << ", " << hi << "]";
    EXPECT_FALSE(accepts(g, "01"));
    EXPECT_FALSE(accepts(g, "-0"));
  }
  const auto ex = from_schema(R"({"type":"integer","exclusiveMinimum":-3,"exclusiveMaximum":3})");
  for (int v = -10; v <= 10; ++v) ASSERT_EQ(accepts(ex, std::to_string(v)), v > -3 && v < 3) << v;
  const auto min_only = from_schema(R"({"type":"integer","minimum":25})");
  EXPECT_TRUE(accepts(min_only, "25"));
  EXPECT_TRUE(accepts(min_only, "123456789"));
  EXPECT_FALSE(accepts(min_only, "24"));
  EXPECT_FALSE(accepts(min_only, "-30"));
}

TEST(JsonSchemaTest, NumberBoundsHold) {
  const auto g = from_schema(R"({"type":"number","minimum":-2.5,"maximum":10})");
  for (const char* ok : {"-2", "0", "10", "9.99", "-1.75", "3.0", "-0.5"}) EXPECT_TRUE(accepts(g, ok)) << ok;
  for (const char* no : {"11", "-3", "10.5", "-2.75", "1e3", "-100"}) EXPECT_FALSE(accepts(g, no)) << no;
  const auto open = from_schema(R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1})");
  EXPECT_TRUE(accepts(open, "0.5"));
  EXPECT_FALSE(accepts(open, "0"));
  EXPECT_FALSE(accepts(open, "1"));
  EXPECT_FALSE(accepts(open, "0.0"));
}

TEST(JsonSchemaTest, EnumsConstsAnyOfAndFormats) {
  const auto e = from_schema(R"({"enum":["a\"b", 3, null, {"k":[1]}]})");
  EXPECT_TRUE(accepts(e, R"("a\"b")"));
  EXPECT_TRUE(accepts(e, R"({"k":[1]})"));
  EXPECT_FALSE(accepts(e, R"("ab")"));
  const auto any = from_schema(R"({"anyOf":[{"type":"integer","minimum":0,"maximum":5},{"type":"boolean"}]})");
  EXPECT_TRUE(accepts(any, "5"));
  EXPECT_TRUE(accepts(any, "true"));
  EXPECT_FALSE(accepts(any, "6"));
  const auto date = from_schema(R"({"type":"string","format":"date"})");
  EXPECT_TRUE(accepts(date, R"("2024-02-28")"));
  EXPECT_FALSE(accepts(date, R"("2024-02-30")"));
  EXPECT_FALSE(accepts(date, R"("2024-13-01")"));
  const auto dt = from_schema(R"({"type":"string","format":"date-time"})");
  EXPECT_TRUE(accepts(dt, R"("2024-12-01T13:45:00Z")"));
  EXPECT_TRUE(accepts(dt, R"("2024-12-01T13:45:00.123+01:00")"));
  EXPECT_FALSE(accepts(dt, R"("2024-12-01 13:45:00Z")"));
  const auto uuid = from_schema(R"({"type":"string","format":"uuid"})");
  EXPECT_TRUE(accepts(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(accepts(uuid, R"("123e4567e89b12d3a456426614174000")"));
  const auto rec = from_schema(R"({"$defs":{"l":{"type":"array","items":{"$ref":"#/$defs/l"},"maxItems":2}},"$ref":"#/$defs/l"})");
  EXPECT_TRUE(accepts(rec, "[[],[[],[]]]"));
  EXPECT_FALSE(accepts(rec, "[[],[],[]]"));
  EXPECT_TRUE(accepts(test::compile(json_object_gbnf()), R"({"a": [1, {"b": null}], "c": "d"})"));
  EXPECT_FALSE(accepts(test::compile(json_object_gbnf()), R"([1])"));
  const auto jo = from_schema(R"({"type":"json_object"})");
  EXPECT_TRUE(accepts(jo, R"({"x": [true]})"));
  EXPECT_FALSE(accepts(jo, R"("x")"));
}

TEST(JsonSchemaTest, WhitespaceIsBounded) {
  const auto g = from_schema(R"({"type":"array","items":{"type":"integer"}})");
  EXPECT_TRUE(accepts(g, "[1,\n  2]"));
  EXPECT_FALSE(accepts(g, "[1,  2]"));  // two spaces in a row: not without a newline
  EXPECT_FALSE(accepts(g, "[1,\n" + std::string(21, ' ') + "2]"));
}

TEST(JsonSchemaTest, UnsupportedKeywordsNameTheirPointer) {
  EXPECT_NE(conversion_error(R"({"type":"object","properties":{"a":{"type":"string","pattern":"^x"}}})")
                .find("unsupported keyword \"pattern\" at /properties/a/pattern"),
            std::string::npos);
  EXPECT_NE(conversion_error(R"({"allOf":[{"type":"string"}]})").find("unsupported keyword \"allOf\" at /allOf"),
            std::string::npos);
  EXPECT_NE(conversion_error(R"({"type":"string","format":"email"})").find("\"format\" at /format"), std::string::npos);
  EXPECT_NE(conversion_error(R"({"items":[{"type":"string"}]})").find("\"items\" at /items"), std::string::npos);
  EXPECT_NE(conversion_error(R"({"oneOf":[{"type":"integer"},{"minimum":2}]})").find("\"oneOf\""), std::string::npos);
  EXPECT_NE(conversion_error(R"({"$ref":"other.json#/a"})").find("\"$ref\" at /$ref"), std::string::npos);
  EXPECT_NE(conversion_error(R"({"$ref":"#/$defs/missing"})").find("points at nothing"), std::string::npos);
  EXPECT_NE(conversion_error(R"({"properties":{"a~b/c":{"not":{}}}})").find("at /properties/a~0b~1c/not"),
            std::string::npos);
}

// The suite's draft 7 files: every schema that converts must reject each instance the suite calls invalid.
TEST(JsonSchemaTest, TestSuiteSchemasNeverAcceptInvalidInstances) {
  const std::filesystem::path dir = std::filesystem::path(EMBER_JSON_SCHEMA_SUITE) / "tests" / "draft7";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir << ": install json-schema-test-suite (scripts/install-deps.sh)";
  size_t used = 0, unsupported = 0, invalid_rejected = 0, valid_accepted = 0;
  std::map<std::string, int> why;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    for (const auto& group : read_json(e.path())) {
      std::string gbnf;
      try {
        gbnf = json_schema_to_gbnf(group["schema"]);
      } catch (const Error& err) {
        ++unsupported;  // outside the subset (the error names why); a false schema allows nothing
        const std::string what = err.what();
        const size_t k = what.find("keyword \"");
        ++why[k == std::string::npos ? what.substr(0, 60) : what.substr(k + 9, what.find('"', k + 9) - k - 9)];
        continue;
      }
      ++used;
      const auto g = test::compile(gbnf);
      for (const auto& t : group["tests"]) {
        const bool got = accepts(g, t["data"].dump());
        SCOPED_TRACE(e.path().filename().string() + ": " + group["description"].get<std::string>() + " / " +
                     t["description"].get<std::string>());
        if (!t["valid"].get<bool>()) {
          EXPECT_FALSE(got) << t["data"].dump();
          invalid_rejected += !got;
        } else {
          valid_accepted += got;
        }
      }
    }
  }
  std::printf("test suite: %zu schemas used, %zu outside the subset; %zu invalid instances rejected, %zu valid accepted\n",
              used, unsupported, invalid_rejected, valid_accepted);
  for (const auto& [k, n] : why) std::printf("  outside the subset: %s (%d)\n", k.c_str(), n);
  EXPECT_GE(used, 60u);
  EXPECT_GT(valid_accepted, used);
}

}  // namespace
}  // namespace ember::grammar

namespace ember::grammar {
namespace {

// Shapes between literal texts (forced tool calls): one converter names all shapes' rules, so two
// shapes whose schemas would define the same rule names still accept exactly their own texts.
TEST(JsonSchemaTest, FramedSchemasAlternate) {
  const std::vector<FramedSchema> shapes = {
      {"<call>", ordered_json::parse(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})"),
       "</call>"},
      {"TOOL b: ", ordered_json::parse(R"({"type":"object","properties":{"a":{"type":"string"}},"required":["a"]})"), ""},
      {"", ordered_json::parse(R"({"enum":["root", "space"]})"), "."}};  // names of the converter's own rules
  const auto g = test::compile(framed_schemas_to_gbnf(shapes));
  EXPECT_TRUE(accepts(g, R"(<call>{"a": 5}</call>)"));
  EXPECT_TRUE(accepts(g, R"(TOOL b: {"a": "x"})"));
  EXPECT_TRUE(accepts(g, R"("space".)"));
  EXPECT_FALSE(accepts(g, R"(<call>{"a": "x"}</call>)"));  // shape 0's a is an integer
  EXPECT_FALSE(accepts(g, R"(TOOL b: {"a": 5})"));
  EXPECT_FALSE(accepts(g, R"({"a": 5})"));
  EXPECT_THROW(framed_schemas_to_gbnf({}), Error);
}

}  // namespace
}  // namespace ember::grammar
