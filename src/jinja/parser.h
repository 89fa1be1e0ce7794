#pragma once
// Builds the syntax tree from tokens, following Jinja2's grammar and operator precedence.
#include <string_view>

#include "jinja/ast.h"

namespace ember::jinja {

// Throws ember::Error "line L, column C: ..." on a syntax error.
Body parse(std::string_view source);

}  // namespace ember::jinja
