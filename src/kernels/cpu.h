#pragma once
// Instruction sets the kernels can use, detected once at run time (cpuid + xgetbv), so one binary
// built for the AVX2 baseline uses AVX-512 where the machine has it.
#include <vector>

namespace ember::kernels {

enum class Isa { Scalar, Avx2, Avx512 };

const char* isa_name(Isa isa);
// Avx2 means AVX2, FMA, F16C and BMI2 (the build's baseline). Avx512 means that plus AVX512 F, BW and
// VNNI, exactly what matmul_avx512.cc uses (its int8 dot product is VNNI's vpdpbusd; the plain
// weights' matmul_panel_avx512.cc needs only F): Cascade Lake, Ice Lake, Zen 4 and later. Skylake-X
// has no VNNI and runs AVX2.
bool isa_supported(Isa isa);
Isa best_isa();
// The BF16 dot product (AVX512-BF16: Cooper Lake, Sapphire Rapids, Zen 4 and later) besides Avx512:
// what products of BF16 weights with BF16-rounded activations use at Avx512 (matmul.h).
bool bf16_dot_supported();  // the fastest supported; EMBER_ISA=avx2|scalar in the environment caps it
std::vector<Isa> supported_isas();
// Throws ember::Error naming `who` when isa is not supported here.
void require_isa(Isa isa, const char* who);

}  // namespace ember::kernels
