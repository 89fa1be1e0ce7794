// Templates and contexts that used to overflow the stack or leak (found by fuzz/fuzz_jinja and by
// hand): each now fails with an ember::Error naming the limit, and stays within it otherwise.
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "jinja/template.h"

namespace ember::jinja {
namespace {

std::string repeat(std::string_view s, int n) {
  std::string out;
  for (int k = 0; k < n; ++k) out += s;
  return out;
}

// The message of the ember::Error that parsing or rendering `src` throws; "" if none.
std::string nesting_error(const std::string& src, const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object()) {
  try {
    Template::parse(src).render(ctx);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JinjaNesting, DeepSyntaxIsRefusedWhileParsing) {
  const int n = 100000;
  for (const std::string& src : {"{{ " + repeat("(", n) + "1" + repeat(")", n) + " }}",
                                 "{{ " + repeat("[", n) + repeat("]", n) + " }}",
                                 "{{ " + repeat("not ", n) + "1 }}", "{{ " + repeat("-", n) + "1 }}",
                                 "{{ 1" + repeat(" + 1", n) + " }}", "{{ x" + repeat(".a", n) + " }}",
                                 "{{ x" + repeat("|e", n) + " }}", "{{ 1" + repeat(" if 1", n) + " }}",
                                 "{% for " + repeat("(", n) + "x" + repeat(")", n) + " in [] %}{% endfor %}",
                                 repeat("{% if 1 %}", n)}) {
    const std::string err = nesting_error(src);
    EXPECT_NE(err.find("nested too deeply"), std::string::npos) << src.substr(0, 40) << ": " << err;
  }
  // Ordinary depths still work, and a chain's count starts afresh in each statement.
  EXPECT_EQ(nesting_error("{{ " + repeat("(", 100) + "1" + repeat(")", 100) + " }}"), "");
  EXPECT_EQ(nesting_error(repeat("{{ 1" + repeat(" + 1", 100) + " }}", 50)), "");
}

TEST(JinjaNesting, RunawayRecursionStopsWithAnError) {
  const std::string err = nesting_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_NE(err.find("runaway recursion"), std::string::npos) << err;
  // Recursion that ends renders as before.
  const std::string countdown = "{% macro f(n) %}{% if n > 0 %}{{ n }},{{ f(n - 1) }}{% endif %}{% endmacro %}";
  EXPECT_EQ(Template::parse(countdown + "{{ f(3) }}").render(nlohmann::ordered_json::object()), "3,2,1,");
  EXPECT_EQ(nesting_error(countdown + "{{ f(100) }}"), "");
}

TEST(JinjaNesting, ValuesCannotNestWithoutBound) {
  const std::string err = nesting_error(
      "{% set ns = namespace(x=1) %}{% for i in range(90000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}");
  EXPECT_NE(err.find("containers deep"), std::string::npos) << err;
  EXPECT_EQ(nesting_error("{% set ns = namespace(x=1) %}{% for i in range(100) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}"),
            "");
}

TEST(JinjaNesting, NamespaceCannotHoldItself) {
  // A namespace holding itself was a reference cycle (leaked) and printed without end.
  for (const char* src : {"{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}",
                          "{% set ns = namespace() %}{% set ns.me = [{'a': ns}] %}{{ ns }}",
                          "{% set a = namespace() %}{% set b = namespace(a=a) %}"}) {
    const std::string err = nesting_error(src);
    EXPECT_NE(err.find("cannot hold another namespace"), std::string::npos) << src << ": " << err;
  }
  EXPECT_EQ(nesting_error("{% set ns = namespace(items=[]) %}{% set ns.items = ns.items + [1] %}{{ ns.items }}"), "");
}

TEST(JinjaNesting, DeepContextIsRefused) {
  // Moved into place: copying a JSON value this deep would itself recurse.
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["x"] = nlohmann::ordered_json::parse(repeat("[", 100000) + repeat("]", 100000));
  const std::string err = nesting_error("{{ x }}", ctx);
  EXPECT_NE(err.find("template variable 'x'"), std::string::npos) << err;
  EXPECT_NE(err.find("containers deep"), std::string::npos) << err;
}

}  // namespace
}  // namespace ember::jinja
