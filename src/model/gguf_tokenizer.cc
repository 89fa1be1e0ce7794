#include "model/gguf_tokenizer.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "base/error.h"
#include "base/utf8.h"

namespace ember::model {

namespace {

using json = nlohmann::json;

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum TokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

constexpr const char* kSpace = "\xE2\x96\x81";  // "▁", SentencePiece's space

// The pre-tokenizer splits of Hugging Face's tokenizer.json for these vocabularies (Llama 3 and Qwen2
// differ only in how many digits one piece holds).
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", use_regex}};
}

json split_then_byte_level(const char* pattern) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           json::array({{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
                        byte_level(false)})}};
}

// Hugging Face's components for the byte-level BPE family named by tokenizer.ggml.pre.
struct Gpt2Flavour {
  json normalizer, pre_tokenizer;
  bool ignore_merges = false;
};

Gpt2Flavour gpt2_flavour(const std::string& pre, const std::string& where) {
  if (pre == "default" || pre == "gpt-2" || pre == "gpt2") return {json(), byte_level(true), false};
  if (pre == "llama-bpe" || pre == "llama3") return {json(), split_then_byte_level(kLlama3Pattern), true};
  if (pre == "qwen2") return {json{{"type", "NFC"}}, split_then_byte_level(kQwen2Pattern), false};
  if (pre == "smollm")
    return {json(),
            {{"type", "Sequence"},
             {"pretokenizers", json::array({{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)})}},
            false};
  fail(where, "key \"tokenizer.ggml.pre\": pre-tokenizer \"" + pre +
                  "\" is not supported (supported: default, gpt-2, llama-bpe, qwen2, smollm)");
}

// The fields of a pre-tokenizer or normalizer that decide how it splits text (not offsets).
json splitting_fields(const json& j) {
  if (j.is_array()) {
    json out = json::array();
    for (const json& x : j) out.push_back(splitting_fields(x));
    return out;
  }
  if (!j.is_object()) return j;
  json out = json::object();
  for (const char* key : {"type", "pattern", "Regex", "String", "behavior", "invert", "use_regex", "individual_digits",
                          "add_prefix_space", "pretokenizers", "normalizers"})
    if (j.contains(key) && !j[key].is_null()) out[key] = splitting_fields(j[key]);
  return out;
}

// Merges of a SentencePiece vocabulary as transformers' SentencePieceExtractor derives them: every
// split of a token into two tokens, ordered by the whole token's score (highest first; without
// scores by id), ties by the token's id and then the ids of its two parts.
json spm_merges(const std::vector<std::string>& tokens, const std::vector<double>& scores) {
  // Real SentencePiece pieces are at most 16 characters; longer tokens (user-defined ones) are
  // whole added tokens and never the result of a merge. The cap keeps crafted files cheap.
  constexpr size_t kMaxMergedBytes = 256;
  std::unordered_map<std::string_view, int64_t> id_of;
  id_of.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) id_of.emplace(tokens[i], static_cast<int64_t>(i));  // first id wins
  struct Merge {
    double score;
    int64_t left, right;
  };
  std::vector<Merge> merges;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string_view t = tokens[i];
    if (t.size() > kMaxMergedBytes) continue;
    const size_t first = merges.size();
    for (size_t pos = 0; pos < t.size();) {
      pos += static_cast<size_t>(std::max(1, utf8::sequence_length(static_cast<unsigned char>(t[pos]))));
      if (pos >= t.size()) break;
      const auto l = id_of.find(t.substr(0, pos)), r = id_of.find(t.substr(pos));
      if (l != id_of.end() && r != id_of.end())
        merges.push_back({scores.empty() ? -static_cast<double>(i) : scores[i], l->second, r->second});
    }
    std::sort(merges.begin() + static_cast<std::ptrdiff_t>(first), merges.end(),
              [](const Merge& a, const Merge& b) { return a.left != b.left ? a.left < b.left : a.right < b.right; });
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) { return a.score > b.score; });
  json out = json::array();
  for (const auto& m : merges)
    out.push_back(json::array({tokens[static_cast<size_t>(m.left)], tokens[static_cast<size_t>(m.right)]}));
  return out;
}

}  // namespace

std::optional<std::string> gguf_pre_tokenizer_name(const nlohmann::json& normalizer, const nlohmann::json& pre_tokenizer) {
  for (const char* name : {"default", "llama-bpe", "qwen2", "smollm"}) {
    const Gpt2Flavour f = gpt2_flavour(name, "");
    if (splitting_fields(f.normalizer) == splitting_fields(normalizer) &&
        splitting_fields(f.pre_tokenizer) == splitting_fields(pre_tokenizer))
      return name;
  }
  return std::nullopt;
}

GgufTokenizerFiles gguf_tokenizer_files(const GgufFile& g) {
  const std::string& where = g.path();
  const std::string model = g.get_string("tokenizer.ggml.model");
  const std::vector<std::string> tokens = g.get_string_array("tokenizer.ggml.tokens");
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) fail(where, "key \"tokenizer.ggml.tokens\": the vocabulary is empty");
  for (size_t i = 0; i < tokens.size(); ++i)
    if (!utf8::is_valid(tokens[i]))
      fail(where, "key \"tokenizer.ggml.tokens\": token " + std::to_string(i) + " is not valid UTF-8");
  std::vector<int64_t> types(tokens.size(), kNormal);
  if (g.has("tokenizer.ggml.token_type")) {
    types = g.get_int_array("tokenizer.ggml.token_type");
    if (types.size() != tokens.size())
      fail(where, "key \"tokenizer.ggml.token_type\": " + std::to_string(types.size()) + " types for " +
                      std::to_string(n) + " tokens");
  }
  auto token_id = [&](const char* key) -> std::optional<int64_t> {
    if (!g.has(key)) return std::nullopt;
    const int64_t id = g.get_int(key);
    if (id < 0 || id >= n)
      fail(where, std::string("key \"") + key + "\": token id " + std::to_string(id) + " is outside the vocabulary of " +
                      std::to_string(n));
    return id;
  };
  const auto bos = token_id("tokenizer.ggml.bos_token_id"), eos = token_id("tokenizer.ggml.eos_token_id");
  const auto pad = token_id("tokenizer.ggml.padding_token_id");
  auto unk = token_id("tokenizer.ggml.unknown_token_id");
  if (!unk) {
    const auto it = std::find(types.begin(), types.end(), kUnknown);
    if (it != types.end()) unk = it - types.begin();
  }

  GgufTokenizerFiles out;
  json& tj = out.tokenizer;
  json vocab = json::object();
  for (int64_t i = n - 1; i >= 0; --i) vocab[tokens[static_cast<size_t>(i)]] = i;  // first id wins
  json added = json::array();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = types[static_cast<size_t>(i)];
    if (t != kControl && t != kUnknown && t != kUserDefined) continue;
    added.push_back({{"id", i},
                     {"content", tokens[static_cast<size_t>(i)]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", t != kUserDefined}});
  }
  tj["added_tokens"] = std::move(added);
  tj["post_processor"] = nullptr;  // BOS / EOS come from the config's add_bos_token / add_eos_token

  bool add_bos_default = false;
  // tokenizer.ggml.merges as "left right" strings ([] when absent).
  auto stored_merges = [&](const GgufFile& f) {
    json merges = json::array();
    if (f.has("tokenizer.ggml.merges"))
      for (auto& m : f.get_string_array("tokenizer.ggml.merges")) {
        if (!utf8::is_valid(m)) fail(where, "key \"tokenizer.ggml.merges\": a merge is not valid UTF-8");
        merges.push_back(std::move(m));
      }
    return merges;
  };
  if (model == "gpt2") {
    const Gpt2Flavour f = gpt2_flavour(g.get_string_or("tokenizer.ggml.pre", "default"), where);
    json merges = stored_merges(g);
    tj["normalizer"] = f.normalizer;
    tj["pre_tokenizer"] = f.pre_tokenizer;
    tj["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
    tj["model"] = {{"type", "BPE"},         {"vocab", std::move(vocab)}, {"merges", std::move(merges)},
                   {"ignore_merges", f.ignore_merges}, {"byte_fallback", false}, {"fuse_unk", false}};
  } else if (model == "llama") {
    std::vector<double> scores;
    if (g.has("tokenizer.ggml.scores")) {
      scores = g.get_float_array("tokenizer.ggml.scores");
      if (scores.size() != tokens.size())
        fail(where, "key \"tokenizer.ggml.scores\": " + std::to_string(scores.size()) + " scores for " +
                        std::to_string(n) + " tokens");
      for (size_t i = 0; i < scores.size(); ++i)
        if (std::isnan(scores[i]))
          fail(where, "key \"tokenizer.ggml.scores\": the score of token " + std::to_string(i) + " is NaN");
    }
    const bool prefix = g.get_bool_or("tokenizer.ggml.add_space_prefix", true);
    json norm = json::array();
    if (prefix) norm.push_back({{"type", "Prepend"}, {"prepend", kSpace}});
    norm.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}});
    json dec = json::array({{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}},
                            {{"type", "ByteFallback"}},
                            {{"type", "Fuse"}}});
    if (prefix) dec.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    tj["normalizer"] = {{"type", "Sequence"}, {"normalizers", std::move(norm)}};
    tj["pre_tokenizer"] = nullptr;
    tj["decoder"] = {{"type", "Sequence"}, {"decoders", std::move(dec)}};
    tj["model"] = {{"type", "BPE"},
                   {"vocab", std::move(vocab)},
                   // A file convert wrote from a Hugging Face BPE keeps its merges (llama.cpp reads the scores).
                   {"merges", g.has("tokenizer.ggml.merges") ? stored_merges(g) : spm_merges(tokens, scores)},
                   {"unk_token", unk ? json(tokens[static_cast<size_t>(*unk)]) : json()},
                   {"byte_fallback", true},
                   {"fuse_unk", true}};
    add_bos_default = true;
  } else {
    fail(where, "key \"tokenizer.ggml.model\": tokenizer model \"" + model +
                    "\" is not supported (supported: gpt2, llama)");
  }

  auto name = [&](const std::optional<int64_t>& id) {
    return id ? nlohmann::ordered_json(tokens[static_cast<size_t>(*id)]) : nlohmann::ordered_json();
  };
  nlohmann::ordered_json& c = out.config;
  c["bos_token"] = name(bos);
  c["eos_token"] = name(eos);
  c["unk_token"] = name(unk);
  c["pad_token"] = name(pad);
  c["add_bos_token"] = g.get_bool_or("tokenizer.ggml.add_bos_token", add_bos_default);
  c["add_eos_token"] = g.get_bool_or("tokenizer.ggml.add_eos_token", false);
  c["clean_up_tokenization_spaces"] = false;
  if (g.has("tokenizer.chat_template")) {
    std::string tmpl = g.get_string("tokenizer.chat_template");
    if (!utf8::is_valid(tmpl)) fail(where, "key \"tokenizer.chat_template\": not valid UTF-8");
    c["chat_template"] = std::move(tmpl);
  }
  return out;
}

tokenizer::Tokenizer gguf_tokenizer(const GgufFile& gguf) {
  const GgufTokenizerFiles f = gguf_tokenizer_files(gguf);
  try {
    return tokenizer::Tokenizer::from_json_document(f.tokenizer, f.config.dump());
  } catch (const Error& e) {
    throw Error(gguf.path() + ": tokenizer from the GGUF metadata: " + e.what());
  }
}

}  // namespace ember::model
