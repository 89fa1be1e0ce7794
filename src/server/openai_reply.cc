#include "server/openai_reply.h"

#include <optional>

namespace ember::server {

namespace {

// The legacy /v1/completions logprobs object.
ordered_json legacy_logprobs(const ordered_json& entries, size_t& text_offset) {
  ordered_json out{{"tokens", ordered_json::array()},
                   {"token_logprobs", ordered_json::array()},
                   {"top_logprobs", ordered_json::array()},
                   {"text_offset", ordered_json::array()}};
  for (const auto& e : entries) {
    out["tokens"].push_back(e["token"]);
    out["token_logprobs"].push_back(e["logprob"]);
    ordered_json top = ordered_json::object();
    for (const auto& alt : e["top_logprobs"]) top[alt["token"].get<std::string>()] = alt["logprob"];
    out["top_logprobs"].push_back(top);
    out["text_offset"].push_back(text_offset);
    text_offset += e["bytes"].size();  // a token holding part of a character moves it by its own bytes
  }
  return out;
}

class OpenAiShaper : public ReplyShaper {
 public:
  OpenAiShaper(const tokenizer::Tokenizer& tok, OpenAiReplyOptions o) : tok_(tok), o_(std::move(o)) {}

  std::string open(const ReplyStream& reply) override {
    std::string out;
    if (o_.chat)  // the first chunk of each choice: the role alone
      for (size_t i = 0; i < reply.size(); ++i) out += chunk(ordered_json::array({choice(reply, i, Text{}, true)}));
    return out;
  }

  std::string delta(const ReplyStream& reply, const ChoiceDelta& d) override {
    std::string out;
    Text text{d.reasoning, {}, &d.tokens, nullptr};
    for (const chat::ToolCallDelta& part : d.parts) {  // reasoning and tokens go with the first part
      text.content = part.content;
      text.calls = &part.tool_calls;
      if (!text.content.empty() || !text.reasoning.empty() || !part.tool_calls.empty() ||
          (o_.logprobs && text.tokens && !text.tokens->empty()))  // only the first part has tokens
        out += chunk(ordered_json::array({choice(reply, d.index, text, true)}));
      text = Text{};
    }
    if (d.finished) {  // the finish_reason chunk has an empty delta
      Text last;
      last.end = &d;
      out += chunk(ordered_json::array({choice(reply, d.index, last, true)}));
    }
    return out;
  }

  std::string close(const ReplyStream& reply) override {
    std::string out;
    if (o_.include_usage) out += chunk(ordered_json::array(), usage_json(reply.totals()));
    return out + "data: [DONE]\n\n";
  }

  std::string stream_error(const ReplyFailure& f) override {
    return sse(error_body(f.status, f.message, {}, f.code)) + "data: [DONE]\n\n";  // OpenAI's clients raise on it
  }

  ordered_json whole(const ReplyStream& reply) override {
    ordered_json list = ordered_json::array();
    for (size_t i = 0; i < reply.size(); ++i) {
      const ChoiceReply& r = reply.reply(i);
      Text text{r.reasoning, r.reply.content, &r.tokens, nullptr, &r};
      list.push_back(choice(reply, i, text, false, &r.reply.tool_calls));
    }
    ordered_json body = envelope(false, std::move(list));
    body["usage"] = usage_json(reply.totals());
    return body;
  }

 private:
  // What one choice object carries.
  struct Text {
    std::string reasoning, content;
    const std::vector<engine::GeneratedToken>* tokens = nullptr;
    const std::vector<chat::ToolCallChunk>* calls = nullptr;  // a chunk's
    const ChoiceEnd* end = nullptr;  // set: the choice ends here
  };
  struct ChoiceState {
    bool sent_role = false;
    size_t text_offset = 0;
    std::optional<tokenizer::StreamDecoder> pieces;  // the logprobs' token texts, in context
    bool echoed = false;
  };

  ChoiceState& state(size_t i) {
    if (states_.size() <= i) states_.resize(i + 1);
    return states_[i];
  }

  ordered_json choice(const ReplyStream& reply, size_t index, const Text& t, bool streaming,
                      const std::vector<chat::ToolCall>* whole_calls = nullptr) {
    ChoiceState& st = state(index);
    ordered_json c{{"index", index}};
    ordered_json calls = nullptr;
    if (whole_calls && !whole_calls->empty()) calls = chat::tool_calls_json(*whole_calls);
    if (t.calls && !t.calls->empty()) {
      calls = ordered_json::array();
      for (const auto& call : *t.calls) {
        // One entry per call in a chunk, as OpenAI streams them: a call's arguments that arrive in
        // the same delta as its name join that entry.
        if (!calls.empty() && call.id.empty() && calls.back()["index"] == call.index)
          calls.back()["function"]["arguments"] = calls.back()["function"]["arguments"].get<std::string>() + call.arguments;
        else
          calls.push_back(chat::tool_call_chunk_json(call));
      }
    }
    if (o_.chat) {
      ordered_json msg = ordered_json::object();
      if (!streaming || !st.sent_role) msg["role"] = "assistant";
      st.sent_role = true;
      if (!streaming || !t.content.empty() || msg.contains("role")) msg["content"] = t.content;
      if (!streaming && t.content.empty() && !calls.is_null()) msg["content"] = nullptr;  // as OpenAI
      if (!t.reasoning.empty()) msg["reasoning_content"] = t.reasoning;
      if (!calls.is_null()) msg["tool_calls"] = calls;
      c[streaming ? "delta" : "message"] = msg;
    } else {
      const size_t prompt = index / static_cast<size_t>(reply.options().n);
      const bool echo = !st.echoed && prompt < o_.echoes.size();
      c["text"] = (echo ? o_.echoes[prompt] : std::string()) + t.content;
      st.echoed = true;
    }
    c["logprobs"] = nullptr;
    if (o_.logprobs && t.tokens && !t.tokens->empty()) {
      if (!st.pieces) st.pieces.emplace(tok_, /*skip_special_tokens=*/false);
      ordered_json entries = logprobs_json(tok_, *st.pieces, *t.tokens, o_.with_top);
      c["logprobs"] = o_.chat ? ordered_json{{"content", entries}} : legacy_logprobs(entries, st.text_offset);
    }
    c["finish_reason"] = !t.end ? ordered_json(nullptr)
                         : t.end->called ? ordered_json("tool_calls")
                                         : ordered_json(finish_reason(t.end->finish));
    return c;
  }

  // The object around `choices`: the whole response, or one streamed chunk.
  ordered_json envelope(bool streaming, ordered_json list) const {
    return ordered_json{{"id", o_.id},
                        {"object", o_.chat ? (streaming ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
                        {"created", o_.created},
                        {"model", o_.model},
                        {"choices", std::move(list)}};
  }

  // One event; with include_usage every chunk has "usage", null until the last.
  std::string chunk(ordered_json list, ordered_json usage = nullptr) const {
    ordered_json c = envelope(true, std::move(list));
    if (o_.include_usage) c["usage"] = std::move(usage);
    return sse(c);
  }

  const tokenizer::Tokenizer& tok_;
  OpenAiReplyOptions o_;
  std::vector<ChoiceState> states_;
};

}  // namespace

std::string sse(const ordered_json& data, const std::string& event) {
  std::string out = event.empty() ? std::string() : "event: " + event + "\n";
  return out + "data: " + data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

std::unique_ptr<ReplyShaper> openai_shaper(const tokenizer::Tokenizer& tokenizer, OpenAiReplyOptions options) {
  return std::make_unique<OpenAiShaper>(tokenizer, std::move(options));
}

}  // namespace ember::server
