#pragma once
// Runs a shell command as a user would and captures its standard output and exit status.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace ember::test {

struct Output {
  std::string out;
  int status = -1;  // as pclose returns it: 0 on success
};

inline Output run_command(const std::string& cmd) {
  Output r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 65536> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  r.status = ::pclose(p);
  return r;
}

}  // namespace ember::test
