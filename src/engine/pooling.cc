#include "engine/pooling.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ember::engine {

using model::PoolingMode;

std::vector<float> pool(const model::SentenceTransformersConfig& c, const float* hidden, int64_t n,
                        int64_t prompt_tokens) {
  const int64_t H = c.dimension;
  // The tokens mean / max / last-token pooling read: all but a left-out prompt, never none.
  const int64_t first = c.include_prompt ? 0 : std::clamp<int64_t>(prompt_tokens, 0, n - 1);
  const float* row = hidden;
  std::vector<float> out;
  out.reserve(static_cast<size_t>(c.output_dimension()));
  std::vector<double> acc(static_cast<size_t>(H));
  for (PoolingMode m : c.pooling) {
    std::fill(acc.begin(), acc.end(), 0.0);
    switch (m) {
      case PoolingMode::kCls:
        for (int64_t h = 0; h < H; ++h) acc[h] = row[h];
        break;
      case PoolingMode::kLastToken:
        for (int64_t h = 0; h < H; ++h) acc[h] = row[(n - 1) * H + h];
        break;
      case PoolingMode::kMax:
        std::fill(acc.begin(), acc.end(), -std::numeric_limits<double>::infinity());
        for (int64_t t = first; t < n; ++t)
          for (int64_t h = 0; h < H; ++h) acc[h] = std::max<double>(acc[h], row[t * H + h]);
        break;
      case PoolingMode::kMean:
      case PoolingMode::kMeanSqrtLen:
      case PoolingMode::kWeightedMean: {
        double weights = 0;
        for (int64_t t = first; t < n; ++t) {
          // Weighted mean: weight 1..n by position (counted from the first token, prompt included).
          const double w = m == PoolingMode::kWeightedMean ? static_cast<double>(t + 1) : 1.0;
          weights += w;
          for (int64_t h = 0; h < H; ++h) acc[h] += w * row[t * H + h];
        }
        const double div = m == PoolingMode::kMeanSqrtLen ? std::sqrt(weights) : weights;
        for (double& a : acc) a /= div;
        break;
      }
    }
    for (double a : acc) out.push_back(static_cast<float>(a));
  }
  if (c.normalize) normalize(out);
  return out;
}

void normalize(std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  const double scale = 1.0 / std::max(std::sqrt(sum), 1e-12);
  for (float& x : v) x = static_cast<float>(x * scale);
}

void truncate_dimensions(std::vector<float>& v, int64_t dimensions, bool normalized) {
  if (dimensions <= 0 || dimensions >= static_cast<int64_t>(v.size())) return;
  v.resize(static_cast<size_t>(dimensions));
  if (normalized) normalize(v);
}

}  // namespace ember::engine
