#pragma once
// Whether the client of a request has closed its connection. httplib 0.11 does not hand a handler
// its socket, so the socket is found among this process's descriptors as the one whose local and
// peer addresses are the request's; it stays open (and so unambiguous) while the handler runs.
#include <chrono>

namespace httplib {
struct Request;
}  // namespace httplib

namespace ember::server {

class PeerWatch {
 public:
  explicit PeerWatch(const httplib::Request& req);
  // True once the peer has closed (or reset) the connection; polls at most every 100 ms.
  bool gone();

 private:
  int fd_ = -1;
  bool gone_ = false;
  std::chrono::steady_clock::time_point next_check_;
};

}  // namespace ember::server
