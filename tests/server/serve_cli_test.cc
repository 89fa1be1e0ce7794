// `ember serve` run as a user would, its stderr a pipe (not a terminal): what it prints while it
// starts, the port it listens on, and a second server on a port in use.
#include <gtest/gtest.h>
#include <signal.h>

#include <httplib.h>

#include <cstdio>
#include <regex>
#include <string>

#include "run_command.h"
#include "test_paths.h"

namespace ember::test {
namespace {

// An `ember serve` in the background, its stderr read up to the line with the URL.
class ServeProcess {
 public:
  explicit ServeProcess(const std::string& args) {
    // The shell prints its pid, then becomes the server (exec), so that pid is the server's.
    pipe_ = ::popen(("sh -c 'echo $$; exec timeout 120 " + ember_binary() + " serve " + args + "' 2>&1").c_str(), "r");
    char line[4096];
    if (pipe_ == nullptr || std::fgets(line, sizeof line, pipe_) == nullptr) return;
    pid_ = std::stoi(line);
    const std::regex url(R"(http://127\.0\.0\.1:([0-9]+)/)");
    while (std::fgets(line, sizeof line, pipe_) != nullptr) {
      startup_ += line;
      std::smatch m;
      const std::string s = line;
      if (std::regex_search(s, m, url)) {
        port_ = std::stoi(m[1]);
        break;
      }
    }
  }
  ~ServeProcess() {
    if (pid_ > 0) ::kill(pid_, SIGTERM);
    if (pipe_ != nullptr) ::pclose(pipe_);
  }
  int port() const { return port_; }
  const std::string& startup() const { return startup_; }  // stderr up to the URL line

 private:
  FILE* pipe_ = nullptr;
  int pid_ = -1, port_ = -1;
  std::string startup_;
};

const std::string kModel = "-m " + model_dir("chat-skills") + " --host 127.0.0.1 --parallel 1";

// Issue 41 items 1, 2: --port 0 prints the port it got and listens there; a second server on that
// port exits 1 naming the address instead of sharing it.
TEST(ServeCli, PortZeroPrintsTheRealPortAndASecondServerThereFails) {
  ServeProcess first(kModel + " --port 0");
  ASSERT_GT(first.port(), 0) << first.startup();
  httplib::Client c("127.0.0.1", first.port());
  auto health = c.Get("/health");
  ASSERT_TRUE(health) << first.startup();
  EXPECT_EQ(health->status, 200);

  const std::string address = "127.0.0.1:" + std::to_string(first.port());
  const Output second = run_command("timeout 120 " + ember_binary() + " serve " + kModel + " --port " +
                                    std::to_string(first.port()) + " 2>&1");
  ASSERT_TRUE(WIFEXITED(second.status)) << second.out;
  EXPECT_EQ(WEXITSTATUS(second.status), 1) << second.out;
  EXPECT_NE(second.out.find("cannot listen on " + address + ": address already in use"), std::string::npos)
      << second.out;
  EXPECT_EQ(second.out.find("http://"), std::string::npos) << "printed a URL it does not serve: " << second.out;
  EXPECT_TRUE(c.Get("/health")) << "the first server stopped answering";
}

// Issue 41 item 11: with stderr a pipe (a log, a service manager), loading is reported a line per
// stage, not only on a terminal: a server that printed nothing while it loaded looked hung.
TEST(ServeCli, LoadingIsReportedWhenStderrIsNotATerminal) {
  ServeProcess server(kModel + " --port 0");
  ASSERT_GT(server.port(), 0) << server.startup();
  EXPECT_EQ(server.startup().rfind("loading: reading config.json\nloading: mapping safetensors weights\n", 0), 0u)
      << server.startup();
  EXPECT_EQ(server.startup().find('\r'), std::string::npos) << server.startup();
}

// Issue 41 item 2: ports outside 0-65535 are refused at parse time, naming --port.
TEST(ServeCli, PortOutOfRangeNamesTheFlag) {
  for (const char* port : {"99999", "65536", "-1"}) {
    const Output o = run_command("timeout 60 " + ember_binary() + " serve " + kModel + " --port " + port + " 2>&1");
    EXPECT_NE(o.status, 0) << port << ": " << o.out;
    EXPECT_NE(o.out.find("--port"), std::string::npos) << port << ": " << o.out;
    EXPECT_EQ(o.out.find("http://"), std::string::npos) << port << ": " << o.out;
  }
}

}  // namespace
}  // namespace ember::test
