#pragma once
// JSON Schema to GBNF, after llama.cpp's json-schema-to-grammar: objects (properties, required,
// additionalProperties: absent or false = no other keys), arrays (items, minItems, maxItems),
// strings (enum, const, minLength, maxLength, formats date, time, date-time, uuid, ipv4), integers with
// exact bounds, numbers with bounds (their integer part), boolean, null, enum/const of any value,
// anyOf, oneOf (branches that cannot overlap), $ref to local pointers ($defs, definitions, "#"),
// type arrays, and {"type": "json_object"} (any object). Whitespace between tokens is bounded so a model cannot spin in it forever.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ember::grammar {

// Properties keep the schema's order. Throws ember::Error naming an unsupported keyword and its JSON pointer ("... at /properties/a").
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);
// Any JSON object (response_format {"type": "json_object"}).
std::string json_object_gbnf();

// One JSON value matching `schema` between two literal texts: a shape of forced output, such as a
// tool call in a model family's format.
struct FramedSchema {
  std::string prefix;
  nlohmann::ordered_json schema;
  std::string suffix;
};
// The alternation of the shapes (one converter for all: their rules never clash). Throws as
// json_schema_to_gbnf, or for an empty list.
std::string framed_schemas_to_gbnf(const std::vector<FramedSchema>& shapes);

}  // namespace ember::grammar
