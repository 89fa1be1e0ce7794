// Chat templates from strangers' model folders: parse, then render with bounded steps and output.
// Input: template [NUL context JSON object]; without a context, a conversation that uses every
// message shape chat templates look at.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "fuzz_util.h"
#include "jinja/template.h"

namespace {

const nlohmann::ordered_json& default_context() {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "What is the weather in Paris?"},
      {"role": "assistant", "content": "<think>look it up</think>", "reasoning_content": "look it up",
       "tool_calls": [{"type": "function", "id": "call_1",
                       "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "call_1", "name": "get_weather"},
      {"role": "user", "content": [{"type": "text", "text": "Thanks"}, {"type": "image"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "documents": [{"title": "a", "text": "b"}],
    "add_generation_prompt": true, "enable_thinking": false,
    "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"
  })");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [source, context_text] = ember::fuzz::split_at_nul(data, size);
  nlohmann::ordered_json context = default_context();
  if (!context_text.empty()) {
    context = nlohmann::ordered_json::parse(context_text, nullptr, /*allow_exceptions=*/false);
    if (!context.is_object()) context = default_context();
  }
  ember::jinja::RenderOptions opts;
  opts.max_steps = 100'000;
  opts.max_output_bytes = 1u << 20;
  opts.now = 1721995200;  // a fixed clock keeps runs reproducible
  try {
    const auto t = ember::jinja::Template::parse(source);
    const std::string out = t.render(context, opts);
    if (out.size() > opts.max_output_bytes) std::abort();
  } catch (const ember::Error&) {
  }
  return 0;
}
