#pragma once
// sentence-transformers' Pooling and Normalize over one input's final hidden states.
#include <cstdint>
#include <vector>

#include "model/sentence_transformers.h"

namespace ember::engine {

// The vector of one input: `hidden` holds the final-normed states of its n tokens ([n][c.dimension],
// special tokens included), every one a real token. The first `prompt_tokens` are left out of mean,
// max, weighted-mean and last-token pooling where c.include_prompt is false (always keeping the last
// token). Modes concatenate in PoolingMode's order; Normalize applies when the folder has it.
std::vector<float> pool(const model::SentenceTransformersConfig& c, const float* hidden, int64_t n,
                        int64_t prompt_tokens = 0);

// v / max(||v||_2, 1e-12), as sentence-transformers' Normalize.
void normalize(std::vector<float>& v);

// Matryoshka: the first `dimensions` values, unit length again where the folder normalises.
void truncate_dimensions(std::vector<float>& v, int64_t dimensions, bool normalized);

}  // namespace ember::engine
