// GBNF parsing: the syntax llama.cpp accepts, and errors that name line and column.
#include <gtest/gtest.h>

#include "base/error.h"
#include "grammar_test_util.h"

namespace ember::grammar {
namespace {

using test::accepts;
using test::compile;

std::string error_of(std::string_view gbnf) {
  try {
    Grammar::from_gbnf(gbnf);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GbnfTest, LiteralsAlternativesAndGroups) {
  const auto g = compile("root ::= \"ab\" (\"c\" | \"d\" \"e\") end\nend ::= \"!\"  # a comment\n");
  EXPECT_TRUE(accepts(g, "abc!"));
  EXPECT_TRUE(accepts(g, "abde!"));
  EXPECT_FALSE(accepts(g, "abd!"));
  EXPECT_FALSE(accepts(g, "abc"));
  EXPECT_FALSE(accepts(g, "abc!!"));
}

TEST(GbnfTest, CharClassesNegationAndAny) {
  const auto g = compile(R"(root ::= [a-c0-9] [^x-z\n] . [\]\-])");
  EXPECT_TRUE(accepts(g, "a!x]"));
  EXPECT_TRUE(accepts(g, "5a\xC3\xA9-"));  // `.` is one code point, é is two bytes
  EXPECT_FALSE(accepts(g, "d!x]"));
  EXPECT_FALSE(accepts(g, "ayx]"));
  EXPECT_FALSE(accepts(g, "a\nx]"));
}

TEST(GbnfTest, Repetitions) {
  const auto g = compile("root ::= \"a\"? \"b\"* \"c\"+ [d]{2} [e]{1,3} [f]{2,}");
  EXPECT_TRUE(accepts(g, "cddeff"));
  EXPECT_TRUE(accepts(g, "abbbcccddeeefffff"));
  EXPECT_FALSE(accepts(g, "ddeff"));         // c+ needs one
  EXPECT_FALSE(accepts(g, "cdeff"));         // d{2}
  EXPECT_FALSE(accepts(g, "cddeeeeff"));     // e{1,3}
  EXPECT_FALSE(accepts(g, "cddef"));         // f{2,}
  const auto lit = compile("root ::= \"ab\"{2} (\"x\" | \"y\")*");
  EXPECT_TRUE(accepts(lit, "ababxyx"));
  EXPECT_FALSE(accepts(lit, "abxy"));
}

TEST(GbnfTest, EscapesAndUnicode) {
  const auto g = compile(R"(root ::= "\x41\u00e9\U0001F600\t\"\\" [\u0100-\u017F])");
  EXPECT_TRUE(accepts(g, "A\xC3\xA9\xF0\x9F\x98\x80\t\"\\\xC4\x80"));
  EXPECT_FALSE(accepts(g, "A\xC3\xA9\xF0\x9F\x98\x80\t\"\\a"));
}

TEST(GbnfTest, RulesOverSeveralLinesAndRecursion) {
  const auto g = compile(
      "root ::= list\n"
      "list ::= \"[\" (\n  item (\",\" item)*\n)? \"]\"\n"
      "item ::= [0-9]+\n"
      "  | list\n");
  EXPECT_TRUE(accepts(g, "[]"));
  EXPECT_TRUE(accepts(g, "[1,[2,[]],33]"));
  EXPECT_FALSE(accepts(g, "[1,]"));
  EXPECT_FALSE(accepts(g, "[[1]"));
}

TEST(GbnfTest, ErrorsNameLineAndColumn) {
  EXPECT_NE(error_of("root ::= \"a\"\nfoo ::= \"b\" bar\n").find("line 2, column 13: undefined rule 'bar'"),
            std::string::npos);
  EXPECT_NE(error_of("root ::= \"abc").find("line 1, column 14: unterminated string literal"), std::string::npos);
  EXPECT_NE(error_of("root ::= [a-").find("line 1"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"a\"\n").find("line 2, column 1: expected ')'"), std::string::npos);
  EXPECT_NE(error_of("root = \"a\"").find("line 1, column 6: expected '::='"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\" ) \"b\"").find("line 1, column 14: unexpected character ')'"), std::string::npos);
  EXPECT_NE(error_of("root ::= [z-a]").find("reversed"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\q\"").find("line 1, column 11: unknown escape"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,2}").find("n < m"), std::string::npos);
  EXPECT_NE(error_of("root ::= * \"a\"").find("nothing before it"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nroot ::= \"b\"").find("line 2, column 1: rule 'root' is defined twice"),
            std::string::npos);
  EXPECT_NE(error_of("foo ::= \"a\"").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= x\nx ::= \"a\"? root").find("left-recursive"), std::string::npos);
}

}  // namespace
}  // namespace ember::grammar
