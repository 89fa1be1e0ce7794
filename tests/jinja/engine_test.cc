// Unit tests of the template engine's features. The expected strings of the table were produced
// by Python jinja2 3.1 in transformers' configuration (immutable sandbox, trim_blocks,
// lstrip_blocks, loopcontrols, json.dumps-based tojson).
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "jinja/template.h"
#include "testdata_util.h"

namespace ember::jinja {
namespace {

std::string render(std::string_view src, const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object(),
                   const RenderOptions& opts = {}) {
  return Template::parse(src).render(ctx, opts);
}

// The message of the ember::Error that rendering (or parsing) `src` throws; "" if none.
std::string error_of(std::string_view src, const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object(),
                     const RenderOptions& opts = {}) {
  try {
    render(src, ctx, opts);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct Case {
  const char* name;
  const char* source;
  const char* expected;
};

const Case kCases[] = {
    {"python_printing", R"J({{ 1.0 }}|{{ True }}|{{ None }}|{{ ['a', 'b'] }}|{{ {'a': 1} }}|{{ 1e16 }}|{{ 0.1 + 0.2 }}|{{ 1/3 }}|{{ 10/2 }}|{{ 7//2 }}|{{ -7//2 }}|{{ -7 % 3 }}|{{ 2**10 }}|{{ 2**-1 }}|{{ 'ab' * 3 }}|{{ [1] * 2 }})J", R"J(1.0|True|None|['a', 'b']|{'a': 1}|1e+16|0.30000000000000004|0.3333333333333333|5.0|3|-4|2|1024|0.5|ababab|[1, 1])J"},
    {"string_repr", R"J({{ "it's" }}|{{ ["it's", 'a"b', "x\ny"] }}|{{ (1,) }}|{{ (1, 'a') }}|{{ {'k': [1, 2.5, None, True]} }}|{{ 'a\tb\\c' }}|{{ '\u00e9\x41' }})J", R"J(it's|["it's", 'a"b', 'x\ny']|(1,)|(1, 'a')|{'k': [1, 2.5, None, True]}|a	b\c|éA)J"},
    {"loop_object", R"J({% for x in [1,2,3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.cycle('a','b') }}{{ loop.previtem }}{{ loop.nextitem }};{% endfor %})J", R"J(1032TrueFalse3a2;2121FalseFalse3b13;3210FalseTrue3a2;)J"},
    {"loop_filter_else", R"J({% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.length }}{% else %}none{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %})J", R"J(2242|empty)J"},
    {"loop_unpacking", R"J({% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }},{% endfor %}|{% for a, b in [[1,2],[3,4]] %}{{ a + b }}{% endfor %})J", R"J(a=1,b=2,|37)J"},
    {"break_continue", R"J({% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %})J", R"J(0134)J"},
    {"namespace", R"J({% set ns = namespace(a=1, b='x') %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}{{ ns.b }})J", R"J(4x)J"},
    {"macro_defaults", R"J({% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Bob') }} {{ greet('Al', greeting='Hi') }} {{ greet(name='Z') }})J", R"J(Hello, Bob! Hi, Al! Hello, Z!)J"},
    {"call_block", R"J({% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}inner{% endcall %}|{% macro lst(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) lst([1,2]) %}[{{ x }}]{% endcall %})J", R"J(<inner>|[1][2])J"},
    {"filter_and_set_blocks", R"J({% filter upper %}hello {{ 'world' }}{% endfilter %}|{% set b %}  block  {% endset %}[{{ b }}]|{% set c | trim %}  trimmed  {% endset %}[{{ c }}])J", R"J(HELLO WORLD|[  block  ]|[trimmed])J"},
    {"string_filters", R"J({{ '  x  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ 'hello world' | title }}|{{ 'hELLO' | capitalize }}|{{ 'a-b c(d' | title }}|{{ 'abc' | upper }}{{ 'ABC' | lower }})J", R"J(x|hi|Hello World|Hello|A-B C(D|ABCabc)J"},
    {"sort_filter", R"J({{ [3,1,2] | sort }}|{{ [3,1,2] | sort(reverse=true) }}|{{ ['b','A','c'] | sort }}|{{ ['b','A','c'] | sort(case_sensitive=true) }}|{{ [{'n': 2}, {'n': 1}] | sort(attribute='n') | map(attribute='n') | list }})J", R"J([1, 2, 3]|[3, 2, 1]|['A', 'b', 'c']|['A', 'b', 'c']|[1, 2])J"},
    {"sequence_filters", R"J({{ [1,2,2,3,1] | unique | list }}|{{ [1,2,3] | reverse | list }}|{{ 'abc' | reverse }}|{{ [1,2,3] | first }}|{{ [1,2,3] | last }}|{{ [1,2,3] | length }}|{{ 'héllo' | length }}|{{ {'a':1} | count }})J", R"J([1, 2, 3]|[3, 2, 1]|cba|1|3|3|5|1)J"},
    {"join_sum_minmax", R"J({{ [1,2,3] | join(', ') }}|{{ [{'a': 'x'}, {'a': 'y'}] | join('-', attribute='a') }}|{{ ['a','b'] | join }}|{{ [1, 2] | sum }}|{{ [1, 5, 3] | max }}|{{ [4, 2, 8] | min }}|{{ [-1.5] | map('abs') | list }})J", R"J(1, 2, 3|x-y|ab|3|5|2|[1.5])J"},
    {"default_filter", R"J({{ x | default('d') }}|{{ '' | default('d') }}|{{ '' | default('d', true) }}|{{ none | d('n', boolean=true) }}|{{ 0 | default(5) }})J", R"J(d||d|n|0)J"},
    {"dict_filters", R"J({{ {'b': 1, 'a': 2} | dictsort }}|{{ {'b': 1, 'a': 2} | items | list }}|{{ {'b': 1, 'a': 2} | dictsort(by='value', reverse=true) }})J", R"J([('a', 2), ('b', 1)]|[('b', 1), ('a', 2)]|[('a', 2), ('b', 1)])J"},
    {"selectattr", R"J({{ [{'r': 'u', 'c': 1}, {'r': 'a', 'c': 2}, {'r': 'u', 'c': 3}] | selectattr('r', 'equalto', 'u') | map(attribute='c') | list }}|{{ [{'r': 'u'}, {'x': 1}] | selectattr('r', 'defined') | list | length }}|{{ [{'r': 0}, {'r': 1}] | rejectattr('r') | list }})J", R"J([1, 3]|1|[{'r': 0}])J"},
    {"select_reject_map", R"J({{ [1,2,3,4] | select('odd') | list }}|{{ [1,2,3,4] | reject('odd') | list }}|{{ [1,2,3,4] | select('gt', 2) | list }}|{{ ['a', 'b'] | map('upper') | list }}|{{ [0, '', 'a'] | select | list }})J", R"J([1, 3]|[2, 4]|[3, 4]|['A', 'B']|['a'])J"},
    {"number_conversions", R"J({{ '3' | int + 1 }}|{{ '3.7' | int }}|{{ 'x' | int(7) }}|{{ 3.9 | int }}|{{ '2.5' | float }}|{{ 'x' | float }}|{{ 3 | float }}|{{ 5 | string ~ 'a' }}|{{ true | string }})J", R"J(4|3|7|3|2.5|0.0|3.0|5a|True)J"},
    {"round_abs", R"J({{ 2.5 | round }}|{{ 3.5 | round }}|{{ 2.675 | round(2) }}|{{ 3.14159 | round(2, 'floor') }}|{{ 3.1 | round(0, 'ceil') }}|{{ 3 | round }}|{{ -3 | abs }}|{{ -2.5 | abs }})J", R"J(2.0|4.0|2.67|3.14|4.0|3|3|2.5)J"},
    {"indent", R"J({{ 'a\nb\n\nc' | indent }}|{{ 'a\nb' | indent(2, first=true) }}|{{ 'a\n\nb' | indent(2, blank=true) }}|{{ 'x' | indent('>>', true) }})J", R"J(a
    b

    c|  a
  b|a
  
  b|>>x)J"},
    {"tojson", R"J({{ {'a': [1, 'é', None, true, 1.5], 'b': {}} | tojson }}|{{ {'a': [1, {'c': 2}], 'e': []} | tojson(indent=2) }}|{{ 'x"y\n' | tojson }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }})J", R"J({"a": [1, "é", null, true, 1.5], "b": {}}|{
  "a": [
    1,
    {
      "c": 2
    }
  ],
  "e": []
}|"x\"y\n"|{"a": 2, "b": 1})J"},
    {"batch_wordcount_format", R"J({{ [1,2,3,4,5] | batch(2) | list }}|{{ [1,2,3] | batch(2, 'x') | list }}|{{ 'one two  three' | wordcount }}|{{ 'ab' | center(6) }}|{{ '%s-%d' | format('a', 3) }}|{{ '<b>x</b> y' | striptags }}|{{ '<a&"\'>' | e }}|{{ 'x' | safe }})J", R"J([[1, 2], [3, 4], [5]]|[[1, 2], [3, 'x']]|3|  ab  |a-3|x y|&lt;a&amp;&#34;&#39;&gt;|x)J"},
    {"strip_split", R"J({{ '  a b  '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ 'a b c'.split(none, 1) }})J", R"J(a b|axx|xxa|['a', 'b', '', 'c']|['a', 'b']|['a', 'b,c']|['a,b', 'c']|['a', 'b c'])J"},
    {"str_methods", R"J({{ 'hello'.startswith('he') }}|{{ 'hello'.endswith(('x', 'lo')) }}|{{ 'Hello World'.upper() }}|{{ 'hello world'.title() }}|{{ 'hello'.capitalize() }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'abcabc'.find('c') }}|{{ 'abcabc'.count('b') }}|{{ 'hé'.find('x') }})J", R"J(True|True|HELLO WORLD|Hello World|Hello|bba|2|2|-1)J"},
    {"join_format", R"J({{ '-'.join(['a', 'b']) }}|{{ '{} and {}'.format(1, 'x') }}|{{ '{0}{0}{n}'.format('a', n='b') }}|{{ '{:>5}|{:<4}|{:^6}|{:.2f}|{:05d}|{:,}'.format('x', 'y', 'z', 3.14159, 42, 1234567) }})J", R"J(a-b|1 and x|aab|    x|y   |  z   |3.14|00042|1,234,567)J"},
    {"str_predicates", R"J({{ '123'.isdigit() }}|{{ 'abc'.isalpha() }}|{{ 'a1'.isalnum() }}|{{ '  '.isspace() }}|{{ 'ABC'.isupper() }}|{{ 'abc'.islower() }}|{{ 'a\nb\r\nc'.splitlines() }}|{{ 'ab'.zfill(4) }}|{{ 'a=b=c'.partition('=') }})J", R"J(True|True|True|True|True|True|['a', 'b', 'c']|00ab|('a', '=', 'b=c'))J"},
    {"dict_list_methods", R"J({{ {'a': 1}.get('a') }}|{{ {'a': 1}.get('b') }}|{{ {'a': 1}.get('b', 2) }}|{{ {'a': 1, 'b': 2}.keys() | list }}|{{ {'a': 1, 'b': 2}.values() | list }}|{{ [1,2,3].index(2) }}|{{ [1,1,2].count(1) }})J", R"J(1|None|2|['a', 'b']|[1, 2]|1|2)J"},
    {"slicing", R"J({{ 'abcdef'[1:3] }}|{{ 'abcdef'[::-1] }}|{{ 'abcdef'[-2:] }}|{{ [1,2,3,4,5][::2] }}|{{ [1,2,3,4,5][-3:-1] }}|{{ [1,2,3][5:] }}|{{ 'héllo'[1] }}|{{ [1,2,3][-1] }}|{{ [1,2,3,4,5][4:1:-2] }})J", R"J(bc|fedcba|ef|[1, 3, 5]|[3, 4]|[]|é|3|[5, 3])J"},
    {"tests_types", R"J({{ x is defined }}|{{ x is undefined }}|{{ none is none }}|{{ 'a' is string }}|{{ {} is mapping }}|{{ [] is iterable }}|{{ 'a' is iterable }}|{{ 1 is iterable }}|{{ [] is sequence }}|{{ 1 is number }}|{{ 1.5 is number }}|{{ 1 is integer }}|{{ 1.0 is integer }}|{{ 1.0 is float }}|{{ true is boolean }}|{{ 1 is boolean }})J", R"J(False|True|True|True|True|True|True|False|True|True|True|True|False|True|True|False)J"},
    {"tests_values", R"J({{ true is true }}|{{ 1 is true }}|{{ false is false }}|{{ 3 is odd }}|{{ 4 is even }}|{{ 9 is divisibleby 3 }}|{{ 2 is equalto 2 }}|{{ 2 is eq 3 }}|{{ 2 is ne 3 }}|{{ 2 is lt 3 }}|{{ 2 is gt 3 }}|{{ 2 is le 2 }}|{{ 2 is ge 3 }}|{{ 1 is in [1,2] }}|{{ none is sameas none }}|{{ range is callable }}|{{ 'a' is callable }}|{{ x is not defined }})J", R"J(True|False|True|True|True|True|True|False|True|True|False|True|False|True|True|True|False|True)J"},
    {"operators", R"J({{ 1 < 2 < 3 }}|{{ 1 < 3 < 2 }}|{{ 'a' in 'cat' }}|{{ 1 not in [1] }}|{{ 'k' in {'k': 1} }}|{{ not 0 }}|{{ 1 and 'x' }}|{{ 0 or 'y' }}|{{ 'yes' if 1 else 'no' }}|{{ 'yes' if 0 }}|{{ 1 == 1.0 }}|{{ 'a' ~ 1 ~ none }}|{{ -(3) }}|{{ [1] + [2] }}|{{ 'a' + 'b' }})J", R"J(True|False|True|False|True|True|x|y|yes||True|a1None|-3|[1, 2]|ab)J"},
    {"whitespace_control", R"J({%- if true -%}  A  {%- endif -%}  |  {%+ if true %}B{% endif %}
  {% if true %}
  X
  {% endif %}
  {{ 'Y' }}
{# comment #}Z{#- trimmed -#}  W)J", R"J(A|  B  X
  Y
ZW)J"},
    {"raw_block", R"J({% raw %}{{ not parsed }}{% endraw %}|{%- raw -%}  {% x %}  {%- endraw %}|)J", R"J({{ not parsed }}|{% x %}|)J"},
    {"set_tuple_with", R"J({% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set t = (1, 2) %}{{ t[0] }}|{% with q = 5 %}{{ q }}{% endwith %}{{ q }})J", R"J(12|1|5)J"},
    {"globals", R"J({{ dict(a=1, b=2) }}|{{ range(3) | list }}|{{ range(1, 10, 3) | list }}|{{ [1,2] | list | length }}|{{ namespace(a=1).a }})J", R"J({'a': 1, 'b': 2}|[0, 1, 2]|[1, 4, 7]|2|1)J"},
    {"undefined", R"J({{ x }}|{{ x | length }}|{{ x | list }}|{% for i in x %}no{% endfor %}|{{ x | trim }}|{{ x ~ 'a' }}|{{ x == x }}|{{ x | default(1) }})J", R"J(|0|[]|||a|True|1)J"},
    {"attribute_item", R"J({{ {'a': 1}.a }}|{{ {'items': 1}['items'] }}|{{ {'a': 1}.b is defined }}|{{ [1][0] }}|{{ [1].x is defined }}|{{ 'abc'.x is defined }})J", R"J(1|1|False|1|False|False)J"},
    {"literals", R"J({{ "\x41\u00e9\101" }}|{{ 'a\'b' }}|{{ "a\"b" }}|{{ 'back\\slash' }}|{{ 'unk\d' }}|{{ 0x1F }}|{{ 1_000 }}|{{ 1.5e3 }}|{{ 0o17 }}|{{ 0b101 }})J", R"J(AéA|a'b|a"b|back\slash|unk\d|31|1000|1500.0|15|5)J"},
    {"macro_varargs", R"J({% macro m(a, b) %}{{ a }}-{{ b }}-{{ varargs }}-{{ kwargs }}{% endmacro %}{{ m(1) }}|{{ m(1, 2, 3, k=4) }})J", R"J(1--()-{}|1-2-(3,)-{'k': 4})J"},
    {"json_and_floats", R"J({{ [1, [2, 3]] | tojson }}|{{ {'a': 'é'} | tojson(ensure_ascii=true) }}|{{ 1.0 | tojson }}|{{ [1e20, -0.0, 1.5e-7] }}|{{ 123456789012345678 }}|{{ 3.0 * 2 }}|{{ 1e300 * 1e10 }})J", R"J([1, [2, 3]]|{"a": "\u00e9"}|1.0|[1e+20, -0.0, 1.5e-07]|123456789012345678|6.0|inf)J"},
    {"percent_format", R"J({{ 'Hello %s, you are %d' % ('Bob', 30) }}|{{ '%5.1f|%-4s|%03d' % (3.14159, 'ab', 7) }}|{{ '%(a)s' % {'a': 1} }}|{{ '%x' % 255 }})J", R"J(Hello Bob, you are 30|  3.1|ab  |007|1|ff)J"},
    {"aggregates", R"J({{ [3, 1] | sort | first }}|{{ ['b', 'a'] | min }}|{{ [{'a': 2}, {'a': 1}] | max(attribute='a') }}|{{ [{'x': 1}, {'x': 2}] | sum(attribute='x') }}|{{ [{'g': 'a', 'v': 1}, {'g': 'b', 'v': 2}, {'g': 'a', 'v': 3}] | groupby('g') }})J", R"J(1|a|{'a': 2}|3|[('a', [{'g': 'a', 'v': 1}, {'g': 'a', 'v': 3}]), ('b', [{'g': 'b', 'v': 2}])])J"},
    {"truncate", R"J({{ 'abcdefghijkl' | truncate(5) }}|{{ 'hello world foo bar' | truncate(9) }}|{{ 'hello world foo bar' | truncate(9, true) }}|{{ 'x' | pprint }}|{{ [1,2] | map('string') | join }}|{{ 'a b' | replace(' ', '_') }})J", R"J(ab...|hello...|hello ...|'x'|12|a_b)J"},
};

TEST(JinjaEngine, MatchesPythonJinja2) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(render(c.source), c.expected);
  }
}

TEST(JinjaEngine, GenerationTagRendersItsBody) {
  EXPECT_EQ(render("a{% generation %}b{{ 1 }}{% endgeneration %}c"), "ab1c");
}

TEST(JinjaEngine, ContextKeepsKeyOrderForTojson) {
  const auto ctx = nlohmann::ordered_json::parse(R"({"tool": {"z": 1, "a": {"y": [1, 2], "b": "é"}}})");
  EXPECT_EQ(render("{{ tool | tojson }}", ctx), R"({"z": 1, "a": {"y": [1, 2], "b": "é"}})");
  EXPECT_EQ(render("{{ tool.a | tojson(indent=4) }}", ctx), "{\n    \"y\": [\n        1,\n        2\n    ],\n    \"b\": \"é\"\n}");
}

TEST(JinjaEngine, TrailingNewlineOfTemplateIsDropped) {
  EXPECT_EQ(render("x\n"), "x");
  EXPECT_EQ(render("x\n\n"), "x\n");
  EXPECT_EQ(render("a\r\nb"), "a\nb");
}

TEST(JinjaEngine, ErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("line one\n  {{ x.y }}"), "line 2, column 7: 'x' is undefined");
  EXPECT_EQ(error_of("{% if true %}\n{% for %}"), "line 2, column 8: expected name, got end of statement block");
  EXPECT_NE(error_of("ok\n{{ 'a' + 1 }}").find("line 2, column"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 +* 2 }}").find("line 1, column 7"), std::string::npos);
  EXPECT_NE(error_of("{% for x in y %}").find("expected 'endfor'"), std::string::npos);
  EXPECT_NE(error_of("{{ x | nosuchfilter }}").find("No filter named 'nosuchfilter'"), std::string::npos);
  EXPECT_NE(error_of("{{ 'unterminated }}").find("line 1, column 4"), std::string::npos);
}

TEST(JinjaEngine, RaiseExceptionMessageIsKeptExactly) {
  const std::string msg = "Conversation roles must alternate user/assistant/user/assistant/...";
  const std::string err = error_of("{{ raise_exception('" + msg + "') }}");
  EXPECT_NE(err.find(msg), std::string::npos) << err;
}

TEST(JinjaEngine, ImmutableSandboxRefusesMutation) {
  EXPECT_NE(error_of("{% set l = [1] %}{{ l.append(2) }}").find("access to attribute 'append' of 'list' object is unsafe"),
            std::string::npos);
  EXPECT_NE(error_of("{{ messages.pop() }}", {{"messages", {1, 2}}}).find("unsafe"), std::string::npos);
  EXPECT_NE(error_of("{% set d = {} %}{{ d.update({'a': 1}) }}").find("'update' of 'dict' object is unsafe"), std::string::npos);
  // Reading methods stay allowed; taking a refused method without calling it is not an error.
  EXPECT_EQ(render("{% set l = [1, 2] %}{{ l.index(2) }}{{ l.count(1) }}{% set f = l.append %}"), "11");
}

TEST(JinjaEngine, UndefinedBehavesLikeJinja2Default) {
  EXPECT_EQ(render("[{{ missing }}]{% for x in missing %}x{% endfor %}{{ missing | length }}{{ missing is defined }}"),
            "[]0False");
  EXPECT_EQ(error_of("{{ missing.attr }}"), "line 1, column 11: 'missing' is undefined");
  EXPECT_EQ(error_of("{{ missing + 1 }}"), "line 1, column 12: 'missing' is undefined");
  EXPECT_EQ(render("{{ d.nothere is defined }}|{{ d['nothere'] is undefined }}", {{"d", {{"a", 1}}}}), "False|True");
  EXPECT_NE(error_of("{{ d.nothere.deeper }}", {{"d", {{"a", 1}}}}).find("'dict object' has no attribute 'nothere'"),
            std::string::npos);
}

TEST(JinjaEngine, ToolsAndNoneAreDistinctFromUndefined) {
  const auto ctx = nlohmann::ordered_json::parse(R"({"tools": null})");
  EXPECT_EQ(render("{{ tools is defined }}{{ tools is none }}{{ other is defined }}", ctx), "TrueTrueFalse");
  EXPECT_NE(error_of("{% for t in tools %}{% endfor %}", ctx).find("'NoneType' object is not iterable"), std::string::npos);
}

TEST(JinjaEngine, StepLimitStopsRunawayLoops) {
  // The sandbox refuses a single huge range outright, as Jinja2's does.
  EXPECT_NE(error_of("{% for i in range(100000000) %}{% endfor %}").find("Range too big"), std::string::npos);
  RenderOptions opts;
  opts.max_steps = 100000;
  const std::string err = error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", {}, opts);
  EXPECT_NE(err.find("render steps"), std::string::npos) << err;
}

TEST(JinjaEngine, OutputSizeIsBounded) {
  RenderOptions opts;
  opts.max_output_bytes = 1000;
  EXPECT_NE(error_of("{% for i in range(1000) %}xx{% endfor %}", {}, opts).find("exceeded the limit of 1000 bytes"),
            std::string::npos);
  EXPECT_NE(error_of("{{ 'x' * 100000 }}", {}, opts).find("too long"), std::string::npos);
  EXPECT_EQ(render("{{ 'x' * 10 }}", {}, opts), "xxxxxxxxxx");
}

TEST(JinjaEngine, StrftimeNowUsesTheGivenClock) {
  RenderOptions opts;
  opts.now = test::fixture_clock();
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%B %d, %Y %H:%M') }}", {}, opts),
            "26 Jul 2024|July 26, 2024 12:00");
}

TEST(JinjaEngine, LoopScopeDoesNotLeakButNamespaceDoes) {
  EXPECT_EQ(render("{% set x = 0 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}"), "01020");
  EXPECT_EQ(render("{% set ns = namespace(x=0) %}{% for i in [1, 2] %}{% set ns.x = i %}{% endfor %}{{ ns.x }}"), "2");
  EXPECT_NE(error_of("{% set x = 1 %}{% set x.y = 2 %}").find("non-namespace"), std::string::npos);
}

TEST(JinjaEngine, MacrosSeeLaterTopLevelAssignments) {
  EXPECT_EQ(render("{% macro m() %}{{ y }}{% endmacro %}{% set y = 3 %}{{ m() }}"), "3");
}

TEST(JinjaEngine, MacrosRefuseArgumentsTheyCannotTake) {
  EXPECT_NE(error_of("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}").find("macro 'm' takes not more than 1 argument(s)"),
            std::string::npos);
  EXPECT_NE(error_of("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, k=2) }}").find("takes no keyword argument 'k'"),
            std::string::npos);
  EXPECT_FALSE(error_of("{% macro m(a) %}{{ a }}{% endmacro %}{% call m(1) %}x{% endcall %}").empty());
  EXPECT_EQ(render("{% macro m() %}{{ varargs | length }}{{ kwargs.k }}{% endmacro %}{{ m(1, 2, k=3) }}"), "23");
}

TEST(JinjaEngine, TemplateIsReusable) {
  const Template t = Template::parse("{{ a }}-{{ b | default('none') }}");
  EXPECT_EQ(t.render({{"a", 1}}), "1-none");
  EXPECT_EQ(t.render({{"a", "x"}, {"b", "y"}}), "x-y");
}

}  // namespace
}  // namespace ember::jinja
