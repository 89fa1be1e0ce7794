#pragma once
// Perplexity of a text as llama.cpp's llama-perplexity measures it, so that the two engines' figures
// (and those of their quantizations) compare: the tokens cut into windows of `ctx` tokens, each
// window's first token replaced by BOS when the tokenizer adds one, every window computed on its own
// from an empty cache, and only its second half scored (each token from the logits of the one before
// it, so that every scored token sees at least ctx/2 tokens of context).
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "model/model.h"

namespace ember::engine {

struct PerplexityResult {
  double ppl = 0, ppl_error = 0;  // exp(mean negative log-likelihood), and its standard error
  double mean_nll = 0;
  int64_t ctx = 0, windows = 0, scored = 0;  // tokens scored over all windows
  std::vector<double> running;               // the estimate after each window (llama's [1]x,[2]y,... line)
};

// Throws ember::Error when `tokens` holds less than one window or ctx is under 4 positions.
PerplexityResult perplexity(model::Model& model, std::span<const int32_t> tokens, int64_t ctx,
                            std::optional<int32_t> bos,
                            const std::function<void(int64_t window, int64_t windows, double ppl)>& progress = {});

}  // namespace ember::engine
