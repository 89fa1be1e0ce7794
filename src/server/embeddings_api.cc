#include "server/embeddings_api.h"

#include <algorithm>
#include <bit>

#include "base/error.h"

namespace ember::server {

namespace {

[[noreturn]] void invalid(const std::string& field, const std::string& what) {
  throw ApiError(400, "'" + field + "' " + what, field, "invalid_value");
}

}  // namespace

EmbeddingsRequest parse_embeddings_request(const ordered_json& body, const EmbeddingWidths& widths, size_t vocab_size) {
  for (const auto& [key, value] : body.items())
    if (key != "input" && key != "model" && key != "encoding_format" && key != "dimensions" && key != "user")
      throw ApiError(400, "'" + key + "' is not a field of /v1/embeddings (input, model, encoding_format, dimensions, user)",
                     key, "unknown_parameter");
  EmbeddingsRequest r;
  const auto input = body.find("input");
  if (input == body.end() || input->is_null()) invalid("input", "is required");
  r.inputs = parse_prompts(*input, "input", vocab_size);
  if (const auto m = body.find("model"); m != body.end() && !m->is_null()) {
    if (!m->is_string()) invalid("model", "must be a string");
    r.model = m->get<std::string>();
  }
  if (const auto u = body.find("user"); u != body.end() && !u->is_null() && !u->is_string()) invalid("user", "must be a string");
  if (const auto f = body.find("encoding_format"); f != body.end() && !f->is_null()) {
    if (!f->is_string() || (*f != "float" && *f != "base64")) invalid("encoding_format", "must be \"float\" or \"base64\"");
    r.base64 = *f == "base64";
  }
  if (const auto d = body.find("dimensions"); d != body.end() && !d->is_null()) {
    if (!d->is_number_integer() || d->get<int64_t>() < 1) invalid("dimensions", "must be a positive integer");
    const int64_t n = d->get<int64_t>();
    if (widths.matryoshka && n > widths.full)
      invalid("dimensions", "must be at most " + std::to_string(widths.full) + ", this model's width");
    if (!widths.matryoshka && n != widths.full)
      invalid("dimensions", "can only be " + std::to_string(widths.full) +
                            ": this model does not declare Matryoshka training (truncate_dim in "
                            "config_sentence_transformers.json), so its vectors cannot be shortened");
    r.dimensions = n;
  }
  return r;
}

std::string base64_floats(std::span<const float> v) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * 4, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u = std::bit_cast<uint32_t>(v[i]);
    for (size_t b = 0; b < 4; ++b, u >>= 8) bytes[i * 4 + b] = static_cast<char>(u & 0xff);  // little-endian
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t chunk = 0;
    for (size_t k = 0; k < 3; ++k)
      chunk = chunk << 8 | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(chunk >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

ordered_json embeddings_response(const engine::Embeddings& e, bool base64, const std::string& model) {
  ordered_json data = ordered_json::array();
  for (size_t i = 0; i < e.vectors.size(); ++i)
    data.push_back({{"object", "embedding"},
                    {"index", i},
                    {"embedding", base64 ? ordered_json(base64_floats(e.vectors[i])) : ordered_json(e.vectors[i])}});
  return ordered_json{{"object", "list"},
                      {"data", std::move(data)},
                      {"model", model},
                      {"usage", {{"prompt_tokens", e.tokens}, {"total_tokens", e.tokens}}}};
}

EmbeddingsApi::EmbeddingsApi(model::Model& model, const tokenizer::Tokenizer& tokenizer)
    : vocab_size_(static_cast<size_t>(model.config().vocab_size)) {
  try {
    embedder_.emplace(model, tokenizer);
  } catch (const Error& e) {
    unavailable_ = e.what();
  }
}

ordered_json EmbeddingsApi::respond(const ordered_json& body, const std::string& model_name) {
  if (!embedder_)
    throw ApiError(400, "this model cannot make embeddings: " + unavailable_, "model", "model_not_supported");
  const EmbeddingsRequest r =
      parse_embeddings_request(body, {embedder_->config().output_dimension(), embedder_->config().truncate_dim > 0}, vocab_size_);
  std::vector<engine::EmbeddingInput> inputs(r.inputs.size());
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    if (r.inputs[i].ids.empty()) inputs[i].text = r.inputs[i].text;
    else inputs[i].ids = r.inputs[i].ids;
  }
  try {
    return embeddings_response(embedder_->embed(inputs, r.dimensions), r.base64, model_name);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "input", "invalid_value");
  }
}

}  // namespace ember::server
