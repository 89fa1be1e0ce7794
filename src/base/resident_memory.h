#pragma once
// This process's resident memory, as /proc/self/status reports it, for benchmarks and reports.

namespace ember {

double resident_mib();       // VmRSS
double peak_resident_mib();  // VmHWM (getrusage's maximum where /proc is missing)
// Resets the peak to the current resident size (Linux 4.0+); false where the kernel does not allow it.
bool reset_peak_resident();

}  // namespace ember
