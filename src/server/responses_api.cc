#include "server/responses_api.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include "server/request_fields.h"

namespace ember::server {

namespace {

[[noreturn]] void refuse(const std::string& field, const std::string& what, const char* code = "invalid_value") {
  throw ApiError(400, "'" + field + "' " + what, field, code);
}

[[noreturn]] void refuse_unsupported(const std::string& field, const std::string& what) {
  refuse(field, what, "unsupported_parameter");
}

// The request fields: read (translated), accepted without effect on the reply, or refused.
constexpr std::string_view kResponsesFields[] = {"model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
                                      "text", "reasoning", "max_output_tokens", "temperature", "top_p", "stream",
                                      "store", "top_logprobs", "include", "user", "truncation", "previous_response_id",
                                      "background", "max_tool_calls"};
// Bookkeeping of OpenAI's platform (prefixes are reused anyway).
constexpr std::string_view kResponsesIgnored[] = {"metadata", "client_metadata", "service_tier", "safety_identifier", "prompt_cache_key",
                                         "prompt_cache_retention", "stream_options"};
constexpr std::string_view kResponsesUnsupported[] = {"conversation", "prompt"};

// The text of a message's content: a string, or a list of text parts (input_text, output_text, ...).
std::string text_of(const ordered_json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) refuse(where, "must be a string or a list of content parts");
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const ordered_json& part = content[j];
    const std::string at = where + "[" + std::to_string(j) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) refuse(at, "must be a content part with a type");
    const std::string type = part["type"].get<std::string>();
    if (type != "input_text" && type != "output_text" && type != "text" && type != "refusal")
      refuse_unsupported(at + ".type", "'" + type + "' is not supported by this server (text parts only)");
    const char* key = type == "refusal" ? "refusal" : "text";
    if (!part.contains(key) || !part[key].is_string()) refuse(at + "." + key, "must be a string");
    text += part[key].get<std::string>();
  }
  return text;
}

// Responses input items as Chat Completions messages: function_call items join the assistant turn
// they follow, function_call_output items become tool messages.
ordered_json input_messages(const ordered_json& body) {
  ordered_json messages = ordered_json::array();
  if (present(body, "instructions")) {
    if (!body["instructions"].is_string()) refuse("instructions", "must be a string");
    messages.push_back({{"role", "system"}, {"content", body["instructions"]}});
  }
  if (!present(body, "input")) refuse("input", "is required");
  const ordered_json& input = body["input"];
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
    return messages;
  }
  if (!input.is_array()) refuse("input", "must be a string or a list of input items");
  std::vector<std::pair<std::string, std::string>> call_names;  // call_id -> function name
  auto string_field = [](const ordered_json& item, const std::string& where, const char* key) {
    if (!item.contains(key) || !item[key].is_string()) refuse(where + "." + key, "must be a string");
    return item[key].get<std::string>();
  };
  for (size_t i = 0; i < input.size(); ++i) {
    const ordered_json& item = input[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) refuse(where, "must be an input item object");
    std::string type = item.contains("type") && item["type"].is_string() ? item["type"].get<std::string>() : "";
    if (type.empty() && item.contains("role")) type = "message";
    if (type == "message") {
      const std::string role = string_field(item, where, "role");
      if (role != "user" && role != "assistant" && role != "system" && role != "developer")
        refuse(where + ".role", "must be user, assistant, system or developer");
      if (!item.contains("content")) refuse(where + ".content", "is required");
      messages.push_back({{"role", role == "developer" ? "system" : role},
                          {"content", text_of(item["content"], where + ".content")}});
    } else if (type == "function_call") {
      const std::string call_id = string_field(item, where, "call_id"), name = string_field(item, where, "name");
      const std::string arguments = string_field(item, where, "arguments");
      if (messages.empty() || messages.back()["role"] != "assistant")
        messages.push_back({{"role", "assistant"}, {"content", nullptr}});
      ordered_json& turn = messages.back();
      if (!turn.contains("tool_calls")) turn["tool_calls"] = ordered_json::array();
      turn["tool_calls"].push_back(
          {{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}});
      call_names.emplace_back(call_id, name);
    } else if (type == "function_call_output") {
      const std::string call_id = string_field(item, where, "call_id");
      if (!item.contains("output")) refuse(where + ".output", "is required");
      ordered_json msg{{"role", "tool"}, {"tool_call_id", call_id}, {"content", text_of(item["output"], where + ".output")}};
      for (const auto& [id, name] : call_names)
        if (id == call_id) msg["name"] = name;
      messages.push_back(std::move(msg));
    } else if (type == "reasoning") {
      // An earlier turn's reasoning, sent back by stateless clients: chat templates drop past
      // thoughts, so it does not change the prompt.
    } else if (type == "item_reference") {
      refuse_unsupported(where, "is an item_reference: this server stores no responses (send the items themselves)");
    } else {
      refuse_unsupported(where + ".type", "'" + type + "' is not an input item this server supports "
                                   "(message, function_call, function_call_output, reasoning)");
    }
  }
  return messages;
}

ordered_json function_tools(const ordered_json& tools) {
  if (!tools.is_array()) refuse("tools", "must be an array");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ordered_json& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("type") || !t["type"].is_string()) refuse(where, "must be a tool object with a type");
    const std::string type = t["type"].get<std::string>();
    if (type != "function")
      refuse_unsupported(where + ".type", "'" + type + "' tools are not supported by this server (function tools only)");
    if (!t.contains("name") || !t["name"].is_string()) refuse(where + ".name", "must be a string");
    ordered_json fn{{"name", t["name"]}};
    if (present(t, "description")) fn["description"] = t["description"];
    if (present(t, "parameters")) fn["parameters"] = t["parameters"];
    if (present(t, "strict")) fn["strict"] = t["strict"];
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out;
}

ordered_json tool_choice(const ordered_json& tc) {
  if (tc.is_string()) return tc;
  if (tc.is_object() && tc.value("type", "") == "function" && tc.contains("name") && tc["name"].is_string())
    return {{"type", "function"}, {"function", {{"name", tc["name"]}}}};
  if (tc.is_object() && tc.contains("type") && tc["type"].is_string() && tc["type"] != "function")
    refuse_unsupported("tool_choice", "of type '" + tc["type"].get<std::string>() + "' is not supported by this server");
  refuse("tool_choice", "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"name\": ...}");
}

ordered_json response_format(const ordered_json& text) {
  if (!text.is_object()) refuse("text", "must be an object");
  for (const auto& [key, value] : text.items()) {
    if (key == "format" || value.is_null()) continue;
    if (key == "verbosity") refuse_unsupported("text.verbosity", "is not supported by this server");
    refuse("text." + key, "is not a field of text (format)");
  }
  if (!present(text, "format")) return nullptr;
  const ordered_json& f = text["format"];
  const std::string type = f.is_object() ? f.value("type", "") : "";
  if (type == "text" || type == "json_object") return {{"type", type}};
  if (type != "json_schema") refuse("text.format", "must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or {\"type\": \"json_schema\", ...}");
  if (!f.contains("name") || !f["name"].is_string()) refuse("text.format.name", "must be a string");
  ordered_json js{{"name", f["name"]}};
  if (f.contains("schema")) js["schema"] = f["schema"];
  return {{"type", "json_schema"}, {"json_schema", js}};
}

// The request as the Chat Completions body it means, read by the one chat-request parser.
ordered_json chat_body(const ordered_json& body, bool& output_logprobs) {
  ordered_json chat{{"messages", input_messages(body)}};
  for (const char* same : {"model", "temperature", "top_p", "stream", "parallel_tool_calls", "user"})
    if (present(body, same)) chat[same] = body[same];
  if (present(body, "max_output_tokens")) chat["max_completion_tokens"] = body["max_output_tokens"];
  if (present(body, "tools")) chat["tools"] = function_tools(body["tools"]);
  if (present(body, "tool_choice")) chat["tool_choice"] = tool_choice(body["tool_choice"]);
  if (present(body, "text"))
    if (ordered_json rf = response_format(body["text"]); !rf.is_null()) chat["response_format"] = rf;
  if (present(body, "reasoning")) {
    const ordered_json& r = body["reasoning"];
    if (!r.is_object()) refuse("reasoning", "must be an object");
    for (const auto& [key, value] : r.items())
      if (key != "effort" && key != "summary" && key != "generate_summary" && !value.is_null())
        refuse("reasoning." + key, "is not a field of reasoning (effort, summary)");
    // Summaries are the model's own reasoning text here (reasoning items' content), not a digest.
    if (present(r, "effort")) chat["reasoning_effort"] = r["effort"];
  }
  if (present(body, "include")) {
    if (!body["include"].is_array()) refuse("include", "must be a list of strings");
    for (const auto& what : body["include"]) {
      if (what == "message.output_text.logprobs") output_logprobs = true;
      // Reasoning is sent as plain text (no encrypted form exists here): clients that ask for the
      // encrypted form get the items without it, and send them back as they are.
      else if (what != "reasoning.encrypted_content")
        refuse_unsupported("include", "value " + what.dump() + " is not supported by this server");
    }
  }
  if (present(body, "top_logprobs")) {
    if (!output_logprobs) refuse("top_logprobs", "needs include: [\"message.output_text.logprobs\"]");
    chat["top_logprobs"] = body["top_logprobs"];
  }
  if (output_logprobs) chat["logprobs"] = true;
  return chat;
}

// The Chat Completions names of the translated fields, as this API spells them.
std::string responses_field(const std::string& chat_field) {
  static const std::pair<std::string_view, std::string_view> kNames[] = {
      {"messages", "input"}, {"max_completion_tokens", "max_output_tokens"}, {"response_format", "text.format"},
      {"reasoning_effort", "reasoning.effort"}, {"logprobs", "include"}};
  for (const auto& [from, to] : kNames) {
    if (chat_field == from) return std::string(to);
    if (chat_field.starts_with(std::string(from) + "[") || chat_field.starts_with(std::string(from) + "."))
      return std::string(to) + chat_field.substr(from.size());
  }
  return chat_field;
}

}  // namespace

ResponsesRequest parse_responses_request(const ordered_json& body, const sampling::SamplingParams& defaults,
                                         size_t vocab_size) {
  for (const auto& [name, value] : body.items()) {
    if (listed(kResponsesFields, name) || listed(kResponsesIgnored, name) || value.is_null()) continue;
    if (listed(kResponsesUnsupported, name)) refuse_unsupported(name, "is not supported by this server");
    throw ApiError(400, "unrecognized request argument '" + name + "' (not a field of /v1/responses)", name,
                   "unknown_parameter");
  }
  if (present(body, "previous_response_id"))
    refuse_unsupported("previous_response_id", "needs a stored response, and this server stores none (store is false): "
                                        "send the whole conversation in input");
  if (present(body, "background") && body["background"] != false) refuse_unsupported("background", "is not supported by this server");
  if (present(body, "truncation") && body["truncation"] != "disabled")
    refuse_unsupported("truncation", "is supported only as \"disabled\" (a prompt past the context is refused)");
  if (present(body, "max_tool_calls")) refuse_unsupported("max_tool_calls", "is not supported by this server");
  if (present(body, "store") && !body["store"].is_boolean()) refuse("store", "must be a boolean");

  ResponsesRequest r;
  const ordered_json chat = chat_body(body, r.output_logprobs);
  try {
    r.chat = parse_chat_request(chat, defaults, vocab_size);
  } catch (const ApiError& e) {
    std::string message = e.what();
    const std::string param = responses_field(e.param);
    if (!e.param.empty() && param != e.param)
      if (const size_t at = message.find(e.param); at != std::string::npos) message.replace(at, e.param.size(), param);
    throw ApiError(e.status, message, param, e.code);
  }
  r.chat.prompt_field = "input";
  if (r.chat.max_tokens) r.chat.max_tokens_field = "max_output_tokens";

  ordered_json& echo = r.echoed;
  auto repeat = [&](const char* name, ordered_json dflt) { echo[name] = present(body, name) ? body[name] : dflt; };
  repeat("instructions", nullptr);
  repeat("max_output_tokens", nullptr);
  repeat("parallel_tool_calls", true);
  echo["previous_response_id"] = nullptr;
  echo["reasoning"] = {{"effort", present(body, "reasoning") ? body["reasoning"].value("effort", ordered_json()) : nullptr},
                       {"summary", nullptr}};
  echo["store"] = false;  // nothing is kept
  // The sampling it runs with: absent fields take the model's generation_config (greedy without one,
  // as transformers' generate), not OpenAI's 1.
  const sampling::SamplingParams& used = r.chat.params;
  repeat("temperature", used.do_sample ? static_cast<double>(used.temperature) : 0.0);
  echo["text"] = {{"format", present(body, "text") && present(body["text"], "format") ? body["text"]["format"]
                                                                                      : ordered_json{{"type", "text"}}}};
  repeat("tool_choice", present(body, "tools") && !body["tools"].empty() ? "auto" : "none");
  repeat("tools", ordered_json::array());
  repeat("top_p", used.do_sample ? static_cast<double>(used.top_p) : 1.0);
  echo["truncation"] = "disabled";
  repeat("user", nullptr);
  repeat("metadata", ordered_json::object());
  return r;
}

namespace {

// Builds the response object's output items as the reply streams, and the events of each change.
class ResponsesShaper : public ReplyShaper {
 public:
  ResponsesShaper(const tokenizer::Tokenizer& tok, ResponsesReplyOptions o) : tok_(tok), o_(std::move(o)) {}

  std::string open(const ReplyStream&) override {
    ordered_json r = response("in_progress");
    std::string out = event("response.created", {{"response", r}});
    return out + event("response.in_progress", {{"response", r}});
  }

  std::string delta(const ReplyStream&, const ChoiceDelta& d) override {
    std::string out;
    if (!d.reasoning.empty()) out += text_delta(Item::kReasoning, d.reasoning, {});
    bool first = true;
    for (const chat::ToolCallDelta& part : d.parts) {
      if (!part.content.empty() || (first && o_.output_logprobs && !d.tokens.empty()))
        out += text_delta(Item::kMessage, part.content, first ? logprobs(d.tokens) : ordered_json::array());
      first = false;
      for (const chat::ToolCallChunk& c : part.tool_calls) {
        if (!c.id.empty() || open_ != Item::kCall) {  // a new call
          out += close_item();
          out += open_item(Item::kCall, {{"id", "fc_" + c.id},
                                         {"type", "function_call"},
                                         {"status", "in_progress"},
                                         {"arguments", ""},
                                         {"call_id", c.id},
                                         {"name", c.name}});
        }
        if (!c.arguments.empty()) {
          output_.back()["arguments"] = output_.back()["arguments"].get<std::string>() + c.arguments;
          out += event("response.function_call_arguments.delta",
                       {{"item_id", item_id()}, {"output_index", output_.size() - 1}, {"delta", c.arguments}});
        }
      }
    }
    if (d.finished) {
      out += close_item(cut_off(d));
      end_ = d;
    }
    return out;
  }

  std::string close(const ReplyStream& reply) override {
    ordered_json r = final_response(reply);
    const std::string status = r["status"].get<std::string>();
    return event(status == "completed" ? "response.completed" : "response.incomplete", {{"response", r}});
  }

  std::string stream_error(const ReplyFailure& f) override {
    ordered_json r = response("failed");
    r["error"] = {{"code", f.code.empty() ? "server_error" : f.code}, {"message", f.message}};
    std::string out = event("error", {{"code", f.code.empty() ? ordered_json(nullptr) : ordered_json(f.code)},
                                      {"message", f.message},
                                      {"param", nullptr}});
    return out + event("response.failed", {{"response", r}});
  }

  ordered_json whole(const ReplyStream& reply) override {
    const ChoiceReply& r = reply.reply(0);
    if (!r.reasoning.empty()) text_delta(Item::kReasoning, r.reasoning, {});
    if (!r.reply.content.empty() || r.reply.tool_calls.empty())
      text_delta(Item::kMessage, r.reply.content, logprobs(r.tokens));
    for (const chat::ToolCall& c : r.reply.tool_calls) {
      close_item();
      open_item(Item::kCall, {{"id", "fc_" + c.id}, {"type", "function_call"}, {"status", "in_progress"},
                              {"arguments", c.arguments}, {"call_id", c.id}, {"name", c.name}});
    }
    close_item(cut_off(r));
    end_ = r;
    return final_response(reply);
  }

 private:
  enum class Item { kNone, kReasoning, kMessage, kCall };

  std::string event(const char* type, ordered_json fields) {
    ordered_json e{{"type", type}, {"sequence_number", sequence_++}};
    for (auto& [k, v] : fields.items()) e[k] = std::move(v);
    return sse(e, type);
  }

  ordered_json response(const char* status) const {
    ordered_json r{{"id", o_.id},       {"object", "response"}, {"created_at", o_.created_at}, {"status", status},
                   {"error", nullptr},  {"incomplete_details", nullptr}, {"model", o_.model},
                   {"output", output_}};
    for (const auto& [k, v] : o_.echoed.items()) r[k] = v;
    return r;
  }

  ordered_json final_response(const ReplyStream& reply) const {
    const bool cut = cut_off(end_);
    ordered_json r = response(cut ? "incomplete" : "completed");  // close_item marked the item it cut
    if (cut) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
    const engine::StreamUpdate t = reply.totals();
    r["usage"] = {{"input_tokens", t.prompt_tokens},
                  {"input_tokens_details", {{"cached_tokens", t.cached_tokens}}},
                  {"output_tokens", t.completion_tokens},
                  {"total_tokens", t.prompt_tokens + t.completion_tokens}};
    return r;
  }

  std::string item_id() const { return output_.back()["id"].get<std::string>(); }

  std::string open_item(Item kind, ordered_json item) {
    open_ = kind;
    output_.push_back(std::move(item));
    return event("response.output_item.added", {{"output_index", output_.size() - 1}, {"item", output_.back()}});
  }

  // Text into the open reasoning or message item (opened first when another kind is open).
  std::string text_delta(Item kind, const std::string& text, const ordered_json& lps) {
    std::string out;
    const char* part_type = kind == Item::kReasoning ? "reasoning_text" : "output_text";
    if (open_ != kind) {
      out += close_item();
      const std::string id = (kind == Item::kReasoning ? "rs_" : "msg_") + o_.id.substr(5) + "_" + std::to_string(output_.size());
      ordered_json item = kind == Item::kReasoning
                              ? ordered_json{{"id", id}, {"type", "reasoning"}, {"summary", ordered_json::array()},
                                             {"content", ordered_json::array()}}
                              : ordered_json{{"id", id}, {"type", "message"}, {"status", "in_progress"},
                                             {"role", "assistant"}, {"content", ordered_json::array()}};
      out += open_item(kind, std::move(item));
      ordered_json part{{"type", part_type}, {"text", ""}};
      if (kind == Item::kMessage) {
        part["annotations"] = ordered_json::array();
        if (o_.output_logprobs) part["logprobs"] = ordered_json::array();
      }
      out += event("response.content_part.added",
                   {{"item_id", id}, {"output_index", output_.size() - 1}, {"content_index", 0}, {"part", part}});
      output_.back()["content"].push_back(std::move(part));
    }
    ordered_json& part = output_.back()["content"][0];
    part["text"] = part["text"].get<std::string>() + text;
    ordered_json fields{{"item_id", item_id()}, {"output_index", output_.size() - 1}, {"content_index", 0}, {"delta", text}};
    if (kind == Item::kMessage) {
      fields["logprobs"] = lps.is_null() ? ordered_json::array() : lps;
      if (o_.output_logprobs)
        for (const auto& e : fields["logprobs"]) part["logprobs"].push_back(e);
    }
    out += event(kind == Item::kReasoning ? "response.reasoning_text.delta" : "response.output_text.delta", fields);
    return out;
  }

  // The done events of the open item.
  // Whether a reply ended at its length limit (the response is incomplete, and its last item).
  static bool cut_off(const ChoiceEnd& e) {
    return e.finish == engine::FinishReason::kLength || e.finish == engine::FinishReason::kContext;
  }

  // `cut`: the length limit ended the item, which is "incomplete" in its output_item.done as in the
  // final response.
  std::string close_item(bool cut = false) {
    if (open_ == Item::kNone) return {};
    std::string out;
    ordered_json& item = output_.back();
    const size_t index = output_.size() - 1;
    if (open_ == Item::kCall) {
      out += event("response.function_call_arguments.done",
                   {{"item_id", item["id"]}, {"output_index", index}, {"name", item["name"]}, {"arguments", item["arguments"]}});
    } else {
      const ordered_json& part = item["content"][0];
      const bool reasoning = open_ == Item::kReasoning;
      ordered_json done{{"item_id", item["id"]}, {"output_index", index}, {"content_index", 0}, {"text", part["text"]}};
      if (!reasoning) done["logprobs"] = part.value("logprobs", ordered_json::array());
      out += event(reasoning ? "response.reasoning_text.done" : "response.output_text.done", done);
      out += event("response.content_part.done",
                   {{"item_id", item["id"]}, {"output_index", index}, {"content_index", 0}, {"part", part}});
    }
    if (item.contains("status")) item["status"] = cut ? "incomplete" : "completed";
    out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
    open_ = Item::kNone;
    return out;
  }

  ordered_json logprobs(const std::vector<engine::GeneratedToken>& tokens) {
    if (!o_.output_logprobs || tokens.empty()) return ordered_json::array();
    if (!pieces_) pieces_.emplace(tok_, /*skip_special_tokens=*/false);
    ordered_json entries = logprobs_json(tok_, *pieces_, tokens, o_.with_top);
    for (auto& e : entries) e.erase("bytes");  // Responses' logprob entries: token, logprob, top_logprobs
    for (auto& e : entries)
      for (auto& alt : e["top_logprobs"]) alt.erase("bytes");
    return entries;
  }

  const tokenizer::Tokenizer& tok_;
  ResponsesReplyOptions o_;
  ordered_json output_ = ordered_json::array();
  Item open_ = Item::kNone;
  int64_t sequence_ = 0;
  ChoiceEnd end_;
  std::optional<tokenizer::StreamDecoder> pieces_;
};

}  // namespace

std::unique_ptr<ReplyShaper> responses_shaper(const tokenizer::Tokenizer& tokenizer, ResponsesReplyOptions options) {
  return std::make_unique<ResponsesShaper>(tokenizer, std::move(options));
}

}  // namespace ember::server
