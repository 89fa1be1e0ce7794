#include "server/server.h"

#include <httplib.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
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
#include "chat/partial_tool_call.h"
#include "chat/tool_call_parser.h"
#include "sampling/json_schema.h"
#include "server/embeddings_api.h"
#include "server/web_assets.h"

namespace ember::server {

namespace {

using Clock = std::chrono::steady_clock;

void send_json(httplib::Response& res, int status, const ordered_json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& param = {},
                const std::string& code = {}) {
  send_json(res, status, error_body(status, message, param, code));
}

std::string sse(const ordered_json& j) {
  return "data: " + j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

// Which methods each route answers; a known path with another method is a 405.
const std::map<std::string, std::string>& allowed_methods() {
  static const std::map<std::string, std::string> routes{
      {"/", "GET"},          {"/favicon.svg", "GET"},      {"/favicon.ico", "GET"},
      {"/health", "GET"},    {"/metrics", "GET"},
      {"/v1/models", "GET"}, {"/v1/chat/completions", "POST"}, {"/v1/completions", "POST"},
      {"/tokenize", "POST"}, {"/detokenize", "POST"}, {"/apply-template", "POST"}, {"/v1/embeddings", "POST"}};
  return routes;
}

// The shapes a forced call takes (tool_choice "required" or a function); none for other requests.
std::vector<chat::ForcedToolCall> forced_shapes(const ChatRequest& cr, std::optional<chat::ToolCallFormat> format) {
  using Mode = ToolChoice::Mode;
  if (cr.tool_choice.mode != Mode::kRequired && cr.tool_choice.mode != Mode::kFunction) return {};
  return chat::forced_tool_calls(*format, cr.options.tools, cr.tool_choice.function, cr.parallel_tool_calls);
}

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
    text_offset += e["token"].get<std::string>().size();
  }
  return out;
}

}  // namespace

// Tells whether the client of a request has closed its connection. httplib 0.11 does not hand a
// handler its socket, so the socket is found among this process's descriptors as the one whose
// local and peer addresses are the request's; it stays open (and so unambiguous) while the handler
// runs.
class PeerWatch {
 public:
  explicit PeerWatch(const httplib::Request& req) {
    DIR* dir = ::opendir("/proc/self/fd");
    if (dir == nullptr) return;
    while (const dirent* e = ::readdir(dir)) {
      const int fd = std::atoi(e->d_name);
      if (e->d_name[0] != '.' && fd != ::dirfd(dir) && matches(fd, req)) {
        fd_ = fd;
        break;
      }
    }
    ::closedir(dir);
  }

  // True once the peer has closed (or reset) the connection; polls at most every 100 ms.
  bool gone() {
    if (fd_ < 0 || gone_) return gone_;
    const auto now = Clock::now();
    if (now < next_check_) return false;
    next_check_ = now + std::chrono::milliseconds(100);
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) return gone_ = true;
    char c;  // readable: either a pipelined request (data) or the end of the stream (0 bytes)
    return gone_ = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }

 private:
  static bool matches(int fd, const httplib::Request& req) {
    sockaddr_storage local{}, peer{};
    socklen_t ll = sizeof local, pl = sizeof peer;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0 ||
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0)
      return false;
    return port_of(local) == req.local_port && port_of(peer) == req.remote_port && host_of(peer) == req.remote_addr;
  }
  static int port_of(const sockaddr_storage& a) {
    if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
    if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
    return -1;
  }
  static std::string host_of(const sockaddr_storage& a) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, buf, sizeof buf);
    if (a.ss_family == AF_INET6)
      ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, buf, sizeof buf);
    return buf;
  }

  int fd_ = -1;
  bool gone_ = false;
  Clock::time_point next_check_;
};

namespace {

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

}  // namespace

// httplib listens with a backlog of 5, which drops connections of a burst of clients before the
// accept loop takes them; listen() again on the bound socket widens the queue.
class HttpServer : public httplib::Server {
 public:
  void widen_backlog(int backlog) { ::listen(svr_sock_, backlog); }
};

// One response in flight: the scheduler's streams (one per choice) and what the client was sent.
struct Server::Stream {
  struct Choice {
    std::shared_ptr<engine::RequestStream> rs;
    engine::StreamUpdate all;  // everything so far (the whole response, when not streaming)
    bool sent_role = false, ended = false;
    size_t text_offset = 0;
    std::optional<tokenizer::StreamDecoder> pieces;  // the logprobs' token texts, in context
    std::optional<chat::ToolCallParser> tools;  // a request with tools: calls out of the streamed content
    std::string echo;  // /v1/completions with echo: the prompt, sent before the choice's first text
    std::string held;  // a forced call's text, sent at the end (as a call, or as content)
  };
  std::vector<Choice> choices;
  int n = 1;  // choices per prompt: prompt i's are i*n .. i*n + n-1
  bool chat = true, include_usage = false, logprobs = false, with_top = false;
  std::string id, model;
  int64_t created = 0;
  Clock::time_point deadline;
  bool ended = false;
  std::optional<PeerWatch> peer;
  size_t poll_from = 0;  // round robin over the choices
  std::vector<chat::ForcedToolCall> forced;  // the shapes of a forced call (tool_choice required or a function)
  std::optional<chat::ToolCallFormat> tool_format;

  // A forced call that max_tokens or the context cut off: the calls it began go out as tool_calls
  // (as OpenAI's do, with finish_reason "length") in place of the content holding them.
  std::vector<chat::ToolCall> take_cut_calls(engine::FinishReason finish, std::string& content) const {
    if (forced.empty() || (finish != engine::FinishReason::kLength && finish != engine::FinishReason::kContext))
      return {};
    std::vector<chat::ToolCall> cut = chat::partial_tool_calls(forced, content, chat::random_call_ids(*tool_format));
    if (!cut.empty()) content.clear();
    return cut;
  }

  // The choice object of a chunk or of the whole response carrying `u`'s text (and, with tools, the
  // calls it made: message.tool_calls, or a chunk's delta.tool_calls entries).
  ordered_json choice(const tokenizer::Tokenizer& tok, size_t index, const engine::StreamUpdate& u, bool streaming,
                      const ordered_json& tool_calls = nullptr) {
    Choice& ch = choices[index];
    ordered_json c{{"index", index}};
    if (chat) {
      ordered_json msg = ordered_json::object();
      if (!streaming || !ch.sent_role) msg["role"] = "assistant";
      ch.sent_role = true;
      if (!streaming || !u.content.empty() || msg.contains("role")) msg["content"] = u.content;
      if (!streaming && u.content.empty() && !tool_calls.is_null()) msg["content"] = nullptr;  // as OpenAI
      if (!u.reasoning.empty()) msg["reasoning_content"] = u.reasoning;
      if (!tool_calls.is_null()) msg["tool_calls"] = tool_calls;
      c[streaming ? "delta" : "message"] = msg;
    } else {
      c["text"] = ch.echo + u.content;
      ch.echo.clear();
    }
    c["logprobs"] = nullptr;
    if (logprobs && !u.tokens.empty()) {
      if (!ch.pieces) ch.pieces.emplace(tok, /*skip_special_tokens=*/false);
      ordered_json entries = logprobs_json(*ch.pieces, u.tokens, with_top);
      c["logprobs"] = chat ? ordered_json{{"content", entries}} : legacy_logprobs(entries, ch.text_offset);
    }
    const bool called = ch.tools && ch.tools->calls() > 0 &&
                        (u.finish == engine::FinishReason::kEos || u.finish == engine::FinishReason::kStopString);
    c["finish_reason"] = !u.finished ? ordered_json(nullptr) : called ? ordered_json("tool_calls")
                                                                      : ordered_json(finish_reason(u.finish));
    return c;
  }

  // The whole reply of choice i: content, and its calls when the request has tools.
  ordered_json whole_choice(const tokenizer::Tokenizer& tok, size_t i) {
    engine::StreamUpdate u = choices[i].all;
    if (!choices[i].tools) return choice(tok, i, u, false);
    chat::ParsedReply reply;
    chat::append_delta(reply, choices[i].tools->push(u.content));
    chat::append_delta(reply, choices[i].tools->flush());
    for (auto& call : take_cut_calls(u.finish, reply.content)) reply.tool_calls.push_back(std::move(call));
    u.content = reply.content;
    return choice(tok, i, u, false, reply.tool_calls.empty() ? ordered_json(nullptr) : chat::tool_calls_json(reply.tool_calls));
  }

  // The chunks of one streamed update of choice i: its text (through the tool-call parser when the
  // request has tools) and, when it ends, the finish_reason chunk.
  std::string update_chunks(const tokenizer::Tokenizer& tok, size_t i, const engine::StreamUpdate& u) {
    std::string out;
    engine::StreamUpdate text = u;
    text.finished = false;
    if (choices[i].tools) {
      chat::ToolCallDelta d = choices[i].tools->push(u.content);
      // A forced reply is all call: text the parser let go (a call it found malformed, a cut one)
      // waits for the end, where a cut call still goes out as one.
      if (!forced.empty()) choices[i].held += std::exchange(d.content, {});
      out += chunk_of(tok, i, text, d);
      if (u.finished) {  // what it held back
        chat::ToolCallDelta rest = choices[i].tools->flush();
        rest.content = std::exchange(choices[i].held, {}) + rest.content;
        size_t index = choices[i].tools->calls();
        for (auto& call : take_cut_calls(u.finish, rest.content))
          rest.tool_calls.push_back({index++, std::move(call.id), std::move(call.name), std::move(call.arguments)});
        out += chunk_of(tok, i, engine::StreamUpdate{}, rest);
      }
    } else if (!text.content.empty() || !text.reasoning.empty() || (logprobs && !text.tokens.empty())) {
      out += choice_chunk(tok, i, text);
    }
    if (u.finished) {  // the finish_reason chunk has an empty delta
      engine::StreamUpdate last;
      last.finished = true;
      last.finish = u.finish;
      out += choice_chunk(tok, i, last);
    }
    return out;
  }

  // The object around `choices`: the whole response, or one streamed chunk.
  ordered_json envelope(bool streaming, ordered_json list) const {
    return ordered_json{{"id", id},
                        {"object", chat ? (streaming ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
                        {"created", created},
                        {"model", model},
                        {"choices", std::move(list)}};
  }

  // One server-sent event; with include_usage every chunk has "usage", null until the last.
  std::string chunk(ordered_json list, ordered_json usage = nullptr) const {
    ordered_json c = envelope(true, std::move(list));
    if (include_usage) c["usage"] = std::move(usage);
    return sse(c);
  }

  // The chunk carrying `u`'s text for choice `index` (or only its role, or only its finish_reason).
  std::string choice_chunk(const tokenizer::Tokenizer& tok, size_t index, const engine::StreamUpdate& u) {
    return chunk(ordered_json::array({choice(tok, index, u, true)}));
  }

  // A chunk of `text` whose content is the parser's delta d (nothing when there is nothing to send).
  std::string chunk_of(const tokenizer::Tokenizer& tok, size_t i, engine::StreamUpdate text, const chat::ToolCallDelta& d) {
    text.content = d.content;
    if (text.content.empty() && text.reasoning.empty() && d.tool_calls.empty() && !(logprobs && !text.tokens.empty()))
      return {};
    ordered_json calls = nullptr;
    if (!d.tool_calls.empty()) {
      calls = ordered_json::array();
      for (const auto& c : d.tool_calls) calls.push_back(chat::tool_call_chunk_json(c));
    }
    return chunk(ordered_json::array({choice(tok, i, text, true, calls)}));
  }

  void cancel_all() {
    for (Choice& ch : choices) ch.rs->cancel();
  }
  bool all_ended() const {
    return std::all_of(choices.begin(), choices.end(), [](const Choice& ch) { return ch.ended; });
  }

  // The next update of any choice (its index), cancelling the request once its deadline passed or
  // its client left; nullopt when none came within a short wait.
  std::optional<size_t> next(engine::StreamUpdate& u) {
    if (!timed_out && Clock::now() > deadline) {
      timed_out = true;
      cancel_all();
    }
    if (peer && peer->gone()) cancel_all();
    std::vector<size_t> open;
    for (size_t k = 0; k < choices.size(); ++k)
      if (const size_t i = (poll_from + k) % choices.size(); !choices[i].ended) open.push_back(i);
    if (open.empty()) return std::nullopt;
    poll_from = (open.front() + 1) % choices.size();
    if (open.size() > 1)
      for (size_t i : open)
        if (choices[i].rs->next(u, std::chrono::milliseconds(0))) return took(i, u);
    // One choice (or none had news): wait on one; a single stream wakes as soon as it has news.
    const auto wait = std::chrono::milliseconds(open.size() > 1 ? 10 : 100);
    if (choices[open.front()].rs->next(u, wait)) return took(open.front(), u);
    return std::nullopt;
  }

  // What the usage block counts: every prompt once, every choice's tokens.
  engine::StreamUpdate totals() const {
    engine::StreamUpdate t;
    for (size_t i = 0; i < choices.size(); ++i) {
      const engine::StreamUpdate& a = choices[i].all;
      if (i % static_cast<size_t>(n) == 0) {
        t.prompt_tokens += a.prompt_tokens;
        t.cached_tokens += a.cached_tokens;
      }
      t.completion_tokens += a.completion_tokens;
    }
    return t;
  }

  // A request that ended without one of OpenAI's finish reasons (it failed, ran past the request
  // timeout or was cut by shutdown) is answered as an error: status, message and code.
  struct Failure {
    int status;
    std::string message, code;
  };
  std::optional<Failure> failure(const engine::StreamUpdate& u, bool shutting_down) const {
    if (!u.error.empty() && !u.error_code.empty()) return Failure{400, u.error, u.error_code};  // the request's fault
    if (!u.error.empty()) return Failure{500, "generation failed: " + u.error, ""};
    if (!u.finished || u.finish != engine::FinishReason::kCancelled) return std::nullopt;
    if (timed_out)
      return Failure{503, "the request ran past the server's request timeout and was stopped", "request_timeout"};
    if (shutting_down) return Failure{503, "the server is shutting down: the request was stopped", "server_shutting_down"};
    return Failure{503, "the request was stopped", "request_cancelled"};
  }
  bool timed_out = false;
  Clock::time_point last_write = Clock::now();

 private:
  // Merges u into the choice's totals (u keeps only its own delta).
  size_t took(size_t i, const engine::StreamUpdate& u) {
    Choice& ch = choices[i];
    ch.all.content += u.content;
    ch.all.reasoning += u.reasoning;
    ch.all.tokens.insert(ch.all.tokens.end(), u.tokens.begin(), u.tokens.end());
    if (u.finished) {
      ch.ended = true;
      ch.all.finished = true;
      ch.all.finish = u.finish;
      ch.all.error = u.error;
      ch.all.error_code = u.error_code;
      ch.all.prompt_tokens = u.prompt_tokens;
      ch.all.cached_tokens = u.cached_tokens;
      ch.all.completion_tokens = u.completion_tokens;
    }
    return i;
  }
};

Server::Server(model::Model& model, const tokenizer::Tokenizer& tokenizer, engine::SchedulerOptions scheduler,
               ServerOptions options)
    : tokenizer_(tokenizer),
      options_(std::move(options)),
      defaults_(engine::default_params(model.dir(), model.config())),
      vocab_size_(static_cast<size_t>(model.config().vocab_size)),
      prompts_(tokenizer, model.dir()),
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

void Server::run() { http_->listen_after_bind(); }

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
    http_->stop();
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
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.set_header("Access-Control-Max-Age", "600");
    }
    res.status = 204;
    return false;
  }
  if (auto it = routes.find(req.path); it != routes.end() && it->second != req.method) {
    res.set_header("Allow", it->second);
    send_error(res, 405, "method " + req.method + " is not allowed on " + req.path + " (use " + it->second + ")");
    return false;
  }
  if (!options_.api_key.empty() && req.path.rfind("/v1/", 0) == 0 &&
      req.get_header_value("Authorization") != "Bearer " + options_.api_key) {
    send_error(res, 401, "missing or wrong API key: send \"Authorization: Bearer <key>\"", {}, "invalid_api_key");
    return false;
  }
  if (draining_.load() && req.method == "POST") {
    send_error(res, 503, "the server is shutting down");
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
    send_error(res, res.status, message);
    return httplib::Server::HandlerResponse::Handled;
  }));
  http_->set_exception_handler([](const Request&, Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      send_error(res, 500, std::string("internal error: ") + e.what());
    } catch (...) {
      send_error(res, 500, "internal error");
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
    send_error(res, 404, "the model '" + id + "' does not exist (this server serves '" + options_.model_name + "')",
               "model", "model_not_found");
  });
  auto guarded = [this](void (Server::*fn)(const Request&, Response&)) {
    return [this, fn](const Request& req, Response& res) {
      try {
        (this->*fn)(req, res);
      } catch (const ApiError& e) {
        send_error(res, e.status, e.what(), e.param, e.code);
      } catch (const engine::RequestError& e) {
        send_error(res, 400, e.what(), e.param, e.code);
      } catch (const engine::QueueFull& e) {
        res.set_header("Retry-After", "1");
        send_error(res, 429, std::string("the server is busy: ") + e.what(), {}, "rate_limit_exceeded");
      } catch (const Error& e) {
        send_error(res, 400, e.what());
      }
    };
  };
  http_->Post("/v1/chat/completions", guarded(&Server::handle_chat));
  http_->Post("/v1/completions", guarded(&Server::handle_text));
  http_->Post("/tokenize", guarded(&Server::handle_tokenize));
  http_->Post("/detokenize", guarded(&Server::handle_detokenize));
  http_->Post("/apply-template", guarded(&Server::handle_apply_template));
  http_->Post("/v1/embeddings", guarded(&Server::handle_embeddings));
}

void Server::handle_embeddings(const httplib::Request& req, httplib::Response& res) {
  send_json(res, 200, embeddings_->respond(parse_body(req.body), options_.model_name));
}

void Server::handle_chat(const httplib::Request& req, httplib::Response& res) {
  const ChatRequest cr = parse_chat_request(parse_body(req.body), defaults_, vocab_size_);
  engine::ChatPrompt prompt;
  try {
    prompt = prompts_.build(cr.messages, cr.options);
  } catch (const Error& e) {
    throw ApiError(400, std::string("the chat template failed: ") + e.what(), "messages");
  }
  std::optional<chat::ToolCallFormat> tool_format;
  if (cr.tool_choice.mode != ToolChoice::Mode::kNone) {
    tool_format = prompts_.tool_call_format();
    if (!tool_format)
      throw ApiError(400, "'tools': this model's chat template writes tool calls in no format Ember knows "
                          "(unknown tool-call format), so its calls could not be returned", "tools");
  }
  std::vector<engine::GenerationRequest> gens;
  gens.push_back(engine::chat_request(std::move(prompt), cr.params));
  std::vector<chat::ForcedToolCall> forced;
  try {
    forced = forced_shapes(cr, tool_format);  // once: the grammar and the reply's cut calls both use them
  } catch (const Error& e) {
    throw ApiError(400, std::string("'tool_choice': ") + e.what(), "tool_choice");
  }
  gens.back().grammar = output_grammar(cr, forced);
  respond(req, res, std::move(gens), /*chat=*/true, cr, tool_format, std::move(forced));
}

std::optional<engine::GrammarConstraint> Server::output_grammar(const ChatRequest& cr,
                                                                const std::vector<chat::ForcedToolCall>& forced) {
  using Mode = ToolChoice::Mode;
  using Kind = ResponseFormat::Kind;
  std::string gbnf;
  const char* param = "response_format";
  try {
    if (cr.tool_choice.mode == Mode::kRequired || cr.tool_choice.mode == Mode::kFunction) {
      param = "tool_choice";
      std::vector<grammar::FramedSchema> shapes;
      for (const auto& s : forced) shapes.push_back({s.prefix, s.body_schema, s.suffix});
      gbnf = grammar::framed_schemas_to_gbnf(shapes);
    } else if (cr.response_format.kind == Kind::kJsonObject) {
      gbnf = grammar::json_object_gbnf();
    } else if (cr.response_format.kind == Kind::kJsonSchema) {
      gbnf = grammar::json_schema_to_gbnf(cr.response_format.schema);
    } else {
      return std::nullopt;
    }
  } catch (const Error& e) {
    throw ApiError(400, std::string("'") + param + "': " + e.what(), param);
  }
  constexpr size_t kRecentGrammars = 16;
  std::shared_ptr<const grammar::Vocabulary> vocab;
  {
    std::lock_guard lock(vocab_mu_);
    for (auto it = recent_grammars_.begin(); it != recent_grammars_.end(); ++it)
      if (it->first == gbnf) {
        std::rotate(it, it + 1, recent_grammars_.end());
        return recent_grammars_.back().second;
      }
    if (!grammar_vocab_) grammar_vocab_ = engine::grammar_vocabulary(tokenizer_);
    vocab = grammar_vocab_;
  }
  // Compiled outside the lock: other requests' lookups need not wait for it. Two requests of a new
  // grammar at once may both compile it; the second to finish takes the first one's entry.
  engine::GrammarConstraint c{std::make_shared<const grammar::Grammar>(grammar::Grammar::from_gbnf(gbnf)), vocab};
  c.source = std::string("'") + param + "'";
  std::lock_guard lock(vocab_mu_);
  for (const auto& [text, known] : recent_grammars_)
    if (text == gbnf) return known;
  if (recent_grammars_.size() >= kRecentGrammars) recent_grammars_.erase(recent_grammars_.begin());
  recent_grammars_.emplace_back(std::move(gbnf), c);
  return c;
}

// llama-server's utility routes, with its request and response shapes.
void Server::handle_tokenize(const httplib::Request& req, httplib::Response& res) {
  const ordered_json body = parse_body(req.body);
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

void Server::handle_detokenize(const httplib::Request& req, httplib::Response& res) {
  const ordered_json body = parse_body(req.body);
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

void Server::handle_apply_template(const httplib::Request& req, httplib::Response& res) {
  const ChatRequest cr = parse_chat_request(parse_body(req.body), defaults_, vocab_size_);
  try {
    send_json(res, 200, {{"prompt", prompts_.render(cr.messages, cr.options, /*add_generation_prompt=*/true)}});
  } catch (const Error& e) {
    throw ApiError(400, std::string("the chat template failed: ") + e.what(), "messages");
  }
}

void Server::handle_text(const httplib::Request& req, httplib::Response& res) {
  const TextRequest tr = parse_text_request(parse_body(req.body), defaults_, vocab_size_);
  std::vector<engine::GenerationRequest> gens;
  std::vector<std::string> echoes;
  for (const TextPrompt& p : tr.prompts) {
    engine::GenerationRequest g;
    g.prompt = p.ids.empty() ? tokenizer_.encode(p.text, /*add_special_tokens=*/true) : p.ids;
    g.params = tr.params;
    if (tr.echo) echoes.push_back(p.ids.empty() ? p.text : tokenizer_.decode(p.ids, /*skip_special_tokens=*/false));
    gens.push_back(std::move(g));
  }
  respond(req, res, std::move(gens), /*chat=*/false, tr, std::nullopt, {}, echoes);
}

void Server::respond(const httplib::Request& req, httplib::Response& res, std::vector<engine::GenerationRequest> gens,
                     bool chat, const CompletionRequest& cr, std::optional<chat::ToolCallFormat> tool_format,
                     std::vector<chat::ForcedToolCall> forced, const std::vector<std::string>& echoes) {
  // As vLLM: a client's max_tokens past the context is refused, not run until the context ends it.
  for (auto& g : gens) g.refuse_past_context = cr.max_tokens.has_value();
  auto st = std::make_shared<Stream>();
  st->n = cr.n;
  st->chat = chat;
  st->tool_format = tool_format;
  st->forced = std::move(forced);
  st->include_usage = cr.include_usage;
  st->logprobs = cr.params.logprobs;
  st->with_top = cr.top_logprobs > 0;
  st->id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(created_) + "-" + std::to_string(next_id_++);
  st->model = options_.model_name;
  st->created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                    .count();
  st->deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(options_.request_timeout_s));
  size_t prompt = 0;
  try {
    for (; prompt < gens.size(); ++prompt)
      for (auto& rs : scheduler_->submit(std::move(gens[prompt]), cr.n)) {
        st->choices.push_back({std::move(rs), {}, false, false, 0, std::nullopt, std::nullopt, {}, {}});
        if (tool_format) st->choices.back().tools.emplace(*tool_format, chat::random_call_ids(*tool_format));
        if (!echoes.empty()) st->choices.back().echo = echoes[prompt];
      }
  } catch (const engine::RequestError& e) {  // the engine's checks, in this API's names
    st->cancel_all();  // the prompts already queued go too
    std::string param = e.param;
    if (param == "prompt" && chat) param = "messages";
    if (param == "max_tokens") param = cr.max_tokens_field;
    throw ApiError(400, (gens.size() > 1 ? "prompt " + std::to_string(prompt) + ": " : std::string()) + e.what(), param,
                   e.code);
  } catch (...) {
    st->cancel_all();  // the prompts already queued go too
    throw;
  }
  st->peer.emplace(req);

  if (!cr.stream) {
    engine::StreamUpdate u;
    while (!st->all_ended()) st->next(u);
    ordered_json list = ordered_json::array();
    for (size_t i = 0; i < st->choices.size(); ++i) {
      if (const auto f = st->failure(st->choices[i].all, draining_.load())) {
        st->cancel_all();
        return send_error(res, f->status, f->message, {}, f->code);
      }
      list.push_back(st->whole_choice(tokenizer_, i));
    }
    ordered_json body = st->envelope(false, std::move(list));
    body["usage"] = usage_json(st->totals());
    return send_json(res, 200, body);
  }

  ++open_streams_;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // nginx: pass events through at once
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, st](size_t, httplib::DataSink& sink) {
        engine::StreamUpdate u;
        std::string out;
        if (st->chat)  // OpenAI's first chunk of each choice: the role alone
          for (size_t i = 0; i < st->choices.size(); ++i)
            if (!st->choices[i].sent_role) out += st->choice_chunk(tokenizer_, i, engine::StreamUpdate{});
        if (const auto i = st->next(u)) {
          if (const auto f = st->failure(u, draining_.load())) {
            out += sse(error_body(f->status, f->message, {}, f->code));  // OpenAI's clients raise on it
            st->cancel_all();
            for (auto& ch : st->choices) ch.ended = true;
          } else {
            out += st->update_chunks(tokenizer_, *i, u);
          }
          if (st->all_ended()) {
            if (st->include_usage) out += st->chunk(ordered_json::array(), usage_json(st->totals()));
            out += "data: [DONE]\n\n";
            st->ended = true;
          }
        }
        const auto now = Clock::now();
        if (out.empty() && now - st->last_write > std::chrono::duration<double>(options_.keep_alive_s))
          out = ": keep-alive\n\n";  // a comment: clients skip it, their read timeouts restart
        if (!out.empty()) {
          if (!sink.write(out.data(), out.size())) return false;
          st->last_write = now;
        }
        if (st->ended) sink.done();
        return true;
      },
      [this, st](bool) {
        if (!st->ended) st->cancel_all();  // the client went away: free its sequences
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
