#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.h"

namespace ember::engine {

PerplexityResult perplexity(model::Model& model, std::span<const int32_t> tokens, int64_t ctx,
                            std::optional<int32_t> bos,
                            const std::function<void(int64_t, int64_t, double)>& progress) {
  if (ctx < 4) fail("perplexity", "the window (--ctx) must hold at least 4 tokens");
  const int64_t windows = static_cast<int64_t>(tokens.size()) / ctx;
  if (windows == 0)
    fail("perplexity", "the text has " + std::to_string(tokens.size()) + " tokens, fewer than one window of " +
                           std::to_string(ctx) + " (give a longer text or a smaller --ctx)");
  const int64_t vocab = model.config().vocab_size, first = ctx / 2;
  PerplexityResult r;
  r.ctx = ctx;
  r.windows = windows;
  auto cache = model.make_cache(ctx);
  std::vector<float> logits(static_cast<size_t>(ctx * vocab));
  double nll = 0, nll2 = 0;
  for (int64_t w = 0; w < windows; ++w) {
    std::vector<int32_t> ids(tokens.begin() + w * ctx, tokens.begin() + (w + 1) * ctx);
    if (bos) ids[0] = *bos;
    model::KvSequence seq(*cache);
    model::ForwardItem item{&seq, ids, logits.data(), /*all_logits=*/true};
    model.forward(std::span<model::ForwardItem>(&item, 1));
    for (int64_t i = first; i < ctx - 1; ++i) {
      const float* row = logits.data() + i * vocab;
      const float top = *std::max_element(row, row + vocab);
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - top);
      const double lp = static_cast<double>(row[tokens[static_cast<size_t>(w * ctx + i + 1)]]) - top - std::log(sum);
      nll -= lp;
      nll2 += lp * lp;
      ++r.scored;
    }
    r.running.push_back(std::exp(nll / static_cast<double>(r.scored)));
    if (progress) progress(w + 1, windows, r.running.back());
  }
  const double n = static_cast<double>(r.scored);
  r.mean_nll = nll / n;
  r.ppl = std::exp(r.mean_nll);
  // As llama-perplexity: the standard error of the mean log-likelihood, carried through exp.
  const double var = nll2 / n - r.mean_nll * r.mean_nll;
  r.ppl_error = var > 0 && n > 1 ? std::sqrt(var / (n - 1)) * r.ppl : 0;
  return r;
}

}  // namespace ember::engine
