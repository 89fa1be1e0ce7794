#include "kernels/cpu.h"

#include <gtest/gtest.h>

#include <initializer_list>

#include "kernels/cpu_impl.h"

namespace ember::kernels {
namespace {

using namespace detail::cpuid_bit;

uint32_t bits(std::initializer_list<int> positions) {
  uint32_t w = 0;
  for (int p : positions) w |= uint32_t{1} << p;
  return w;
}

// A CPU with the AVX2 baseline whose OS saves the zmm state; leaf7 ebx/ecx are added per case.
detail::CpuWords avx2_cpu(uint32_t leaf7_ebx, uint32_t leaf7_ecx) {
  return {bits({kFma, kOsxsave, kAvx, kF16c}), bits({kAvx2, kBmi2}) | leaf7_ebx, leaf7_ecx, kXcr0Zmm};
}

TEST(Cpu, Avx512NeedsExactlyFBwAndVnni) {
  constexpr int kAvx512Dq = 17, kAvx512Vl = 31;  // leaf7_ebx: on these CPUs, not used by the kernels
  const uint32_t skx = bits({kAvx512F, kAvx512Bw, kAvx512Dq, kAvx512Vl});
  // Skylake-X: no VNNI, so AVX2.
  EXPECT_FALSE(detail::isa_support(avx2_cpu(skx, 0)).avx512);
  // Cascade Lake and Ice Lake: VNNI without BF16 (which the kernels do not use).
  EXPECT_TRUE(detail::isa_support(avx2_cpu(skx, bits({kAvx512Vnni}))).avx512);
  // Only the three features used, nothing else of AVX-512.
  EXPECT_TRUE(detail::isa_support(avx2_cpu(bits({kAvx512F, kAvx512Bw}), bits({kAvx512Vnni}))).avx512);
  EXPECT_FALSE(detail::isa_support(avx2_cpu(bits({kAvx512F}), bits({kAvx512Vnni}))).avx512);
  // An OS that does not save the 512-bit state.
  detail::CpuWords no_zmm = avx2_cpu(skx, bits({kAvx512Vnni}));
  no_zmm.xcr0 = kXcr0Ymm | 1;
  EXPECT_FALSE(detail::isa_support(no_zmm).avx512);
  EXPECT_TRUE(detail::isa_support(no_zmm).avx2);
}

TEST(Cpu, Bf16DotNeedsAvx512AndAvx512Bf16) {
  const uint32_t ebx = bits({kAvx512F, kAvx512Bw}), ecx = bits({kAvx512Vnni});
  detail::CpuWords zen4 = avx2_cpu(ebx, ecx);
  EXPECT_FALSE(detail::isa_support(zen4).bf16_dot);  // Ice Lake: no BF16
  zen4.leaf7_1_eax = bits({kAvx512Bf16});
  EXPECT_TRUE(detail::isa_support(zen4).bf16_dot);
  detail::CpuWords no_vnni = avx2_cpu(ebx, 0);  // BF16 without the rest of the Avx512 set
  no_vnni.leaf7_1_eax = bits({kAvx512Bf16});
  EXPECT_FALSE(detail::isa_support(no_vnni).bf16_dot);
}

TEST(Cpu, Avx2NeedsTheBaselineAndOsSupport) {
  EXPECT_TRUE(detail::isa_support(avx2_cpu(0, 0)).avx2);  // Haswell
  EXPECT_FALSE(detail::isa_support(avx2_cpu(0, 0)).avx512);
  detail::CpuWords no_f16c = avx2_cpu(0, 0);
  no_f16c.leaf1_ecx &= ~bits({kF16c});
  EXPECT_FALSE(detail::isa_support(no_f16c).avx2);
  detail::CpuWords no_xsave = avx2_cpu(0, 0);
  no_xsave.leaf1_ecx &= ~bits({kOsxsave});
  EXPECT_FALSE(detail::isa_support(no_xsave).avx2);
}

// This machine's answer agrees with the compiler's own detection (which reads the bits independently).
TEST(Cpu, AgreesWithTheCompilersDetection) {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vnni");
  EXPECT_EQ(isa_supported(Isa::Avx512), avx512 && isa_supported(Isa::Avx2));
  EXPECT_EQ(bf16_dot_supported(), __builtin_cpu_supports("avx512bf16") && isa_supported(Isa::Avx512));
  if (isa_supported(Isa::Avx2)) {
    EXPECT_TRUE(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2"));
  }
  EXPECT_TRUE(isa_supported(Isa::Scalar));
}

}  // namespace
}  // namespace ember::kernels
