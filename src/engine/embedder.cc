#include "engine/embedder.h"

#include <algorithm>

#include "base/error.h"
#include "engine/pooling.h"

namespace ember::engine {

Embedder::Embedder(model::Model& model, const tokenizer::Tokenizer& tokenizer)
    : model_(model), tokenizer_(tokenizer),
      config_(model::load_sentence_transformers(model.dir(), model.config().hidden_size)),
      special_tokens_(tokenizer.with_special_tokens({}).size()) {
  const int64_t context = model.config().max_position_embeddings;
  max_tokens_ = config_.max_seq_length > 0 ? config_.max_seq_length : context;
  if (context > 0) max_tokens_ = std::min(max_tokens_, context);
  if (max_tokens_ <= static_cast<int64_t>(special_tokens_))
    fail(model.dir(), "max_seq_length " + std::to_string(max_tokens_) + " leaves no room beside the " +
                          std::to_string(special_tokens_) + " special tokens the tokenizer adds");
}

int64_t Embedder::dimension() const {
  return config_.truncate_dim > 0 ? config_.truncate_dim : config_.output_dimension();
}

std::vector<int32_t> Embedder::tokens(const EmbeddingInput& in, int64_t* prompt_tokens) const {
  if (prompt_tokens != nullptr) *prompt_tokens = 0;
  if (in.ids) {
    if (in.prompt_name) fail("prompt_name", "applies to text; token ids are embedded as they are");
    if (static_cast<int64_t>(in.ids->size()) > max_tokens_)
      fail("ids", std::to_string(in.ids->size()) + " token ids are more than the model's max_seq_length (" +
                      std::to_string(max_tokens_) + ")");
    for (int32_t id : *in.ids)
      if (id < 0 || id >= model_.config().vocab_size)
        fail("ids", "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                        std::to_string(model_.config().vocab_size) + ")");
    return *in.ids;
  }
  std::string prompt;
  const std::string name = in.prompt_name.value_or(config_.default_prompt_name);
  if (!name.empty()) {
    const auto it = config_.prompts.find(name);
    if (it == config_.prompts.end()) {
      std::string known;
      for (const auto& [n, text] : config_.prompts) known += (known.empty() ? "" : ", ") + n;
      fail("prompt_name", "\"" + name + "\" is not one of this model's prompts (" + (known.empty() ? "none" : known) + ")");
    }
    prompt = it->second;
  }
  // sentence-transformers' truncation: the text's tokens are cut so that they and the special tokens fit.
  std::vector<int32_t> ids = tokenizer_.encode(prompt + in.text, /*add_special_tokens=*/false);
  const size_t room = static_cast<size_t>(max_tokens_) - special_tokens_;
  if (ids.size() > room) ids.resize(room);
  ids = tokenizer_.with_special_tokens(std::move(ids));
  // As sentence-transformers counts a prompt: its own tokenization (a BOS included), less a trailing
  // special token (an appended EOS, which the text's tokens follow instead).
  if (prompt_tokens != nullptr && !prompt.empty() && !config_.include_prompt) {
    const std::vector<int32_t> alone = tokenizer_.encode(prompt, true);
    *prompt_tokens = static_cast<int64_t>(alone.size()) - (!alone.empty() && tokenizer_.is_special(alone.back()) ? 1 : 0);
  }
  return ids;
}

Embeddings Embedder::embed(std::span<const EmbeddingInput> inputs, int64_t dimensions) {
  const int64_t H = model_.config().hidden_size;
  if (dimensions <= 0) dimensions = dimension();
  Embeddings out;
  std::vector<std::vector<int32_t>> ids(inputs.size());
  std::vector<int64_t> prompt(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string where = inputs.size() > 1 ? "input " + std::to_string(i) : "";
    try {
      ids[i] = tokens(inputs[i], &prompt[i]);
    } catch (const Error& e) {
      fail(where, e.what());
    }
    if (ids[i].empty()) fail(where, "has no tokens (empty text, and the tokenizer adds no special tokens)");
    out.tokens += static_cast<int64_t>(ids[i].size());
  }
  out.vectors.resize(inputs.size());
  std::vector<float> hidden;
  for (size_t begin = 0; begin < inputs.size();) {
    // As many whole inputs as fit kBatchTokens (at least one), each its own sequence of the pass.
    size_t end = begin;
    int64_t n = 0;
    while (end < inputs.size() && (end == begin || n + static_cast<int64_t>(ids[end].size()) <= kBatchTokens))
      n += static_cast<int64_t>(ids[end++].size());
    // The cache lives for one pass, so it is float32 whatever the served model's KV type: the
    // vectors keep the reference precision (F16 keys move the goldens' vectors by up to 8e-4).
    constexpr int64_t kBlock = model::KvCache::kDefaultBlock;
    model::KvCache cache(model_.config(), n / kBlock + static_cast<int64_t>(end - begin), kBlock, model::kKvTypeReference);
    std::vector<model::KvSequence> seqs;
    seqs.reserve(end - begin);
    std::vector<model::ForwardItem> items;
    hidden.resize(static_cast<size_t>(n * H));
    int64_t row = 0;
    for (size_t i = begin; i < end; ++i) {
      seqs.emplace_back(cache);
      model::ForwardItem item{&seqs.back(), ids[i], nullptr, false};
      item.hidden = hidden.data() + row * H;
      items.push_back(item);
      row += static_cast<int64_t>(ids[i].size());
    }
    model_.forward(items);
    row = 0;
    for (size_t i = begin; i < end; ++i) {
      const int64_t len = static_cast<int64_t>(ids[i].size());
      out.vectors[i] = pool(config_, hidden.data() + row * H, len, prompt[i]);
      truncate_dimensions(out.vectors[i], dimensions, config_.normalize);
      row += len;
    }
    begin = end;
  }
  return out;
}

}  // namespace ember::engine
