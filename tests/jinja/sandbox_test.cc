// The sandbox a stranger's chat template runs in: like Jinja2's ImmutableSandboxedEnvironment it
// reaches no Python internals, no files and no environment, and cannot change its inputs.
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "jinja/template.h"

namespace ember::jinja {
namespace {

const nlohmann::ordered_json kContext = nlohmann::ordered_json::parse(
    R"({"messages": [{"role": "user", "content": "hi"}], "secret": {"k": "v"}})");

std::string render_sandboxed(std::string_view src) { return Template::parse(src).render(kContext); }

// True when parsing or rendering `src` fails with an ember::Error.
bool refused(std::string_view src) {
  try {
    render_sandboxed(src);
  } catch (const Error&) {
    return true;
  }
  return false;
}

TEST(JinjaSandbox, InternalsAreUndefinedAndGoNoFurther) {
  // Dunder attributes are undefined (printing nothing, as the sandbox's unsafe undefined does) and
  // any step beyond them is an error, so no chain reaches classes, globals or builtins.
  for (const char* obj : {"''", "messages", "messages[0]", "(1)", "range", "namespace", "raise_exception",
                          "secret"}) {
    for (const char* attr : {"__class__", "__dict__", "__globals__", "__init__", "__builtins__"}) {
      const std::string expr = std::string(obj) + "." + attr;
      EXPECT_EQ(render_sandboxed("{{ " + expr + " }}"), "") << expr;
      EXPECT_TRUE(refused("{{ " + expr + ".__base__ }}")) << expr;
      EXPECT_TRUE(refused("{{ " + expr + "() }}")) << expr;
    }
  }
  EXPECT_EQ(render_sandboxed("{{ ''|attr('__class__') }}{{ messages[0]['__class__'] }}"), "");
}

TEST(JinjaSandbox, NoFilesEnvironmentOrPythonGlobals) {
  // Loading other templates is how Jinja2 reaches files; the tags are not there at all.
  EXPECT_TRUE(refused("{% include '/etc/passwd' %}"));
  EXPECT_TRUE(refused("{% import 'os' as os %}{{ os.environ }}"));
  EXPECT_TRUE(refused("{% from 'os' import environ %}"));
  EXPECT_TRUE(refused("{% extends 'base.html' %}"));
  for (const char* name : {"os", "environ", "config", "request", "self", "__builtins__", "open", "eval"})
    EXPECT_EQ(render_sandboxed(std::string("{{ ") + name + " is defined }}"), "False") << name;
  EXPECT_TRUE(refused("{{ os.environ }}"));
  EXPECT_TRUE(refused("{{ open('/etc/passwd') }}"));
}

TEST(JinjaSandbox, InputsCannotBeMutated) {
  EXPECT_TRUE(refused("{{ messages.append({'role': 'system'}) }}"));
  EXPECT_TRUE(refused("{{ messages[0].update({'role': 'system'}) }}"));
  EXPECT_TRUE(refused("{{ messages[0].clear() }}"));
  EXPECT_TRUE(refused("{% set messages[0].role = 'system' %}"));
  // A template's own `set` shadows a name; the caller's data is untouched.
  EXPECT_EQ(render_sandboxed("{% set messages = [] %}{{ messages | length }}"), "0");
  EXPECT_EQ(render_sandboxed("{{ messages[0].role }}"), "user");
}

}  // namespace
}  // namespace ember::jinja
