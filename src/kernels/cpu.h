#pragma once
// Instruction sets the kernels can use, detected once at run time (cpuid + xgetbv), so one binary
// built for the AVX2 baseline uses AVX-512 where the machine has it.
#include <vector>

namespace ember::kernels {

enum class Isa { Scalar, Avx2, Avx512 };

const char* isa_name(Isa isa);
// Avx512 means F, BW, VL, VNNI and BF16 together (Zen 4, Sapphire Rapids and later).
bool isa_supported(Isa isa);
Isa best_isa();  // the fastest supported; EMBER_ISA=avx2|scalar in the environment caps it
std::vector<Isa> supported_isas();

}  // namespace ember::kernels
