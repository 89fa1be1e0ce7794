#pragma once
// `ember serve`: the OpenAI-compatible HTTP API and the web chat page over one Scheduler.
//
// Routes: POST /v1/chat/completions, /v1/completions, /v1/responses, /v1/embeddings (OpenAI),
// POST /v1/messages, /v1/messages/count_tokens (Anthropic), GET /v1/models, GET /health, GET /metrics
// (Prometheus text), GET / (the chat page), and llama-server's /tokenize, /detokenize and
// /apply-template. Errors come in each API's own shape.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "chat/forced_tool_call.h"
#include "engine/chat_prompt.h"
#include "engine/scheduler.h"
#include "model/model.h"
#include "server/openai.h"
#include "server/openai_reply.h"
#include "server/reply_stream.h"
#include "server/reply_shaper.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace ember::server {

class EmbeddingsApi;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                       // 0: any free port (see Server::bind)
  std::string api_key;                   // non-empty: /v1/* needs "Authorization: Bearer KEY"
  size_t max_body_bytes = 4u << 20;      // larger bodies get 413
  int http_threads = 0;                  // 0: enough for every running and queued request
  double request_timeout_s = 600;        // a request running longer is cancelled
  double shutdown_grace_s = 10;          // on stop(), running requests get this long to finish
  // A stream with nothing to send (queued, or prefilling a long prompt) sends an SSE comment this
  // often, so that clients with read timeouts keep waiting.
  double keep_alive_s = 5;
  std::string model_name;                // "": the model folder's name
  std::string chat_template;             // not empty: the chat template instead of the model's (--chat-template)
  // Origins whose pages may call the API from a browser ("*": any); empty: none (same origin only).
  std::vector<std::string> cors_origins;
};

class Server {
 public:
  // An API's error body for a status, message, param and code.
  using ErrorShape = ordered_json (*)(int, const std::string&, const std::string&, const std::string&);

  Server(model::Model& model, const tokenizer::Tokenizer& tokenizer, engine::SchedulerOptions scheduler,
         ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket; returns the port. Throws ember::Error when it cannot.
  int bind();
  // Serves until stop(). Returns once every connection handler has finished.
  void run();
  // Stops accepting requests, lets running ones finish within the grace period, cancels the rest and
  // makes run() return. Safe from any thread, more than once.
  void stop();

  engine::Scheduler& scheduler() { return *scheduler_; }
  std::string metrics_text() const;

 private:
  void routes();
  // The Access-Control-* headers for a request from an allowed origin; false when it is not one.
  bool cors(const httplib::Request& req, httplib::Response& res) const;
  ordered_json model_object() const;  // the /v1/models entry of the served model
  void handle_chat(const httplib::Request& req, const ordered_json& body, httplib::Response& res);
  void handle_text(const httplib::Request& req, const ordered_json& body, httplib::Response& res);
  void handle_tokenize(const httplib::Request& req, const ordered_json& body, httplib::Response& res);
  void handle_detokenize(const httplib::Request& req, const ordered_json& body, httplib::Response& res);
  void handle_apply_template(const httplib::Request& req, const ordered_json& body, httplib::Response& res);
  void handle_embeddings(const httplib::Request& req, const ordered_json& body, httplib::Response& res);
  void handle_responses(const httplib::Request& req, const ordered_json& body, httplib::Response& res);
  void handle_messages(const httplib::Request& req, const ordered_json& body, httplib::Response& res);
  void handle_count_tokens(const httplib::Request& req, const ordered_json& body, httplib::Response& res);
  // engine::plan_chat of a request of any chat API, its errors in that API's names.
  using ChatPlan = engine::ChatPlan;
  ChatPlan plan_chat(const ChatRequest& cr);
  // Submits each prompt with the request's n choices and answers with all of them, streamed or
  // whole, in the shapes of `shaper` (errors in `error_shape`).
  void respond(const httplib::Request& req, httplib::Response& res, std::vector<engine::GenerationRequest> gens,
               const CompletionRequest& cr, ReplyOptions ro, std::unique_ptr<ReplyShaper> shaper,
               ErrorShape error_shape);
  OpenAiReplyOptions openai_options(const CompletionRequest& cr, bool chat);
  std::string next_id();  // unique within the server: its start time and a counter
  static int64_t unix_time();
  bool check_access(const httplib::Request& req, httplib::Response& res);

  const tokenizer::Tokenizer& tokenizer_;
  ServerOptions options_;
  sampling::SamplingParams defaults_;
  size_t vocab_size_;  // the model's: logits have this many entries
  engine::ChatPromptBuilder prompts_;
  engine::GrammarCache grammars_;  // of structured outputs and forced calls, shared by the requests
  std::unique_ptr<engine::Scheduler> scheduler_;
  std::unique_ptr<EmbeddingsApi> embeddings_;  // its embedder runs beside the scheduler (Model::forward takes turns)
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> in_run_{false};  // run() has begun and not returned (stop() waits for it)
  std::atomic<int64_t> open_streams_{0};
  std::atomic<uint64_t> next_id_{1};
  std::once_flag stop_once_;
  const int64_t created_;
  mutable std::mutex counters_mu_;
  std::map<int, int64_t> responses_by_status_;
};

}  // namespace ember::server
