#include "sampling/vec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>

#include <immintrin.h>

#include "kernels/exp.h"

namespace ember::sampling::vec {
namespace {

using kernels::exp8;

constexpr float kInf = std::numeric_limits<float>::infinity();
// Lane sums are reduced in this one order, vector lanes and scalar tails alike.
float reduce8(const float* a) { return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])); }

// Loads up to 8 floats from p (n of them), padding with `pad`.
__m256 load_partial(const float* p, size_t n, float pad) {
  alignas(32) float buf[8];
  for (size_t i = 0; i < 8; ++i) buf[i] = i < n ? p[i] : pad;
  return _mm256_load_ps(buf);
}

}  // namespace

float max_value(std::span<const float> x) {
  // max(v, acc) keeps acc when v is NaN, in the vector loop and the tail.
  float lanes[8];
  std::fill(lanes, lanes + 8, -kInf);
  size_t i = 0;
  __m256 acc = _mm256_set1_ps(-kInf);
  for (; i + 8 <= x.size(); i += 8) acc = _mm256_max_ps(_mm256_loadu_ps(x.data() + i), acc);
  _mm256_storeu_ps(lanes, acc);
  for (; i < x.size(); ++i) lanes[i % 8] = x[i] > lanes[i % 8] ? x[i] : lanes[i % 8];
  float m = -kInf;
  for (float v : lanes) m = v > m ? v : m;
  return m;
}

int32_t argmax(std::span<const float> x) {
  const float m = max_value(x);
  if (m == -kInf) return -1;
  size_t i = 0;
  const __m256 mv = _mm256_set1_ps(m);
  for (; i + 8 <= x.size(); i += 8) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x.data() + i), mv, _CMP_EQ_OQ));
    if (mask) return static_cast<int32_t>(i + std::countr_zero(static_cast<unsigned>(mask)));
  }
  for (; i < x.size(); ++i)
    if (x[i] == m) return static_cast<int32_t>(i);
  return -1;
}

float sum_exp(std::span<const float> x, float temperature, float shift, float floor, std::span<float> out) {
  const size_t n = x.size();
  const bool store = !out.empty();
  alignas(32) float lanes[8] = {};
  size_t i = 0;  // the tail goes through the vector step, padded
  const __m256 t = _mm256_set1_ps(temperature), s = _mm256_set1_ps(shift), f = _mm256_set1_ps(floor);
  __m256 acc = _mm256_setzero_ps();
  const bool unit = temperature == 1.0f;  // x / 1 == x: skip the costly division
  auto step = [&](__m256 v) {
    const __m256 scaled = unit ? v : _mm256_div_ps(v, t);
    const __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(scaled, s)), _mm256_cmp_ps(v, f, _CMP_GE_OQ));
    acc = _mm256_add_ps(acc, e);
    return e;
  };
  for (; i + 8 <= n; i += 8) {
    const __m256 e = step(_mm256_loadu_ps(x.data() + i));
    if (store) _mm256_storeu_ps(out.data() + i, e);
  }
  if (i < n) {
    alignas(32) float e[8];
    _mm256_store_ps(e, step(load_partial(x.data() + i, n - i, -kInf)));
    if (store) std::copy(e, e + (n - i), out.data() + i);
  }
  _mm256_store_ps(lanes, acc);
  return reduce8(lanes);
}

float sum_where_at_least(std::span<const float> w, std::span<const float> x, float threshold, size_t* count) {
  const size_t n = x.size();
  alignas(32) float lanes[8] = {};
  size_t i = 0, hits = 0;
  const __m256 th = _mm256_set1_ps(threshold);
  __m256 acc = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    const __m256 keep = _mm256_cmp_ps(_mm256_loadu_ps(x.data() + i), th, _CMP_GE_OQ);
    acc = _mm256_add_ps(acc, _mm256_and_ps(_mm256_loadu_ps(w.data() + i), keep));
    hits += static_cast<size_t>(std::popcount(static_cast<unsigned>(_mm256_movemask_ps(keep))));
  }
  _mm256_store_ps(lanes, acc);
  for (; i < n; ++i) {
    lanes[i % 8] += x[i] >= threshold ? w[i] : 0.0f;
    hits += x[i] >= threshold;
  }
  if (count) *count = hits;
  return reduce8(lanes);
}

size_t indices_at_least(std::span<const float> x, float threshold, int32_t* out) {
  size_t count = 0, i = 0;
  const __m256 th = _mm256_set1_ps(threshold);
  for (; i + 8 <= x.size(); i += 8) {
    auto mask = static_cast<unsigned>(
        _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x.data() + i), th, _CMP_GE_OQ)));
    while (mask) {
      out[count++] = static_cast<int32_t>(i + std::countr_zero(mask));
      mask &= mask - 1;
    }
  }
  for (; i < x.size(); ++i)
    if (x[i] >= threshold) out[count++] = static_cast<int32_t>(i);
  return count;
}

float kth_largest(std::span<const float> x, size_t k, std::vector<float>& heap) {
  heap.clear();
  const auto greater = std::greater<float>();  // min-heap: the front is the k-th largest so far
  size_t i = 0;
  for (; i < x.size() && heap.size() < k; ++i) {
    if (x[i] > -kInf) {
      heap.push_back(x[i]);
      std::push_heap(heap.begin(), heap.end(), greater);
    }
  }
  if (heap.empty()) return -kInf;
  auto offer = [&](float v) {
    if (v > heap.front()) {
      std::pop_heap(heap.begin(), heap.end(), greater);
      heap.back() = v;
      std::push_heap(heap.begin(), heap.end(), greater);
    }
  };
  for (; i + 8 <= x.size(); i += 8) {
    const __m256 v = _mm256_loadu_ps(x.data() + i);
    auto mask = static_cast<unsigned>(
        _mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_set1_ps(heap.front()), _CMP_GT_OQ)));
    while (mask) {
      offer(x[i + std::countr_zero(mask)]);
      mask &= mask - 1;
    }
  }
  for (; i < x.size(); ++i) offer(x[i]);
  return heap.front();
}

}  // namespace ember::sampling::vec
