#pragma once
// Dense passes over a logit row (150k+ floats per token) in AVX2, the build's baseline. The scalar
// tail (the last n % 8 values) keeps the vector loop's 8-lane order, so a row's result does not
// depend on where it ends: sampling stays reproducible.
// NaN logits never count: they are skipped by max, argmax, sums and selections.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "kernels/exp.h"

namespace ember::sampling::vec {

// exp(x) to ~1 ulp from our own polynomial (not libm, whose last bit varies between libraries);
// 0 below -87 and for NaN. The kernels' one, so that attention and sampling share it.
using kernels::exp_det;

// Largest value; -inf when there is none (empty row, all -inf or NaN).
float max_value(std::span<const float> x);

// Index of the largest value, the lowest index among ties; -1 when every value is -inf or NaN.
int32_t argmax(std::span<const float> x);

// Sum over x[i] >= floor of exp_det(x[i] / temperature - shift). When `out` is not empty it receives
// exp_det(x[i] / temperature - shift) for every i (0 for those below floor).
float sum_exp(std::span<const float> x, float temperature, float shift,
              float floor = -std::numeric_limits<float>::infinity(), std::span<float> out = {});

// Sum of w[i] over the i with x[i] >= threshold (w and x of the same length); their number goes to
// *count when count is not null.
float sum_where_at_least(std::span<const float> w, std::span<const float> x, float threshold,
                         size_t* count = nullptr);

// Writes the indices i with x[i] >= threshold to out (room for x.size()), ascending; returns the count.
size_t indices_at_least(std::span<const float> x, float threshold, int32_t* out);

// The k-th largest finite value of x (k >= 1); the smallest finite value when fewer than k are finite;
// -inf when none is. `heap` is scratch space kept by the caller so nothing is allocated per call.
float kth_largest(std::span<const float> x, size_t k, std::vector<float>& heap);

}  // namespace ember::sampling::vec
