#pragma once
// A Jinja2 template engine for Hugging Face chat templates: parses once, renders many times,
// byte for byte as Python jinja2 3.1 renders in transformers' immutable sandbox
// (trim_blocks, lstrip_blocks, loopcontrols, {% generation %}, tojson without HTML escaping).
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ember::jinja {

struct RenderOptions {
  uint64_t max_steps = 10'000'000;
  size_t max_output_bytes = 16u << 20;
  std::optional<std::time_t> now;  // strftime_now clock; nullopt = current local time
};


class Template {
 public:
  // Throws ember::Error "line L, column C: ..." on a syntax error.
  static Template parse(std::string_view source);
  // Throws ember::Error naming line and column; raise_exception(msg) gives an error whose
  // what() contains msg exactly. Safe to call concurrently.
  std::string render(const nlohmann::ordered_json& context, const RenderOptions& opts = {}) const;

 private:
  struct Parsed;
  std::shared_ptr<const Parsed> parsed_;
};

}  // namespace ember::jinja
