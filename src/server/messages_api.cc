#include "server/messages_api.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "server/request_fields.h"

namespace ember::server {

namespace {

[[noreturn]] void invalid_field(const std::string& field, const std::string& what) {
  throw ApiError(400, field + ": " + what, field, "invalid_value");
}

constexpr std::string_view kMessagesFields[] = {"model",       "messages", "max_tokens", "system", "stop_sequences",
                                      "stream",      "temperature", "top_p",   "top_k",  "tools",
                                      "tool_choice", "thinking", "output_config", "context_management"};
constexpr std::string_view kCountFields[] = {"model", "messages", "system", "tools", "tool_choice", "thinking",
                                             "output_config", "context_management"};
// Bookkeeping with no effect on the reply.
constexpr std::string_view kMessagesIgnored[] = {"metadata", "service_tier"};

std::string string_at(const ordered_json& o, const std::string& where, const char* key) {
  if (!o.contains(key) || !o[key].is_string()) invalid_field(where + "." + key, "must be a string");
  return o[key].get<std::string>();
}

// A tool_result's content: a string or text blocks.
std::string result_text(const ordered_json& c, const std::string& where) {
  if (c.is_null()) return {};
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) invalid_field(where, "must be a string or a list of text blocks");
  std::string text;
  for (size_t k = 0; k < c.size(); ++k) {
    const std::string at = where + "[" + std::to_string(k) + "]";
    if (!c[k].is_object() || c[k].value("type", "") != "text")
      invalid_field(at + ".type", "tool results may hold text blocks only on this server");
    text += string_at(c[k], at, "text");
  }
  return text;
}

// A system prompt: a string or text blocks (joined by newlines), appended to `text`.
void append_system(const ordered_json& s, const std::string& where, std::string& text) {
  auto add = [&](const std::string& part) { text += (text.empty() ? "" : "\n") + part; };
  if (s.is_string()) {
    add(s.get<std::string>());
  } else if (s.is_array()) {
    for (size_t k = 0; k < s.size(); ++k) {
      const std::string at = where + "[" + std::to_string(k) + "]";
      if (!s[k].is_object() || s[k].value("type", "") != "text") invalid_field(at + ".type", "must be \"text\"");
      add(string_at(s[k], at, "text"));
    }
  } else {
    invalid_field(where, "must be a string or a list of text blocks");
  }
}

// Anthropic's messages as Chat Completions messages: tool_use blocks become the assistant's
// tool_calls, tool_result blocks tool messages, thinking blocks reasoning_content. System-role
// messages among them (Claude Code sends some) join the system prompt, in order: chat templates take
// a system message only at the start.
ordered_json chat_messages(const ordered_json& body) {
  ordered_json out = ordered_json::array();
  std::string system;
  if (present(body, "system")) append_system(body["system"], "system", system);
  if (!present(body, "messages")) invalid_field("messages", "Field required");
  const ordered_json& msgs = body["messages"];
  if (!msgs.is_array()) invalid_field("messages", "must be a list of messages");
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ordered_json& m = msgs[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) invalid_field(where, "must be an object with role and content");
    for (const auto& [key, value] : m.items())
      if (key != "role" && key != "content") invalid_field(where + "." + key, "is not a message field (role, content)");
    const std::string role = string_at(m, where, "role");
    if (role != "user" && role != "assistant" && role != "system")
      invalid_field(where + ".role", "must be \"user\", \"assistant\" or \"system\" (not \"" + role + "\")");
    if (!m.contains("content")) invalid_field(where + ".content", "Field required");
    const ordered_json& c = m["content"];
    if (role == "system") {
      append_system(c, where + ".content", system);
      continue;
    }
    if (c.is_string()) {
      out.push_back({{"role", role}, {"content", c}});
      continue;
    }
    if (!c.is_array()) invalid_field(where + ".content", "must be a string or a list of content blocks");
    std::string text, thinking;
    ordered_json calls = ordered_json::array();
    for (size_t k = 0; k < c.size(); ++k) {
      const ordered_json& b = c[k];
      const std::string at = where + ".content[" + std::to_string(k) + "]";
      if (!b.is_object() || !b.contains("type") || !b["type"].is_string()) invalid_field(at, "must be a content block with a type");
      const std::string type = b["type"].get<std::string>();
      if (type == "text") {
        text += string_at(b, at, "text");
      } else if (type == "tool_result" && role == "user") {
        ordered_json tool{{"role", "tool"},
                          {"tool_call_id", string_at(b, at, "tool_use_id")},
                          {"content", result_text(b.value("content", ordered_json()), at + ".content")}};
        out.push_back(std::move(tool));
      } else if (type == "tool_use" && role == "assistant") {
        const std::string id = string_at(b, at, "id"), name = string_at(b, at, "name");
        if (!b.contains("input") || !b["input"].is_object()) invalid_field(at + ".input", "must be an object");
        calls.push_back({{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", b["input"].dump()}}}});
      } else if (type == "thinking" && role == "assistant") {
        thinking += string_at(b, at, "thinking");
      } else if (type == "redacted_thinking" && role == "assistant") {
        // Encrypted by another provider: nothing a local model can read.
      } else {
        throw ApiError(400, at + ".type: '" + type + "' blocks are not supported " +
                                (role == "user" ? "in user messages " : "in assistant messages ") + "by this server",
                       at + ".type", "unsupported_parameter");
      }
    }
    if (text.empty() && calls.empty() && thinking.empty()) continue;  // a user turn of tool results only
    ordered_json msg{{"role", role}, {"content", text}};
    if (!thinking.empty()) msg["reasoning_content"] = thinking;
    if (!calls.empty()) msg["tool_calls"] = calls;
    out.push_back(std::move(msg));
  }
  if (!system.empty()) out.insert(out.begin(), ordered_json{{"role", "system"}, {"content", system}});
  return out;
}

ordered_json chat_tools(const ordered_json& tools) {
  if (!tools.is_array()) invalid_field("tools", "must be a list of tools");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ordered_json& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) invalid_field(where, "must be a tool object");
    if (present(t, "type") && t["type"] != "custom")
      throw ApiError(400, where + ".type: '" + t["type"].dump() + "' tools (Anthropic's server and client tools) are "
                                  "not supported by this server (custom tools with an input_schema only)",
                     where + ".type", "unsupported_parameter");
    ordered_json fn{{"name", string_at(t, where, "name")}};
    if (present(t, "description")) fn["description"] = t["description"];
    if (!t.contains("input_schema") || !t["input_schema"].is_object()) invalid_field(where + ".input_schema", "must be an object");
    fn["parameters"] = t["input_schema"];
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out;
}

std::string anthropic_field(const std::string& chat_field) {
  if (chat_field == "stop") return "stop_sequences";
  if (chat_field == "tool_choice" || chat_field == "parallel_tool_calls") return "tool_choice";
  return chat_field;
}

}  // namespace

ChatRequest parse_messages_request(const ordered_json& body, const sampling::SamplingParams& defaults,
                                   size_t vocab_size, bool counting) {
  for (const auto& [name, value] : body.items()) {
    if ((counting ? listed(kCountFields, name) : listed(kMessagesFields, name)) || listed(kMessagesIgnored, name) || value.is_null()) continue;
    throw ApiError(400, name + ": Extra inputs are not permitted (not a field of " +
                            (counting ? "/v1/messages/count_tokens" : "/v1/messages") + " on this server)",
                   name, "unknown_parameter");
  }
  if (!present(body, "model")) invalid_field("model", "Field required");
  if (!counting && !present(body, "max_tokens")) invalid_field("max_tokens", "Field required");
  ordered_json chat{{"messages", chat_messages(body)}, {"model", body["model"]}};
  if (!counting) {
    for (const char* same : {"max_tokens", "stream", "top_p", "top_k"})
      if (present(body, same)) chat[same] = body[same];
    if (present(body, "temperature")) {  // Anthropic's range is 0 to 1
      const ordered_json& t = body["temperature"];
      if (!t.is_number() || t.get<double>() < 0 || t.get<double>() > 1) invalid_field("temperature", "must be a number from 0 to 1");
      chat["temperature"] = t;
    }
    if (present(body, "stop_sequences")) chat["stop"] = body["stop_sequences"];
  }
  if (present(body, "output_config")) {
    const ordered_json& oc = body["output_config"];
    if (!oc.is_object()) invalid_field("output_config", "must be an object");
    for (const auto& [key, value] : oc.items()) {
      if (value.is_null()) continue;
      if (key == "format") {  // structured output: {"type": "json_schema", "schema"}
        if (!value.is_object() || value.value("type", "") != "json_schema" || !value.contains("schema"))
          invalid_field("output_config.format", "must be {\"type\": \"json_schema\", \"schema\": {...}}");
        chat["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "output"}, {"schema", value["schema"]}}}};
      } else if (key != "effort") {
        invalid_field("output_config." + key, "is not a field of output_config (effort, format)");
      }
    }
  }
  if (present(body, "context_management")) {
    // Clearing earlier turns' thinking changes nothing when it keeps all of it; other edits would.
    const ordered_json& cm = body["context_management"];
    const ordered_json edits = cm.is_object() ? cm.value("edits", ordered_json::array()) : ordered_json();
    if (!edits.is_array()) invalid_field("context_management", "must be an object with a list of edits");
    for (size_t k = 0; k < edits.size(); ++k)
      if (!edits[k].is_object() || !edits[k].value("type", "").starts_with("clear_thinking_") ||
          edits[k].value("keep", ordered_json()) != "all")
        throw ApiError(400, "context_management.edits[" + std::to_string(k) + "]: only clearing thinking with keep \"all\" "
                                "is supported by this server (it changes nothing)",
                       "context_management.edits[" + std::to_string(k) + "]", "unsupported_parameter");
  }
  // A last assistant message is the reply begun ("prefill"): the reply continues it.
  if (const ordered_json& m = chat["messages"]; !m.empty() && m.back()["role"] == "assistant" &&
                                                 !m.back().contains("tool_calls"))
    chat["continue_final_message"] = true;
  if (present(body, "tools")) chat["tools"] = chat_tools(body["tools"]);
  if (present(body, "tool_choice")) {
    const ordered_json& tc = body["tool_choice"];
    const std::string type = tc.is_object() ? tc.value("type", "") : "";
    if (type == "auto" || type == "none") chat["tool_choice"] = type;
    else if (type == "any") chat["tool_choice"] = "required";
    else if (type == "tool") chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", string_at(tc, "tool_choice", "name")}}}};
    else invalid_field("tool_choice", "must be {\"type\": \"auto\"}, {\"type\": \"any\"}, {\"type\": \"tool\", \"name\": ...} or {\"type\": \"none\"}");
    if (tc.contains("disable_parallel_tool_use")) {
      if (!tc["disable_parallel_tool_use"].is_boolean()) invalid_field("tool_choice.disable_parallel_tool_use", "must be a boolean");
      chat["parallel_tool_calls"] = !tc["disable_parallel_tool_use"].get<bool>();
    }
    if (type != "none" && !chat.contains("tools")) invalid_field("tool_choice", "needs tools");
  }
  ChatRequest r;
  try {
    r = parse_chat_request(chat, defaults, vocab_size);
  } catch (const ApiError& e) {
    const std::string param = anthropic_field(e.param);
    std::string message = e.what();
    if (const size_t at = message.find("'" + e.param + "'"); !e.param.empty() && at != std::string::npos)
      message.replace(at, e.param.size() + 2, param + ":");
    throw ApiError(e.status, message, param, e.code);
  }
  if (r.max_tokens && *r.max_tokens < 1) invalid_field("max_tokens", "must be at least 1");
  if (present(body, "thinking")) {
    const ordered_json& t = body["thinking"];
    const std::string type = t.is_object() ? t.value("type", "") : "";
    if (type == "enabled") {
      if (!t.contains("budget_tokens") || !t["budget_tokens"].is_number_integer() || t["budget_tokens"].get<int64_t>() < 1)
        invalid_field("thinking.budget_tokens", "must be a positive integer");
      const int64_t budget = t["budget_tokens"].get<int64_t>();
      if (r.max_tokens && budget >= *r.max_tokens) invalid_field("thinking.budget_tokens", "must be less than max_tokens");
      r.options.enable_thinking = true;
      r.options.think_budget = budget;
    } else if (type == "adaptive") {  // the model thinks as long as it wants
      r.options.enable_thinking = true;
    } else if (type == "disabled") {
      r.options.enable_thinking = false;
    } else {
      invalid_field("thinking", "must be {\"type\": \"enabled\", \"budget_tokens\": N}, {\"type\": \"adaptive\"} or "
                                "{\"type\": \"disabled\"}");
    }
  } else {
    // Anthropic thinks only when asked to, and clients read the reply from content[0]: a template
    // that thinks by default (Qwen3's) is told not to.
    r.options.enable_thinking = false;
  }
  if (present(body, "output_config") && present(body["output_config"], "effort")) {
    // Templates that know an effort (gpt-oss's reasoning_effort) read it.
    const ordered_json& e = body["output_config"]["effort"];
    static const std::vector<std::string> kEfforts{"low", "medium", "high", "max"};
    if (!e.is_string() || std::find(kEfforts.begin(), kEfforts.end(), e.get<std::string>()) == kEfforts.end())
      invalid_field("output_config.effort", "must be one of low, medium, high, max");
    r.options.extra_variables["reasoning_effort"] = e == "max" ? "high" : e.get<std::string>();
  }
  return r;
}

ordered_json anthropic_error_body(int status, const std::string& message, const std::string&, const std::string&) {
  const char* type = "invalid_request_error";
  if (status == 401) type = "authentication_error";
  else if (status == 403) type = "permission_error";
  else if (status == 404) type = "not_found_error";
  else if (status == 413) type = "request_too_large";
  else if (status == 429) type = "rate_limit_error";
  else if (status == 503 || status == 529) type = "overloaded_error";
  else if (status >= 500) type = "api_error";
  return ordered_json{{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
}

namespace {

class MessagesShaper : public ReplyShaper {
 public:
  explicit MessagesShaper(MessagesReplyOptions o) : o_(std::move(o)) {}

  // message_start waits for the first delta: its usage splits the prompt into input and cached
  // tokens as the final message_delta does, and the cached ones are known once the scheduler took
  // the request (keep-alive comments go out meanwhile).
  std::string delta(const ReplyStream& reply, const ChoiceDelta& d) override {
    const ChoiceReply& r = reply.reply(0);
    std::string out = start(r.prompt_tokens, r.cached_tokens);
    if (!d.reasoning.empty()) {
      out += start_block(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
      out += event("content_block_delta", {{"index", index_}, {"delta", {{"type", "thinking_delta"}, {"thinking", d.reasoning}}}});
    }
    for (const chat::ToolCallDelta& part : d.parts) {
      if (!part.content.empty()) {
        out += start_block(Block::kText, {{"type", "text"}, {"text", ""}});
        out += event("content_block_delta", {{"index", index_}, {"delta", {{"type", "text_delta"}, {"text", part.content}}}});
      }
      for (const chat::ToolCallChunk& c : part.tool_calls) {
        if (!c.id.empty() || open_ != Block::kToolUse) {
          out += stop_block();
          out += start_block(Block::kToolUse, {{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", ordered_json::object()}});
        }
        if (!c.arguments.empty())
          out += event("content_block_delta",
                       {{"index", index_}, {"delta", {{"type", "input_json_delta"}, {"partial_json", c.arguments}}}});
      }
    }
    if (d.finished) out += stop_block();
    return out;
  }

  std::string close(const ReplyStream& reply) override {
    const ChoiceReply& r = reply.reply(0);
    const engine::StreamUpdate t = reply.totals();
    std::string out = event("message_delta", {{"delta", {{"stop_reason", stop_reason(r)}, {"stop_sequence", stop_sequence(r)}}},
                                              {"usage", usage(t)}});
    return out + event("message_stop", ordered_json::object());
  }

  std::string stream_error(const ReplyFailure& f) override {
    ordered_json e = anthropic_error_body(f.status, f.message);
    return start(o_.prompt_tokens, 0) + sse(e, "error");
  }

  ordered_json whole(const ReplyStream& reply) override {
    const ChoiceReply& r = reply.reply(0);
    ordered_json content = ordered_json::array();
    if (!r.reasoning.empty()) content.push_back({{"type", "thinking"}, {"thinking", r.reasoning}, {"signature", ""}});
    // A reply cut while thinking has no text block (not an empty one); any other has one unless calls.
    if (!r.reply.content.empty() || (r.reply.tool_calls.empty() && r.reasoning.empty()))
      content.push_back({{"type", "text"}, {"text", r.reply.content}});
    for (const chat::ToolCall& c : r.reply.tool_calls) {
      ordered_json input = ordered_json::parse(c.arguments, nullptr, /*allow_exceptions=*/false);
      if (!input.is_object()) input = ordered_json::object();  // a cut call's arguments are whole objects too
      content.push_back({{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", input}});
    }
    ordered_json m = message(std::move(content));
    m["stop_reason"] = stop_reason(r);
    m["stop_sequence"] = stop_sequence(r);
    m["usage"] = usage(reply.totals());
    return m;
  }

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };

  std::string start(int64_t prompt_tokens, int64_t cached_tokens) {
    if (started_) return {};
    started_ = true;
    ordered_json m = message(ordered_json::array());
    engine::StreamUpdate counts;
    counts.prompt_tokens = prompt_tokens;
    counts.cached_tokens = cached_tokens;
    m["usage"] = usage(counts);
    return event("message_start", {{"message", m}});
  }

  static std::string event(const char* type, ordered_json fields) {
    ordered_json e{{"type", type}};
    for (auto& [k, v] : fields.items()) e[k] = std::move(v);
    return sse(e, type);
  }

  ordered_json message(ordered_json content) const {
    return ordered_json{{"id", o_.id},          {"type", "message"},      {"role", "assistant"},
                        {"model", o_.model},    {"content", std::move(content)}, {"stop_reason", nullptr},
                        {"stop_sequence", nullptr}};
  }

  static ordered_json usage(const engine::StreamUpdate& t) {
    // Anthropic counts the prompt tokens read from its cache apart from input_tokens.
    return ordered_json{{"input_tokens", t.prompt_tokens - t.cached_tokens},
                        {"output_tokens", t.completion_tokens},
                        {"cache_creation_input_tokens", 0},
                        {"cache_read_input_tokens", t.cached_tokens}};
  }

  static ordered_json stop_reason(const ChoiceEnd& e) {
    if (e.called) return "tool_use";
    switch (e.finish) {
      case engine::FinishReason::kStopString: return e.stop_string.empty() ? "end_turn" : "stop_sequence";
      case engine::FinishReason::kLength: return "max_tokens";
      case engine::FinishReason::kContext: return "model_context_window_exceeded";
      default: return "end_turn";
    }
  }
  static ordered_json stop_sequence(const ChoiceEnd& e) {
    return !e.called && e.finish == engine::FinishReason::kStopString && !e.stop_string.empty() ? ordered_json(e.stop_string)
                                                                                               : ordered_json(nullptr);
  }

  // Opens a block of `kind` unless one is open (closing another kind first).
  std::string start_block(Block kind, ordered_json block) {
    if (open_ == kind && kind != Block::kToolUse) return {};
    std::string out = stop_block();
    open_ = kind;
    index_ = next_index_++;
    return out + event("content_block_start", {{"index", index_}, {"content_block", std::move(block)}});
  }

  std::string stop_block() {
    if (open_ == Block::kNone) return {};
    open_ = Block::kNone;
    return event("content_block_stop", {{"index", index_}});
  }

  MessagesReplyOptions o_;
  Block open_ = Block::kNone;
  bool started_ = false;  // message_start was sent
  int64_t index_ = 0, next_index_ = 0;
};

}  // namespace

std::unique_ptr<ReplyShaper> messages_shaper(MessagesReplyOptions options) {
  return std::make_unique<MessagesShaper>(std::move(options));
}

}  // namespace ember::server
