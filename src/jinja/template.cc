#include "jinja/template.h"

#include "base/error.h"
#include "jinja/interpreter.h"
#include "jinja/parser.h"

namespace ember::jinja {

struct Template::Parsed {
  Body body;
};

Template Template::parse(std::string_view source) {
  Template t;
  auto parsed = std::make_shared<Parsed>();
  parsed->body = jinja::parse(source);
  t.parsed_ = std::move(parsed);
  return t;
}

std::string Template::render(const nlohmann::ordered_json& context, const RenderOptions& opts) const {
  if (!context.is_object() && !context.is_null()) throw Error("template context must be a JSON object");
  Dict globals;
  if (context.is_object()) {
    for (const auto& [k, v] : context.items()) {
      try {
        globals.entries.emplace_back(Value(k), Value::from_json(v));
      } catch (const RenderError& e) {
        throw Error("template variable '" + k + "': " + e.what());
      }
    }
  }
  Interpreter in(Limits{opts.max_steps, opts.max_output_bytes, opts.now});
  return in.render(parsed_->body, std::move(globals));
}

}  // namespace ember::jinja
