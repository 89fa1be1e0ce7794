#include "server/openai.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "base/error.h"
#include "base/format.h"
#include "base/utf8.h"
#include "chat/forced_tool_call.h"
#include "chat/messages.h"
#include "sampling/logits_processors.h"
#include "sampling/overrides.h"

namespace ember::server {

namespace {

[[noreturn]] void bad(const std::string& field, const std::string& what) {
  throw ApiError(400, "'" + field + "' " + what, field, "invalid_value");
}

const ordered_json* field(const ordered_json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

double number(const ordered_json& body, const char* name, double lo, double hi) {
  const ordered_json& v = *field(body, name);
  if (!v.is_number()) bad(name, "must be a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    bad(name, "must be between " + format_number(lo) + " and " + format_number(hi));
  return x;
}

int64_t integer(const ordered_json& body, const char* name, int64_t lo, int64_t hi) {
  const ordered_json& v = *field(body, name);
  if (!v.is_number_integer()) bad(name, "must be an integer");
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) bad(name, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return x;
}

bool boolean(const ordered_json& body, const char* name) {
  const ordered_json& v = *field(body, name);
  if (!v.is_boolean()) bad(name, "must be a boolean");
  return v.get<bool>();
}

// Every field of OpenAI's requests is read, refused by name or (where it cannot change the reply)
// accepted; anything else is a 400 naming it, never a reply that silently ignored it.
struct Fields {
  std::vector<std::string_view> read, ignored, unsupported;
};

// Fields both routes read (and Ember's own: top_k, min_p, repetition_penalty).
constexpr std::string_view kCommonFields[] = {
    "model", "n", "stream", "stream_options", "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "seed",
    "max_tokens", "max_completion_tokens", "stop", "frequency_penalty", "presence_penalty", "logit_bias", "user",
    "logprobs", "speculative"};

const Fields& chat_fields() {
  static const Fields f{
      {"messages", "top_logprobs", "reasoning_effort", "thinking_budget", "chat_template_kwargs", "tools", "tool_choice",
       "parallel_tool_calls", "response_format", "grammar", "continue_final_message"},
      // Bookkeeping for OpenAI's platform, with no effect on the reply (prefixes are reused anyway).
      {"metadata", "service_tier", "safety_identifier", "prompt_cache_key", "prompt_cache_retention"},
      {"audio", "modalities", "prediction", "functions", "function_call", "web_search_options", "verbosity", "store"}};
  return f;
}

const Fields& text_fields() {
  static const Fields f{{"prompt", "echo", "best_of", "response_format", "grammar"}, {}, {"suffix"}};
  return f;
}

bool listed(const std::vector<std::string_view>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

void check_fields(const ordered_json& body, bool chat) {
  const Fields& f = chat ? chat_fields() : text_fields();
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& name = it.key();
    const ordered_json& v = it.value();
    if (std::find(std::begin(kCommonFields), std::end(kCommonFields), name) != std::end(kCommonFields) ||
        listed(f.read, name) || listed(f.ignored, name) || v.is_null())
      continue;
    if (listed(f.unsupported, name)) {
      // The values that ask for what Ember does anyway.
      if (name == "response_format" && v.is_object() && v.value("type", "") == "text") continue;
      if (name == "modalities" && v == ordered_json::array({"text"})) continue;
      if (name == "store" && v == false) continue;
      if (name == "suffix" && v == "") continue;
      throw ApiError(400, "'" + name + "' is not supported by this server", name, "unsupported_parameter");
    }
    throw ApiError(400,
                   "unrecognized request argument '" + name + "' (not a field of " +
                       (chat ? "/v1/chat/completions" : "/v1/completions") + ")",
                   name, "unknown_parameter");
  }
}

// response_format (text, json_object, json_schema) and llama-server's `grammar`: the structure the
// reply's text must have, on both routes.
void parse_output_format(const ordered_json& body, ResponseFormat& out) {
  if (const auto* rf = field(body, "response_format")) {
    using Kind = ResponseFormat::Kind;
    const std::string type = rf->is_object() ? rf->value("type", "") : "";
    if (type == "text") out.kind = Kind::kText;
    else if (type == "json_object") out.kind = Kind::kJsonObject;
    else if (type == "json_schema") {
      const auto it = rf->find("json_schema");
      if (it == rf->end() || !it->is_object()) bad("response_format", "of type json_schema needs a json_schema object");
      if (!it->value("name", ordered_json()).is_string()) bad("response_format", "json_schema needs a string name");
      const auto schema = it->find("schema");
      if (schema != it->end() && !schema->is_object() && !schema->is_boolean())
        bad("response_format", "json_schema.schema must be a JSON Schema object");
      out.kind = Kind::kJsonSchema;
      out.name = (*it)["name"].get<std::string>();
      out.schema = schema != it->end() ? *schema : ordered_json::object();
    } else {
      bad("response_format", "must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or {\"type\": \"json_schema\", ...}");
    }
  }
  if (const auto* g = field(body, "grammar")) {  // llama-server's: GBNF the whole reply follows
    if (!g->is_string() || g->get_ref<const std::string&>().empty()) bad("grammar", "must be GBNF text");
    if (out.kind != ResponseFormat::Kind::kText) bad("grammar", "cannot be combined with response_format");
    out.kind = ResponseFormat::Kind::kGbnf;
    out.gbnf = g->get<std::string>();
  }
}

void parse_common(const ordered_json& body, const sampling::SamplingParams& defaults, size_t vocab_size,
                  CompletionRequest& r, bool chat) {
  check_fields(body, chat);
  sampling::SamplingParams& p = r.params;
  if (field(body, "model")) {
    if (!body["model"].is_string()) bad("model", "must be a string");
    r.model = body["model"].get<std::string>();
  }
  if (field(body, "n")) r.n = static_cast<int>(integer(body, "n", 1, kMaxChoices));
  if (field(body, "stream")) r.stream = boolean(body, "stream");
  if (field(body, "speculative")) r.speculative = boolean(body, "speculative");
  if (const auto* so = field(body, "stream_options")) {
    if (!so->is_object()) bad("stream_options", "must be an object");
    if (field(*so, "include_usage")) r.include_usage = boolean(*so, "include_usage");
    if (!r.stream) bad("stream_options", "is only allowed when stream is true");  // as OpenAI: it would do nothing
  }
  // The options every front end shares go through sampling::apply (one rule for what turns sampling on).
  SamplingOptions o;
  if (field(body, "temperature")) o.temperature = static_cast<float>(number(body, "temperature", 0, 2));
  if (field(body, "top_p")) {  // an empty nucleus keeps nothing: 0 is refused here, by name
    o.top_p = static_cast<float>(number(body, "top_p", 0, 1));
    if (o.top_p <= 0) bad("top_p", "must be above 0 and at most 1");
  }
  if (field(body, "top_k")) o.top_k = static_cast<int32_t>(integer(body, "top_k", 0, 1 << 20));
  if (field(body, "min_p")) o.min_p = static_cast<float>(number(body, "min_p", 0, 1));
  if (field(body, "repetition_penalty"))
    o.repetition_penalty = static_cast<float>(number(body, "repetition_penalty", 0.01, 100));
  if (field(body, "seed")) {
    const ordered_json& v = body["seed"];
    if (!v.is_number_integer()) bad("seed", "must be an integer");
    o.seed = v.is_number_unsigned() ? v.get<uint64_t>() : static_cast<uint64_t>(v.get<int64_t>());
  }
  for (const char* name : {"max_tokens", "max_completion_tokens"})
    if (field(body, name)) {
      r.max_tokens = integer(body, name, 0, 1 << 30);
      r.max_tokens_field = name;
      o.max_tokens = static_cast<int32_t>(*r.max_tokens);
    }
  if (const auto* stop = field(body, "stop")) {
    if (stop->is_string()) {
      o.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (const auto& s : *stop) {
        if (!s.is_string()) bad("stop", "must be a string or a list of strings");
        o.stop.push_back(s.get<std::string>());
      }
    } else {
      bad("stop", "must be a string or a list of strings");
    }
    for (const auto& s : o.stop)
      if (s.empty()) bad("stop", "must not contain an empty string");
  }
  try {
    p = sampling::apply(defaults, o);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), {}, "invalid_value");
  }
  if (field(body, "frequency_penalty")) p.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", -2, 2));
  if (field(body, "presence_penalty")) p.presence_penalty = static_cast<float>(number(body, "presence_penalty", -2, 2));
  if (const auto* lb = field(body, "logit_bias")) {
    if (!lb->is_object()) bad("logit_bias", "must be an object of token id -> bias");
    for (auto it = lb->begin(); it != lb->end(); ++it) {
      size_t used = 0;
      int32_t id = -1;
      try {
        id = std::stoi(it.key(), &used);
      } catch (const std::exception&) {
      }
      if (used != it.key().size() || id < 0) bad("logit_bias", "keys must be token ids");
      try {  // else the sampler refuses it mid-generation, a 500 the client could not act on
        sampling::check_token_id(id, vocab_size, "logit_bias");
      } catch (const Error& e) {
        throw ApiError(400, e.what(), "logit_bias", "invalid_value");
      }
      if (!it.value().is_number()) bad("logit_bias", "values must be numbers");
      if (!(std::fabs(it.value().get<double>()) <= 100)) bad("logit_bias", "values must be between -100 and 100");
      p.logit_bias[id] = it.value().get<float>();
    }
  }
  if (field(body, "user") && !body["user"].is_string()) bad("user", "must be a string");
  parse_output_format(body, r.response_format);
}

void parse_logprobs(const ordered_json& body, CompletionRequest& r, bool chat) {
  if (chat) {
    if (field(body, "logprobs")) r.params.logprobs = boolean(body, "logprobs");
    if (field(body, "top_logprobs")) {
      r.top_logprobs = static_cast<int32_t>(integer(body, "top_logprobs", 0, 20));
      if (!r.params.logprobs && r.top_logprobs > 0) bad("top_logprobs", "needs 'logprobs': true");
    }
  } else if (field(body, "logprobs")) {  // legacy completions: an integer count of alternatives
    r.top_logprobs = static_cast<int32_t>(integer(body, "logprobs", 0, 5));
    r.params.logprobs = true;
  }
  r.params.top_logprobs = r.top_logprobs;
}

}  // namespace

ApiError::ApiError(int status_, std::string message, std::string param_, std::string code_)
    : std::runtime_error(std::move(message)), status(status_), param(std::move(param_)), code(std::move(code_)) {}

ordered_json error_body(int status, const std::string& message, const std::string& param, const std::string& code) {
  const char* type = "invalid_request_error";
  if (status == 401) type = "authentication_error";
  else if (status == 404) type = "not_found_error";
  else if (status == 429) type = "rate_limit_error";
  else if (status >= 500) type = "server_error";
  ordered_json e{{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  return ordered_json{{"error", e}};
}

ordered_json parse_body(const std::string& text) {
  // JSON copies and dumps recurse, so a body nested thousands deep would overflow the stack
  // later; no OpenAI request (tool schemas included) comes near this.
  constexpr int kMaxNesting = 128;
  const auto limit_nesting = [](int depth, ordered_json::parse_event_t, ordered_json&) {
    if (depth > kMaxNesting)
      throw ApiError(400, "the request body nests JSON more than " + std::to_string(kMaxNesting) + " levels deep",
                     {}, "invalid_json");
    return true;
  };
  ordered_json body;
  try {
    body = ordered_json::parse(text, limit_nesting);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what(), {}, "invalid_json");
  }
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object", {}, "invalid_json");
  return body;
}

ChatRequest parse_chat_request(const ordered_json& body, const sampling::SamplingParams& defaults, size_t vocab_size) {
  ChatRequest r;
  parse_common(body, defaults, vocab_size, r, /*chat=*/true);
  parse_logprobs(body, r, /*chat=*/true);
  const auto* msgs = field(body, "messages");
  if (msgs == nullptr) bad("messages", "is required");
  try {
    r.messages = chat::check_messages(*msgs);
  } catch (const chat::MessageError& e) {
    throw ApiError(400, e.what(), e.field, "invalid_value");
  }
  if (const auto* effort = field(body, "reasoning_effort")) {
    static const std::vector<std::string> kEfforts{"none", "minimal", "low", "medium", "high"};
    if (!effort->is_string() || std::find(kEfforts.begin(), kEfforts.end(), effort->get<std::string>()) == kEfforts.end())
      bad("reasoning_effort", "must be one of none, minimal, low, medium, high");
    // Templates that know the field (gpt-oss) read it; thinking switches for the rest (Qwen3's enable_thinking).
    const std::string e = effort->get<std::string>();
    r.options.extra_variables["reasoning_effort"] = e;
    r.options.enable_thinking = e != "none" && e != "minimal";
  }
  if (field(body, "thinking_budget"))  // as the CLI's --think-budget: tokens a thought may take
    r.options.think_budget = integer(body, "thinking_budget", -1, 1 << 30);
  if (const auto* kw = field(body, "chat_template_kwargs")) {
    if (!kw->is_object()) bad("chat_template_kwargs", "must be an object");
    for (auto it = kw->begin(); it != kw->end(); ++it) r.options.extra_variables[it.key()] = it.value();
    // The template kwarg rules; a boolean also tells the engine (thinking off: a grammar or a forced
    // call holds from the reply's first token, with no <think> before it).
    if (const auto et = kw->find("enable_thinking"); et != kw->end()) {
      if (et->is_boolean()) r.options.enable_thinking = et->get<bool>();
      else r.options.enable_thinking.reset();
    }
  }
  if (const auto* tools = field(body, "tools")) {
    if (!tools->is_array()) bad("tools", "must be an array");
    if (!tools->empty()) {
      try {
        chat::check_function_tools(*tools);
      } catch (const Error& e) {
        throw ApiError(400, e.what(), "tools", "invalid_value");
      }
      r.options.tools = *tools;
      r.tool_choice.mode = ToolChoice::Mode::kAuto;
    }
  }
  if (const auto* tc = field(body, "tool_choice")) {
    using Mode = ToolChoice::Mode;
    if (*tc == "none") r.tool_choice.mode = Mode::kNone;
    else if (*tc == "auto") r.tool_choice.mode = Mode::kAuto;
    else if (*tc == "required") r.tool_choice.mode = Mode::kRequired;
    else if (tc->is_object() && tc->value("type", "") == "function" && tc->contains("function") &&
             (*tc)["function"].is_object() && (*tc)["function"].value("name", ordered_json()).is_string()) {
      r.tool_choice = {Mode::kFunction, (*tc)["function"]["name"].get<std::string>()};
    } else {
      bad("tool_choice", "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    if (r.tool_choice.mode != Mode::kNone && r.options.tools.is_null())
      bad("tool_choice", "needs tools");
  }
  if (field(body, "parallel_tool_calls")) r.parallel_tool_calls = boolean(body, "parallel_tool_calls");
  if (field(body, "continue_final_message")) {  // vLLM's: the reply continues the last (assistant) message
    r.options.continue_final_message = boolean(body, "continue_final_message");
    if (r.options.continue_final_message && (r.messages.empty() || r.messages.back().value("role", "") != "assistant"))
      bad("continue_final_message", "needs the last message to be the assistant's");
  }
  if (r.response_format.kind != ResponseFormat::Kind::kText &&
      (r.tool_choice.mode == ToolChoice::Mode::kRequired || r.tool_choice.mode == ToolChoice::Mode::kFunction))
    bad(engine::format_field(r.response_format),
        "cannot be combined with a tool_choice that forces a call");
  return r;
}

TextRequest parse_text_request(const ordered_json& body, const sampling::SamplingParams& defaults, size_t vocab_size) {
  TextRequest r;
  r.prompt_field = "prompt";
  parse_common(body, defaults, vocab_size, r, /*chat=*/false);
  parse_logprobs(body, r, /*chat=*/false);
  if (field(body, "echo")) r.echo = boolean(body, "echo");
  if (r.echo && r.params.logprobs)  // OpenAI's answer would hold the prompt tokens' logprobs too
    throw ApiError(400, "'echo' with 'logprobs' is not supported by this server", "echo", "unsupported_parameter");
  if (field(body, "best_of")) {  // OpenAI: best_of candidates, the n most likely returned
    const int64_t best_of = integer(body, "best_of", 1, 20);
    if (best_of < r.n) bad("best_of", "must be at least n (" + std::to_string(r.n) + ")");
    if (best_of > r.n)
      throw ApiError(400, "'best_of' greater than n is not supported by this server (ask for n choices instead)",
                     "best_of", "unsupported_parameter");
  }
  const auto* prompt = field(body, "prompt");
  if (prompt == nullptr) bad("prompt", "is required");
  r.prompts = parse_prompts(*prompt, "prompt", vocab_size);
  return r;
}

std::vector<TextPrompt> parse_prompts(const ordered_json& value, const char* name, size_t vocab_size) {
  std::vector<TextPrompt> prompts;
  auto ids_of = [&](const ordered_json& list) {
    TextPrompt p;
    for (const auto& t : list) {
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id >= static_cast<int64_t>(vocab_size))
        bad(name, "holds token id " + std::to_string(id) + ", outside the vocabulary of " + std::to_string(vocab_size));
      p.ids.push_back(static_cast<int32_t>(id));
    }
    return p;
  };
  auto all_ids = [](const ordered_json& j) {
    return j.is_array() && !j.empty() && std::all_of(j.begin(), j.end(), [](const ordered_json& t) {
             return t.is_number_integer();
           });
  };
  // A string, token ids, or a list of prompts each a string or token ids.
  if (value.is_string()) {
    prompts.push_back({value.get<std::string>(), {}});
  } else if (all_ids(value)) {
    prompts.push_back(ids_of(value));
  } else if (value.is_array() && !value.empty()) {
    for (const auto& one : value) {
      if (one.is_string()) prompts.push_back({one.get<std::string>(), {}});
      else if (all_ids(one)) prompts.push_back(ids_of(one));
      else bad(name, "must be a string, a list of token ids, or a list of those (item " +
                         std::to_string(prompts.size()) + " is neither)");
    }
  } else {
    bad(name, "must be a string, a list of token ids, or a list of those");
  }
  return prompts;
}

const char* finish_reason(engine::FinishReason r) { return engine::finish_reason_name(r); }

ordered_json logprobs_json(const tokenizer::Tokenizer& tok, tokenizer::StreamDecoder& pieces,
                           const std::vector<engine::GeneratedToken>& tokens, bool with_top) {
  // `text`: what token `id` adds to the choice's text in its place. A token that holds part of a
  // character (its own bytes are not UTF-8) is written as OpenAI writes one, "bytes:\xf0\x9f" with
  // those bytes, so that the entries' bytes concatenate to the content's.
  auto entry = [&](int32_t id, const std::string& text, float logprob) {
    std::string token = text, own = text;
    if (const std::optional<std::string> raw = tok.token_bytes(id); raw && !utf8::is_valid(*raw)) {
      own = *raw;
      token = "bytes:";
      for (const unsigned char c : own) {
        if (c < 0x80) {
          token += static_cast<char>(c);
          continue;
        }
        constexpr char kHex[] = "0123456789abcdef";
        token += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
      }
    }
    ordered_json bytes = ordered_json::array();
    for (const unsigned char c : own) bytes.push_back(static_cast<int>(c));
    return ordered_json{{"token", token}, {"logprob", logprob}, {"bytes", bytes}};
  };
  ordered_json out = ordered_json::array();
  for (const auto& t : tokens) {
    if (t.end) continue;  // not part of the text
    ordered_json top = ordered_json::array();
    if (with_top && t.logprobs)
      for (const auto& alt : t.logprobs->top) {
        tokenizer::StreamDecoder what_if = pieces;  // the alternative in the same place
        top.push_back(entry(alt.token, what_if.push(alt.token), alt.logprob));
      }
    const std::string text = pieces.push(t.id);
    if (!t.logprobs) continue;  // forced tokens were not sampled
    ordered_json e = entry(t.id, text, t.logprobs->chosen.logprob);
    e["top_logprobs"] = top;
    out.push_back(std::move(e));
  }
  return out;
}

ordered_json usage_json(const engine::StreamUpdate& u) {
  return ordered_json{{"prompt_tokens", u.prompt_tokens},
                      {"completion_tokens", u.completion_tokens},
                      {"total_tokens", u.prompt_tokens + u.completion_tokens},
                      {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

}  // namespace ember::server
