#include "kernels/cpu.h"

#include <cpuid.h>

#include <cstdlib>
#include <cstring>

namespace ember::kernels {

namespace {

struct Features {
  bool avx2 = false, avx512 = false;
};

Features detect() {
  Features f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
  if (!osxsave) return f;
  unsigned xlo, xhi;
  __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  const bool ymm_os = (xlo & 0x6) == 0x6, zmm_os = (xlo & 0xE6) == 0xE6;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  const bool avx2 = (b >> 5) & 1, bmi2 = (b >> 8) & 1;
  const bool avx512f = (b >> 16) & 1, avx512bw = (b >> 30) & 1, avx512vl = (b >> 31) & 1;
  const bool vnni = (c >> 11) & 1;
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1);
  const bool bf16 = (a1 >> 5) & 1;
  f.avx2 = ymm_os && avx2 && fma && f16c && bmi2;
  f.avx512 = f.avx2 && zmm_os && avx512f && avx512bw && avx512vl && vnni && bf16;
  return f;
}

const Features& features() {
  static const Features f = detect();  // immutable after the first call
  return f;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return true;
    case Isa::Avx2: return features().avx2;
    case Isa::Avx512: return features().avx512;
  }
  return false;
}

Isa best_isa() {
  static const Isa best = [] {
    Isa cap = Isa::Avx512;
    if (const char* e = std::getenv("EMBER_ISA")) {
      if (std::strcmp(e, "avx2") == 0) cap = Isa::Avx2;
      if (std::strcmp(e, "scalar") == 0) cap = Isa::Scalar;
    }
    if (cap == Isa::Avx512 && isa_supported(Isa::Avx512)) return Isa::Avx512;
    if (cap != Isa::Scalar && isa_supported(Isa::Avx2)) return Isa::Avx2;
    return Isa::Scalar;
  }();
  return best;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (isa_supported(i)) out.push_back(i);
  return out;
}

}  // namespace ember::kernels
