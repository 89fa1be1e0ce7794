#pragma once
// A sentence-transformers folder (as SentenceTransformer.save writes one): modules.json's Transformer,
// Pooling and Normalize modules, 1_Pooling/config.json, the prompts of config_sentence_transformers.json
// and sentence_bert_config.json's max_seq_length. What turns a decoder's final hidden states into
// one vector per text.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ember::model {

// In the order sentence-transformers' Pooling concatenates them when several are on.
enum class PoolingMode : uint8_t { kCls, kMax, kMean, kMeanSqrtLen, kWeightedMean, kLastToken };

const char* pooling_mode_name(PoolingMode m);  // "cls", "max", "mean", ... as sentence-transformers names them

struct SentenceTransformersConfig {
  std::vector<PoolingMode> pooling;  // at least one
  bool include_prompt = true;        // false: a prompt's tokens are left out of mean / max / last-token pooling
  bool normalize = false;            // modules.json has Normalize (it saves no folder)
  int64_t dimension = 0;             // the hidden size each mode gives (word_embedding_dimension)
  std::map<std::string, std::string> prompts;
  std::string default_prompt_name;   // "": no prompt unless one is asked for
  int64_t max_seq_length = 0;        // longer inputs are truncated to it; 0: not given
  // config_sentence_transformers.json's truncate_dim: the output is cut to it by default, and its
  // presence declares Matryoshka training, so shorter `dimensions` may be asked for; 0: not declared.
  int64_t truncate_dim = 0;

  int64_t output_dimension() const { return static_cast<int64_t>(pooling.size()) * dimension; }
};

// Reads the folder's modules; `hidden_size` is the model's (the Pooling module must agree). Throws
// ember::Error naming the missing file (a causal LM folder has no modules.json) or the bad field,
// and refusing, by name, modules and pooling modes Ember does not implement.
SentenceTransformersConfig load_sentence_transformers(const std::string& dir, int64_t hidden_size);

}  // namespace ember::model
