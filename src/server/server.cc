#include "server/server.h"

#include <httplib.h>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "base/error.h"
#include "chat/forced_tool_call.h"
#include "chat/tool_call_parser.h"
#include "server/embeddings_api.h"
#include "server/messages_api.h"
#include "server/responses_api.h"
#include "server/web_assets.h"

namespace ember::server {

namespace {

using Clock = std::chrono::steady_clock;

void send_json(httplib::Response& res, int status, const ordered_json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

// Anthropic's routes answer errors in Anthropic's shape, the others in OpenAI's.
Server::ErrorShape error_shape_of(const std::string& path) {
  return path.starts_with("/v1/messages") ? anthropic_error_body : error_body;
}

void send_error(httplib::Response& res, const std::string& path, int status, const std::string& message,
                const std::string& param = {}, const std::string& code = {}) {
  send_json(res, status, error_shape_of(path)(status, message, param, code));
}

// Which methods each route answers; a known path with another method is a 405.
const std::map<std::string, std::string>& allowed_methods() {
  static const std::map<std::string, std::string> routes{
      {"/", "GET"},          {"/favicon.svg", "GET"},      {"/favicon.ico", "GET"},
      {"/health", "GET"},    {"/metrics", "GET"},
      {"/v1/models", "GET"}, {"/v1/chat/completions", "POST"}, {"/v1/completions", "POST"},
      {"/tokenize", "POST"}, {"/detokenize", "POST"}, {"/apply-template", "POST"}, {"/v1/embeddings", "POST"},
      {"/v1/responses", "POST"}, {"/v1/messages", "POST"}, {"/v1/messages/count_tokens", "POST"}};
  return routes;
}

// Why binding host:port failed, asked of a probe socket: httplib reports only that it failed.
std::string bind_failure(const std::string& host, int port) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    return std::string("cannot resolve the host: ") + ::gai_strerror(rc);
  int err = 0;
  for (const addrinfo* a = found; a != nullptr && err != EADDRINUSE; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    err = ::bind(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (err == EADDRINUSE) return "address already in use (another server listens there)";
  return err != 0 ? std::strerror(err) : "the address cannot be listened on";
}

// SO_REUSEADDR alone, not httplib's default SO_REUSEPORT: with that a second server on a port in use
// would bind it too and share its connections instead of failing.
void listen_socket_options(int fd) {
  const int yes = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

// httplib listens with a backlog of 5, which drops connections of a burst of clients before the
// accept loop takes them; listen() again on the bound socket widens the queue.
class HttpServer : public httplib::Server {
 public:
  void widen_backlog(int backlog) { ::listen(svr_sock_, backlog); }
};

}  // namespace

Server::Server(model::Model& model, const tokenizer::Tokenizer& tokenizer, engine::SchedulerOptions scheduler,
               ServerOptions options)
    : tokenizer_(tokenizer),
      options_(std::move(options)),
      defaults_(engine::default_params(model.dir(), model.config())),
      vocab_size_(static_cast<size_t>(model.config().vocab_size)),
      prompts_(tokenizer, model.dir(), options_.chat_template),
      grammars_(tokenizer),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count()) {
  if (options_.model_name.empty())
    options_.model_name = std::filesystem::path(model.dir()).lexically_normal().filename().string();
  if (options_.model_name.empty())
    options_.model_name = std::filesystem::path(model.dir()).lexically_normal().parent_path().filename().string();
  scheduler_ = std::make_unique<engine::Scheduler>(model, tokenizer, scheduler);
  embeddings_ = std::make_unique<EmbeddingsApi>(model, tokenizer);
  http_ = std::make_unique<HttpServer>();
  const size_t threads = options_.http_threads > 0
                             ? static_cast<size_t>(options_.http_threads)
                             : static_cast<size_t>(scheduler.max_parallel + scheduler.max_queue + 8);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_socket_options(listen_socket_options);
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(30, 0);
  http_->set_write_timeout(30, 0);
  routes();
}

Server::~Server() {
  stop();
}

int Server::bind() {
  const std::string where = options_.host + ":" + std::to_string(options_.port);
  // httplib would hand the port to getaddrinfo as a service name, which takes 99999 modulo 65536.
  if (options_.port < 0 || options_.port > 65535)
    throw Error("cannot listen on " + where + ": the port must be between 0 (any free port) and 65535");
  int port = options_.port;
  if (port == 0) port = http_->bind_to_any_port(options_.host);
  else if (!http_->bind_to_port(options_.host, port)) port = -1;
  if (port <= 0) throw Error("cannot listen on " + where + ": " + bind_failure(options_.host, options_.port));
  static_cast<HttpServer&>(*http_).widen_backlog(1024);
  options_.port = port;
  return port;
}

void Server::run() {
  in_run_.store(true);
  if (!draining_.load()) http_->listen_after_bind();  // a stop() that began first is not lost
  in_run_.store(false);
}

void Server::stop() {
  std::call_once(stop_once_, [&] {
    draining_.store(true);
    const auto grace_end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(options_.shutdown_grace_s));
    while (Clock::now() < grace_end) {
      const auto s = scheduler_->stats();
      if (s.running == 0 && s.queued == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    scheduler_->shutdown(/*cancel=*/true);
    // Let the streams write their last chunks before the connections close.
    const auto flush_end = Clock::now() + std::chrono::seconds(2);
    while (open_streams_.load() > 0 && Clock::now() < flush_end)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    // cpp-httplib's stop() does nothing before its listener has started, so a stop right after
    // bind() (a SIGTERM as the server came up) left it listening for good: stop the listener once
    // it runs, until run() returns. (run() does not start one after draining_ is set; the two flags'
    // store-then-load order means one side always sees the other.)
    bool stopped = false;
    while (in_run_.load()) {
      if (!stopped && http_->is_running()) {
        http_->stop();
        stopped = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!stopped) http_->stop();
  });
}

bool Server::cors(const httplib::Request& req, httplib::Response& res) const {
  const std::string origin = req.get_header_value("Origin");
  if (origin.empty()) return false;
  const auto& allowed = options_.cors_origins;
  const bool any = std::find(allowed.begin(), allowed.end(), "*") != allowed.end();
  if (!any && std::find(allowed.begin(), allowed.end(), origin) == allowed.end()) return false;
  res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
  if (!any) res.set_header("Vary", "Origin");
  return true;
}

bool Server::check_access(const httplib::Request& req, httplib::Response& res) {
  const auto& routes = allowed_methods();
  const bool allowed_origin = cors(req, res);
  if (req.method == "OPTIONS") {  // a browser's preflight: which methods and headers a page may use
    const auto it = routes.find(req.path);
    const std::string methods = (it != routes.end() ? it->second : std::string("GET, POST")) + ", OPTIONS";
    res.set_header("Allow", methods);
    if (allowed_origin) {
      res.set_header("Access-Control-Allow-Methods", methods);
      // The headers the page asks for: the SDKs add their own (x-stainless-*, anthropic-version,
      // x-api-key), and a browser drops the request if one is not allowed.
      const std::string asked = req.get_header_value("Access-Control-Request-Headers");
      res.set_header("Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type, x-api-key" : asked);
      if (!asked.empty()) res.set_header("Vary", "Access-Control-Request-Headers");
      res.set_header("Access-Control-Max-Age", "600");
    }
    res.status = 204;
    return false;
  }
  if (auto it = routes.find(req.path); it != routes.end() && it->second != req.method) {
    res.set_header("Allow", it->second);
    send_error(res, req.path, 405, "method " + req.method + " is not allowed on " + req.path + " (use " + it->second + ")");
    return false;
  }
  // OpenAI's clients send the key as a bearer token, Anthropic's as x-api-key.
  if (!options_.api_key.empty() && req.path.rfind("/v1/", 0) == 0 &&
      req.get_header_value("Authorization") != "Bearer " + options_.api_key &&
      req.get_header_value("x-api-key") != options_.api_key) {
    send_error(res, req.path, 401, "missing or wrong API key: send \"Authorization: Bearer <key>\" (or x-api-key: <key>)",
               {}, "invalid_api_key");
    return false;
  }
  if (draining_.load() && req.method == "POST") {
    send_error(res, req.path, 503, "the server is shutting down");
    return false;
  }
  return true;
}

void Server::routes() {
  using httplib::Request, httplib::Response;
  http_->set_pre_routing_handler([this](const Request& req, Response& res) {
    return check_access(req, res) ? httplib::Server::HandlerResponse::Unhandled
                                  : httplib::Server::HandlerResponse::Handled;
  });
  // Errors httplib raises itself (unknown route, body too large, bad request line) in OpenAI's shape.
  http_->set_error_handler(httplib::Server::HandlerWithResponse([](const Request& req, Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message = "HTTP error " + std::to_string(res.status);
    if (res.status == 400) message = "malformed HTTP request";
    if (res.status == 404) message = "no route " + req.method + " " + req.path;
    if (res.status == 413) message = "the request body is too large";
    send_error(res, req.path, res.status, message);
    return httplib::Server::HandlerResponse::Handled;
  }));
  http_->set_exception_handler([](const Request& req, Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      send_error(res, req.path, 500, std::string("internal error: ") + e.what());
    } catch (...) {
      send_error(res, req.path, 500, "internal error");
    }
  });
  http_->set_logger([this](const Request&, const Response& res) {
    std::lock_guard lock(counters_mu_);
    ++responses_by_status_[res.status];
  });

  http_->Get("/", [](const Request&, Response& res) {
    res.set_content(std::string(web::index_html()), "text/html; charset=utf-8");
  });
  // Browsers ask for /favicon.ico whatever the page links; both get the SVG (which they all draw).
  for (const char* path : {"/favicon.svg", "/favicon.ico"})
    http_->Get(path, [](const Request&, Response& res) {
      res.set_header("Cache-Control", "max-age=86400");
      res.set_content(std::string(web::favicon_svg()), "image/svg+xml");
    });
  http_->Get("/health", [this](const Request&, Response& res) {
    if (draining_.load()) send_json(res, 503, {{"status", "shutting down"}});
    else send_json(res, 200, {{"status", "ok"}});
  });
  http_->Get("/metrics", [this](const Request&, Response& res) {
    res.set_content(metrics_text(), "text/plain; version=0.0.4");
  });
  http_->Get("/v1/models", [this](const Request&, Response& res) {
    send_json(res, 200, {{"object", "list"}, {"data", ordered_json::array({model_object()})}});
  });
  http_->Get("/v1/models/(.+)", [this](const Request& req, Response& res) {  // the client's models.retrieve
    const std::string id = req.matches[1];
    if (id == options_.model_name) return send_json(res, 200, model_object());
    send_error(res, req.path, 404, "the model '" + id + "' does not exist (this server serves '" + options_.model_name + "')",
               "model", "model_not_found");
  });
  // A POST's body is read here, whatever its Content-Type (`curl -d` labels JSON as a form, which
  // httplib would parse as one and refuse past 8 KiB), up to --max-body, and parsed as JSON once.
  auto guarded = [this](void (Server::*fn)(const Request&, const ordered_json&, Response&)) {
    return [this, fn](const Request& req, Response& res, const httplib::ContentReader& read) {
      try {
        if (req.is_multipart_form_data())
          throw ApiError(415, "the request body must be JSON, not multipart/form-data", {}, "invalid_request_body");
        std::string text;
        if (!read([&](const char* data, size_t n) {
              text.append(data, n);
              return true;
            }))
          throw ApiError(res.status == 413 ? 413 : 400,
                         res.status == 413 ? "the request body is too large (over " +
                                                 std::to_string(options_.max_body_bytes) + " bytes: --max-body)"
                                           : std::string("the request body could not be read"));
        (this->*fn)(req, parse_body(text), res);
      } catch (const ApiError& e) {
        send_error(res, req.path, e.status, e.what(), e.param, e.code);
      } catch (const engine::RequestError& e) {
        send_error(res, req.path, 400, e.what(), e.param, e.code);
      } catch (const engine::QueueFull& e) {
        res.set_header("Retry-After", "1");
        send_error(res, req.path, 429, std::string("the server is busy: ") + e.what(), {}, "rate_limit_exceeded");
      } catch (const Error& e) {
        send_error(res, req.path, 400, e.what());
      }
    };
  };
  http_->Post("/v1/chat/completions", guarded(&Server::handle_chat));
  http_->Post("/v1/completions", guarded(&Server::handle_text));
  http_->Post("/tokenize", guarded(&Server::handle_tokenize));
  http_->Post("/detokenize", guarded(&Server::handle_detokenize));
  http_->Post("/apply-template", guarded(&Server::handle_apply_template));
  http_->Post("/v1/embeddings", guarded(&Server::handle_embeddings));
  http_->Post("/v1/responses", guarded(&Server::handle_responses));
  http_->Post("/v1/messages", guarded(&Server::handle_messages));
  http_->Post("/v1/messages/count_tokens", guarded(&Server::handle_count_tokens));
}

void Server::handle_embeddings(const httplib::Request&, const ordered_json& body, httplib::Response& res) {
  send_json(res, 200, embeddings_->respond(body, options_.model_name));
}

Server::ChatPlan Server::plan_chat(const ChatRequest& cr) {
  try {
    return engine::plan_chat(prompts_, cr.messages, cr.options, cr.params, cr.tool_choice, cr.parallel_tool_calls,
                             cr.response_format, grammars_);
  } catch (const engine::RequestError& e) {
    throw ApiError(400, e.what(), e.param == "messages" ? cr.prompt_field : e.param, e.code);
  }
}

void Server::handle_chat(const httplib::Request& req, const ordered_json& body, httplib::Response& res) {
  const ChatRequest cr = parse_chat_request(body, defaults_, vocab_size_);
  ChatPlan plan = plan_chat(cr);
  ReplyOptions ro{cr.n, plan.tool_format, std::move(plan.forced), {}};
  std::vector<engine::GenerationRequest> gens;
  gens.push_back(std::move(plan.gen));
  respond(req, res, std::move(gens), cr, std::move(ro), openai_shaper(tokenizer_, openai_options(cr, true)), error_body);
}

void Server::handle_responses(const httplib::Request& req, const ordered_json& body, httplib::Response& res) {
  const ResponsesRequest rr = parse_responses_request(body, defaults_, vocab_size_);
  ChatPlan plan = plan_chat(rr.chat);
  ResponsesReplyOptions o{"resp_" + next_id(), options_.model_name, unix_time(), rr.echoed, rr.output_logprobs,
                          rr.chat.top_logprobs > 0};
  ReplyOptions ro{1, plan.tool_format, std::move(plan.forced), {}};
  std::vector<engine::GenerationRequest> gens;
  gens.push_back(std::move(plan.gen));
  respond(req, res, std::move(gens), rr.chat, std::move(ro), responses_shaper(tokenizer_, std::move(o)), error_body);
}

void Server::handle_messages(const httplib::Request& req, const ordered_json& body, httplib::Response& res) {
  const ChatRequest cr = parse_messages_request(body, defaults_, vocab_size_);
  ChatPlan plan = plan_chat(cr);
  MessagesReplyOptions o{"msg_" + next_id(), options_.model_name, static_cast<int64_t>(plan.gen.prompt.size())};
  ReplyOptions ro{1, plan.tool_format, std::move(plan.forced), {}};
  std::vector<engine::GenerationRequest> gens;
  gens.push_back(std::move(plan.gen));
  respond(req, res, std::move(gens), cr, std::move(ro), messages_shaper(std::move(o)), anthropic_error_body);
}

void Server::handle_count_tokens(const httplib::Request&, const ordered_json& body, httplib::Response& res) {
  const ChatRequest cr = parse_messages_request(body, defaults_, vocab_size_, /*counting=*/true);
  const ChatPlan plan = plan_chat(cr);
  send_json(res, 200, {{"input_tokens", plan.gen.prompt.size()}});
}

OpenAiReplyOptions Server::openai_options(const CompletionRequest& cr, bool chat) {
  OpenAiReplyOptions o;
  o.chat = chat;
  o.include_usage = cr.include_usage;
  o.logprobs = cr.params.logprobs;
  o.with_top = cr.top_logprobs > 0;
  o.id = (chat ? "chatcmpl-" : "cmpl-") + next_id();
  o.model = options_.model_name;
  o.created = unix_time();
  return o;
}

std::string Server::next_id() { return std::to_string(created_) + "-" + std::to_string(next_id_++); }

int64_t Server::unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// llama-server's utility routes, with its request and response shapes.
void Server::handle_tokenize(const httplib::Request&, const ordered_json& body, httplib::Response& res) {
  const auto content = body.find("content");
  if (content == body.end() || !content->is_string()) throw ApiError(400, "'content' must be a string", "content");
  auto flag = [&](const char* name) {
    const auto it = body.find(name);
    if (it == body.end() || it->is_null()) return false;
    if (!it->is_boolean()) throw ApiError(400, std::string("'") + name + "' must be a boolean", name);
    return it->get<bool>();
  };
  const bool add_special = flag("add_special"), with_pieces = flag("with_pieces");
  ordered_json tokens = ordered_json::array();
  const std::vector<int32_t> ids = tokenizer_.encode(content->get<std::string>(), add_special);
  // Each piece is what its token adds to the text, so the pieces concatenate to the decoded text.
  tokenizer::StreamDecoder pieces(tokenizer_, /*skip_special_tokens=*/false);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!with_pieces) {
      tokens.push_back(ids[i]);
      continue;
    }
    std::string piece = pieces.push(ids[i]);
    if (i + 1 == ids.size()) piece += pieces.flush();
    tokens.push_back({{"id", ids[i]}, {"piece", piece}});
  }
  send_json(res, 200, {{"tokens", tokens}});
}

void Server::handle_detokenize(const httplib::Request&, const ordered_json& body, httplib::Response& res) {
  const auto tokens = body.find("tokens");
  if (tokens == body.end() || !tokens->is_array()) throw ApiError(400, "'tokens' must be an array of token ids", "tokens");
  std::vector<int32_t> ids;
  for (const auto& t : *tokens) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tokenizer_.vocab_size())
      throw ApiError(400, "'tokens' holds " + t.dump() + ", not a token id of this vocabulary (0 to " +
                              std::to_string(tokenizer_.vocab_size() - 1) + ")", "tokens");
    ids.push_back(t.get<int32_t>());
  }
  send_json(res, 200, {{"content", tokenizer_.decode(ids, false)}});
}

void Server::handle_apply_template(const httplib::Request&, const ordered_json& body, httplib::Response& res) {
  const ChatRequest cr = parse_chat_request(body, defaults_, vocab_size_);
  try {
    send_json(res, 200, {{"prompt", prompts_.render(cr.messages, cr.options, /*add_generation_prompt=*/true)}});
  } catch (const Error& e) {
    throw ApiError(400, std::string("the chat template failed: ") + e.what(), "messages");
  }
}

void Server::handle_text(const httplib::Request& req, const ordered_json& body, httplib::Response& res) {
  const TextRequest tr = parse_text_request(body, defaults_, vocab_size_);
  std::vector<engine::GenerationRequest> gens;
  OpenAiReplyOptions o = openai_options(tr, false);
  std::optional<engine::GrammarConstraint> grammar;  // of response_format or grammar: the whole text follows it
  const char* field = engine::format_field(tr.response_format);
  try {
    if (const auto gbnf = engine::format_gbnf(tr.response_format)) grammar = grammars_.get(*gbnf, std::string("'") + field + "'");
  } catch (const Error& e) {
    throw ApiError(400, e.what(), field, "invalid_value");
  }
  for (const TextPrompt& p : tr.prompts) {
    engine::GenerationRequest g;
    g.prompt = p.ids.empty() ? tokenizer_.encode(p.text, /*add_special_tokens=*/true) : p.ids;
    g.params = tr.params;
    if (grammar) g.grammar = *grammar;
    if (tr.echo) o.echoes.push_back(p.ids.empty() ? p.text : tokenizer_.decode(p.ids, /*skip_special_tokens=*/false));
    gens.push_back(std::move(g));
  }
  respond(req, res, std::move(gens), tr, ReplyOptions{tr.n, {}, {}, {}}, openai_shaper(tokenizer_, std::move(o)),
          error_body);
}

void Server::respond(const httplib::Request& req, httplib::Response& res, std::vector<engine::GenerationRequest> gens,
                     const CompletionRequest& cr, ReplyOptions ro, std::unique_ptr<ReplyShaper> shaper_owned,
                     ErrorShape error_shape) {
  // As vLLM: a client's max_tokens past the context is refused, not run until the context ends it.
  for (auto& g : gens) g.refuse_past_context = cr.max_tokens.has_value();
  if (cr.speculative) {
    if (*cr.speculative && scheduler_->speculation().mode == engine::SpecMode::kOff)
      throw ApiError(400, "'speculative' is true, but this server does not speculate (start it with --spec ngram; "
                          "hybrid models cannot)", "speculative", "unsupported_parameter");
    for (auto& g : gens) g.speculate = *cr.speculative;
  }
  ro.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(options_.request_timeout_s));
  auto reply = std::make_shared<ReplyStream>(std::move(ro));
  std::shared_ptr<ReplyShaper> shaper = std::move(shaper_owned);
  size_t prompt = 0;
  try {
    for (; prompt < gens.size(); ++prompt)
      for (auto& rs : scheduler_->submit(std::move(gens[prompt]), cr.n)) reply->add(std::move(rs));
  } catch (const engine::RequestError& e) {  // the engine's checks, in this API's names
    reply->cancel_all();  // the prompts already queued go too
    std::string param = e.param;
    if (param == "prompt") param = cr.prompt_field;
    if (param == "max_tokens") param = cr.max_tokens_field;
    throw ApiError(400, (gens.size() > 1 ? "prompt " + std::to_string(prompt) + ": " : std::string()) + e.what(), param,
                   e.code);
  } catch (...) {
    reply->cancel_all();  // the prompts already queued go too
    throw;
  }
  reply->watch(req);

  if (!cr.stream) {
    while (!reply->all_ended()) reply->next();
    for (size_t i = 0; i < reply->size(); ++i)
      if (const auto f = reply->failure(reply->reply(i), draining_.load())) {
        reply->cancel_all();
        return send_json(res, f->status, error_shape(f->status, f->message, {}, f->code));
      }
    return send_json(res, 200, shaper->whole(*reply));
  }

  ++open_streams_;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // nginx: pass events through at once
  struct Progress {
    bool opened = false, ended = false;
    Clock::time_point last_write = Clock::now();
  };
  auto progress = std::make_shared<Progress>();
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, reply, shaper, progress](size_t, httplib::DataSink& sink) {
        std::string out;
        if (!progress->opened) out += shaper->open(*reply);
        progress->opened = true;
        if (const auto d = reply->next()) {
          if (const auto f = reply->failure(*d, draining_.load())) {
            out += shaper->stream_error(*f);
            reply->cancel_all();
            progress->ended = true;
          } else {
            out += shaper->delta(*reply, *d);
            if (reply->all_ended()) {
              out += shaper->close(*reply);
              progress->ended = true;
            }
          }
        }
        const auto now = Clock::now();
        if (out.empty() && now - progress->last_write > std::chrono::duration<double>(options_.keep_alive_s))
          out = ": keep-alive\n\n";  // a comment: clients skip it, their read timeouts restart
        if (!out.empty()) {
          if (!sink.write(out.data(), out.size())) return false;
          progress->last_write = now;
        }
        if (progress->ended) sink.done();
        return true;
      },
      [this, reply, progress](bool) {
        if (!progress->ended) reply->cancel_all();  // the client went away: free its sequences
        --open_streams_;
      });
}

ordered_json Server::model_object() const {
  return ordered_json{{"id", options_.model_name},
                      {"object", "model"},
                      {"created", created_},
                      {"owned_by", "ember"},
                      {"max_model_len", scheduler_->context()}};
}

std::string Server::metrics_text() const {
  const engine::SchedulerStats s = scheduler_->stats();
  std::ostringstream o;
  auto metric = [&](const char* name, const char* type, const char* help, double value) {
    o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n' << name << ' ' << value << '\n';
  };
  metric("ember_requests_submitted_total", "counter", "Generation requests accepted into the queue.",
         static_cast<double>(s.requests_submitted));
  metric("ember_requests_finished_total", "counter", "Requests that finished normally.",
         static_cast<double>(s.requests_finished));
  metric("ember_requests_cancelled_total", "counter", "Requests cancelled (client gone, timeout, shutdown).",
         static_cast<double>(s.requests_cancelled));
  metric("ember_requests_failed_total", "counter", "Requests that failed inside the engine.",
         static_cast<double>(s.requests_failed));
  metric("ember_requests_rejected_total", "counter", "Requests refused with 429 because the queue was full.",
         static_cast<double>(s.requests_rejected));
  metric("ember_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.", static_cast<double>(s.prompt_tokens));
  metric("ember_prompt_tokens_reused_total", "counter", "Prompt tokens whose KV cache was reused (prefix hits).",
         static_cast<double>(s.reused_tokens));
  metric("ember_prefill_tokens_total", "counter", "Prompt tokens computed.", static_cast<double>(s.prefilled_tokens));
  metric("ember_completion_tokens_total", "counter", "Generated tokens.", static_cast<double>(s.completion_tokens));
  metric("ember_steps_total", "counter", "Batched forward passes.", static_cast<double>(s.steps));
  metric("ember_spec_drafted_tokens_total", "counter", "Speculative guesses fed to the model (serve --spec).",
         static_cast<double>(s.spec_drafted));
  metric("ember_spec_accepted_tokens_total", "counter", "Speculative guesses the model agreed with (tokens gained).",
         static_cast<double>(s.spec_accepted));
  metric("ember_spec_acceptance_rate", "gauge", "Accepted over drafted speculative guesses (0 before any).",
         s.spec_drafted > 0 ? static_cast<double>(s.spec_accepted) / static_cast<double>(s.spec_drafted) : 0.0);
  metric("ember_queue_length", "gauge", "Requests waiting for a free slot.", static_cast<double>(s.queued));
  metric("ember_running_sequences", "gauge", "Sequences being prefilled or decoded.", static_cast<double>(s.running));
  metric("ember_cached_sequences", "gauge", "Finished sequences kept for prefix reuse.",
         static_cast<double>(s.cached_sequences));
  metric("ember_tokens_per_second", "gauge", "Generated tokens per second over the last 5 seconds.",
         s.tokens_per_second);
  metric("ember_kv_cache_blocks_total", "gauge", "KV cache blocks in the pool.", static_cast<double>(s.kv_blocks_total));
  metric("ember_kv_cache_blocks_used", "gauge", "KV cache blocks in use (running and cached sequences).",
         static_cast<double>(s.kv_blocks_total - s.kv_blocks_free));
  metric("ember_kv_cache_blocks_running", "gauge", "KV cache blocks held by running sequences.",
         static_cast<double>(s.kv_blocks_held_by_running));
  o << "# HELP ember_http_responses_total HTTP responses by status code.\n"
       "# TYPE ember_http_responses_total counter\n";
  std::lock_guard lock(counters_mu_);
  for (const auto& [status, n] : responses_by_status_)
    o << "ember_http_responses_total{code=\"" << status << "\"} " << n << '\n';
  return o.str();
}

}  // namespace ember::server
