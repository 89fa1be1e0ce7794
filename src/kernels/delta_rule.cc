#include "kernels/delta_rule.h"

#include "kernels/delta_rule_simd.h"

namespace ember::kernels {

void delta_rule(float* S, int64_t dk, int64_t dv, const DeltaRuleHead& h, int64_t n) {
  delta_rule(S, dk, dv, h, n, best_isa());
}

void delta_rule(float* S, int64_t dk, int64_t dv, const DeltaRuleHead& h, int64_t n, Isa isa) {
  require_isa(isa, "delta_rule");
  switch (isa) {
    case Isa::Avx512: return detail::delta_rule_avx512(S, dk, dv, h, n);
    case Isa::Avx2: return detail::delta_rule_avx2(S, dk, dv, h, n);
    case Isa::Scalar: return detail::delta_rule_impl<detail::ScalarLane, 8>(S, dk, dv, h, n);
  }
}

}  // namespace ember::kernels
