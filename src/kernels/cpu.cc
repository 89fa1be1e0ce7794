#include "kernels/cpu.h"

#include <cpuid.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "base/error.h"
#include "kernels/cpu_impl.h"

namespace ember::kernels {

namespace detail {

IsaSupport isa_support(const CpuWords& w) {
  using namespace cpuid_bit;
  auto has = [](uint64_t word, int bit) { return ((word >> bit) & 1) != 0; };
  auto saves = [&](uint64_t state) { return has(w.leaf1_ecx, kOsxsave) && (w.xcr0 & state) == state; };
  IsaSupport s;
  s.avx2 = saves(kXcr0Ymm) && has(w.leaf1_ecx, kAvx) && has(w.leaf1_ecx, kFma) && has(w.leaf1_ecx, kF16c) &&
           has(w.leaf7_ebx, kAvx2) && has(w.leaf7_ebx, kBmi2);
  s.avx512 = s.avx2 && saves(kXcr0Zmm) && has(w.leaf7_ebx, kAvx512F) && has(w.leaf7_ebx, kAvx512Bw) &&
             has(w.leaf7_ecx, kAvx512Vnni);
  s.bf16_dot = s.avx512 && has(w.leaf7_1_eax, kAvx512Bf16);
  return s;
}

}  // namespace detail

namespace {

detail::CpuWords read_words() {
  detail::CpuWords w;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return w;
  w.leaf1_ecx = c;
  if ((c >> detail::cpuid_bit::kOsxsave) & 1) {  // xgetbv faults without it
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    w.xcr0 = (uint64_t{hi} << 32) | lo;
  }
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    w.leaf7_ebx = b;
    w.leaf7_ecx = c;
    const unsigned max_subleaf = a;
    if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) w.leaf7_1_eax = a;
  }
  return w;
}

const detail::IsaSupport& support() {
  static const detail::IsaSupport s = [] {  // immutable after the first call
    detail::IsaSupport found = detail::isa_support(read_words());
#if defined(EMBER_AVX512_EMULATED)
    found.avx512 = found.bf16_dot = found.avx2;  // the AVX-512 kernels run on SIMDe (avx512_intrinsics.h)
#endif
    return found;
  }();
  return s;
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
    case Isa::Avx2: return support().avx2;
    case Isa::Avx512: return support().avx512;
  }
  return false;
}

bool bf16_dot_supported() { return support().bf16_dot; }

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

void require_isa(Isa isa, const char* who) {
  if (!isa_supported(isa)) fail(who, std::string("instruction set ") + isa_name(isa) + " is not supported here");
}

}  // namespace ember::kernels
