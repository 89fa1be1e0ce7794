#pragma once
// Test helpers: an in-process `ember serve` on a loopback port, SSE parsing, raw sockets.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "server/server.h"

namespace ember::test {

using nlohmann::ordered_json;

// A Server running on its own thread on 127.0.0.1 (a free port).
class RunningServer {
 public:
  RunningServer(model::Model& model, const tokenizer::Tokenizer& tok, engine::SchedulerOptions so,
                server::ServerOptions o) {
    std::signal(SIGPIPE, SIG_IGN);  // a client that vanishes must not kill the test process
    o.host = "127.0.0.1";
    o.port = 0;
    server_ = std::make_unique<server::Server>(model, tok, so, o);
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->run(); });
    httplib::Client c = client();
    for (int i = 0; i < 200 && !c.Get("/health"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ~RunningServer() {
    server_->stop();
    thread_.join();
  }
  int port() const { return port_; }
  server::Server& server() { return *server_; }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120, 0);
    c.set_connection_timeout(10, 0);
    return c;
  }

 private:
  std::unique_ptr<server::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

// The JSON payloads of "data: ..." events, and whether the stream ended with "data: [DONE]".
struct SseEvents {
  std::vector<ordered_json> chunks;
  bool done = false;
};
inline SseEvents parse_sse(const std::string& body) {
  SseEvents out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    const std::string event = body.substr(pos, end - pos);
    pos = end + 2;
    if (event.rfind("data: ", 0) != 0) continue;
    const std::string data = event.substr(6);
    if (data == "[DONE]") out.done = true;
    else out.chunks.push_back(ordered_json::parse(data));
  }
  return out;
}

// The value of a metric line "name value" in Prometheus text.
inline double metric(const std::string& text, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\\n" + name + " ([0-9.eE+-]+)\\n"))) return -1;
  return std::stod(m[1]);
}

// A raw TCP connection to 127.0.0.1:port (for requests a client library would not send).
class RawSocket {
 public:
  explicit RawSocket(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawSocket() { close(); }
  bool ok() const { return ok_; }
  bool send_all(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  std::string recv_some() {
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
  bool ok_ = false;
};

}  // namespace ember::test
