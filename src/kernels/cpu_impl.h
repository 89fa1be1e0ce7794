#pragma once
// Internal: which instruction sets a CPU's feature words allow, apart from reading them (cpu.cc), so
// tests can check the decision for CPUs other than the one they run on.
#include <cstdint>

namespace ember::kernels::detail {

// The cpuid and xgetbv words the decision reads.
struct CpuWords {
  uint32_t leaf1_ecx = 0;  // cpuid(1).ecx
  uint32_t leaf7_ebx = 0;  // cpuid(7, 0).ebx
  uint32_t leaf7_ecx = 0;  // cpuid(7, 0).ecx
  uint64_t xcr0 = 0;       // xgetbv(0): the register state the OS saves (0 when OSXSAVE is off)
  uint32_t leaf7_1_eax = 0;  // cpuid(7, 1).eax
};

// Bit positions of the features used, in the word named.
namespace cpuid_bit {
constexpr int kFma = 12, kOsxsave = 27, kAvx = 28, kF16c = 29;   // leaf1_ecx
constexpr int kAvx2 = 5, kBmi2 = 8, kAvx512F = 16, kAvx512Bw = 30;  // leaf7_ebx
constexpr int kAvx512Vnni = 11;                                   // leaf7_ecx
constexpr int kAvx512Bf16 = 5;                                    // leaf7_1_eax
constexpr uint64_t kXcr0Ymm = 0x6;   // SSE and AVX state
constexpr uint64_t kXcr0Zmm = 0xE6;  // that, opmask and all 512-bit state
}  // namespace cpuid_bit

struct IsaSupport {
  bool avx2 = false, avx512 = false, bf16_dot = false;
};
// Avx2: AVX2, FMA, F16C and BMI2 (the build's baseline flags). Avx512: that and exactly what
// matmul_avx512.cc is compiled for, AVX512 F, BW and VNNI. bf16_dot: Avx512 and AVX512-BF16
// (matmul_panel_bf16_avx512.cc).
IsaSupport isa_support(const CpuWords& w);

}  // namespace ember::kernels::detail
