#include "base/resident_memory.h"

#include <sys/resource.h>

#include <fstream>
#include <string>

namespace ember {

namespace {
// A kB value of /proc/self/status in MiB; -1 when the key is missing.
double status_mib(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(std::string(key).size())) / 1024.0;
  return -1.0;
}
}  // namespace

double resident_mib() { return status_mib("VmRSS:"); }

double peak_resident_mib() {
  const double v = status_mib("VmHWM:");
  if (v >= 0) return v;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

bool reset_peak_resident() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.close();
  return out.good() && peak_resident_mib() <= resident_mib() + 1.0;
}

}  // namespace ember
