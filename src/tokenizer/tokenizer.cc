#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "base/mapped_file.h"
#include "base/utf8.h"
#include "tokenizer/json_util.h"
#include "tokenizer/tokenizer_impl.h"

namespace ember::tokenizer {

namespace {

std::vector<AddedToken> parse_added_tokens(const json& list, const BpeModel& model) {
  std::vector<AddedToken> out;
  if (list.is_null()) return out;
  if (!list.is_array()) fail("tokenizer.json", "added_tokens: expected an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    const json& j = list[i];
    AddedToken t;
    t.content = field<std::string>(j, "content", where);
    const int64_t id = field<int64_t>(j, "id", where);  // read whole: int32_t would wrap a large one
    if (id < 0 || id >= kMaxVocabSize)
      fail("tokenizer.json", where + ".id: must be from 0 to " + std::to_string(kMaxVocabSize - 1));
    t.id = static_cast<int32_t>(id);
    // Hugging Face gives a token that the model already knows the model's id.
    if (auto id = model.token_to_id(t.content)) t.id = *id;
    t.special = field_or<bool>(j, "special", false, where);
    t.lstrip = field_or<bool>(j, "lstrip", false, where);
    t.rstrip = field_or<bool>(j, "rstrip", false, where);
    t.single_word = field_or<bool>(j, "single_word", false, where);
    t.normalized = field_or<bool>(j, "normalized", !t.special, where);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

static Tokenizer::Impl* build_impl(const json& j, TokenizerConfig config) {
  if (!j.is_object()) fail("tokenizer.json", "expected a JSON object");
  if (!j.contains("model")) fail("tokenizer.json", "missing field \"model\"");
  auto impl = std::make_unique<Tokenizer::Impl>();
  impl->config = std::move(config);
  impl->model = std::make_unique<BpeModel>(j["model"]);
  impl->normalizer = make_normalizer(j.value("normalizer", json()));
  impl->pre_tokenizer = make_pre_tokenizer(j.value("pre_tokenizer", json()));
  impl->post_processor = make_post_processor(j.value("post_processor", json()));
  impl->decoder = make_decoder(j.value("decoder", json()));
  impl->added =
      AddedVocabulary(parse_added_tokens(j.value("added_tokens", json()), *impl->model), impl->normalizer.get());
  int32_t max_id = impl->model->max_id();
  for (const auto& t : impl->added.tokens()) max_id = std::max(max_id, t.id);
  impl->vocab_size = max_id + 1;
  if (!impl->post_processor) {
    // Without a post-processor, transformers adds BOS / EOS as tokenizer_config.json asks.
    std::vector<int32_t> before, after;
    const Tokenizer::Impl& im = *impl;
    auto id_of = [&](const std::string& tok) -> std::optional<int32_t> {
      if (tok.empty()) return std::nullopt;
      if (const AddedToken* t = im.added.find(tok)) return t->id;
      return im.model->token_to_id(tok);
    };
    if (im.config.add_bos_token.value_or(false))
      if (auto id = id_of(im.config.bos_token)) before.push_back(*id);
    if (im.config.add_eos_token.value_or(false))
      if (auto id = id_of(im.config.eos_token)) after.push_back(*id);
    if (!before.empty() || !after.empty())
      impl->post_processor = std::make_unique<WrapProcessor>(std::move(before), std::move(after));
  }
  return impl.release();
}

static json parse_tokenizer_json(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("tokenizer.json", e.what());
  }
}

Tokenizer Tokenizer::from_json(const std::string& tokenizer_json_text, const std::string& config_json_text) {
  return from_json_document(parse_tokenizer_json(tokenizer_json_text), config_json_text);
}

Tokenizer Tokenizer::from_json_document(const nlohmann::json& tokenizer_json, const std::string& config_json_text) {
  return Tokenizer(std::shared_ptr<const Impl>(build_impl(tokenizer_json, parse_tokenizer_config(config_json_text))));
}

Tokenizer Tokenizer::from_folder(const std::string& dir) {
  const std::filesystem::path d(dir);
  const auto tok = d / "tokenizer.json";
  if (!std::filesystem::exists(tok)) fail(tok.string(), "not found (Ember needs a tokenizer.json)");
  TokenizerConfig config = load_tokenizer_config(dir);
  const std::string text = read_file(tok.string());
  try {
    return Tokenizer(std::shared_ptr<const Impl>(build_impl(parse_tokenizer_json(text), std::move(config))));
  } catch (const Error& e) {
    throw Error(dir + ": " + e.what());
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (text.size() > kMaxEncodeBytes)
    fail("tokenizer", "input of " + std::to_string(text.size()) + " bytes exceeds the limit of " +
                          std::to_string(kMaxEncodeBytes) + " bytes per encode call");
  if (!utf8::is_valid(text)) fail("tokenizer", "input text is not valid UTF-8");
  const Impl& im = *impl_;
  std::vector<Piece> pieces = im.added.extract_and_normalize(text, im.normalizer.get());
  if (im.pre_tokenizer) im.pre_tokenizer->pre_tokenize(pieces);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  for (const auto& p : pieces) {
    if (p.added_id >= 0)
      ids.push_back(p.added_id);
    else
      im.model->tokenize(p.text, ids);
  }
  if (add_special_tokens && im.post_processor) im.post_processor->process(ids);
  return ids;
}

std::vector<int32_t> Tokenizer::with_special_tokens(std::vector<int32_t> ids) const {
  if (impl_->post_processor) impl_->post_processor->process(ids);
  return ids;
}

std::string Tokenizer::Impl::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    const std::string* t = token_of(id);
    if (!t)
      fail("decode",
           "token id " + std::to_string(id) + " is not in the vocabulary (size " + std::to_string(vocab_size) + ")");
    if (skip_special) {
      const AddedToken* a = added.find(*t);
      if (a && a->special) continue;
    }
    tokens.push_back(*t);
  }
  if (!decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  decoder->decode_chain(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return impl_->decode(ids, skip_special_tokens);
}

std::optional<std::string> Tokenizer::token_bytes(int32_t id) const {
  const Impl& im = *impl_;
  const std::string* t = im.token_of(id);
  if (!t) return std::nullopt;
  if (im.added.find(id) || !im.decoder) return *t;
  // Behind a plain "a", decoders that strip or rewrite the start of a text leave the token alone.
  std::vector<std::string> parts{"a", *t};
  im.decoder->decode_chain_bytes(parts);
  std::string out;
  for (const auto& p : parts) out += p;
  return out.substr(1);
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const AddedToken* t = impl_->added.find(token)) return t->id;
  return impl_->model->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  const std::string* t = impl_->token_of(id);
  if (!t) fail("tokenizer", "token id " + std::to_string(id) + " is not in the vocabulary");
  return *t;
}

bool Tokenizer::is_special(int32_t id) const {
  const std::string* t = impl_->token_of(id);
  if (!t) return false;
  const AddedToken* a = impl_->added.find(*t);
  return a && a->special;
}

const TokenizerConfig& Tokenizer::config() const { return impl_->config; }

}  // namespace ember::tokenizer
