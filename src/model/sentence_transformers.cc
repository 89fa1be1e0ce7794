#include "model/sentence_transformers.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string_view>

#include "base/error.h"
#include "base/mapped_file.h"

namespace ember::model {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr PoolingMode kModes[] = {PoolingMode::kCls,         PoolingMode::kMax,          PoolingMode::kMean,
                                  PoolingMode::kMeanSqrtLen, PoolingMode::kWeightedMean, PoolingMode::kLastToken};

// The legacy flag of each mode (1_Pooling/config.json before sentence-transformers 5).
const char* legacy_flag(PoolingMode m) {
  switch (m) {
    case PoolingMode::kCls: return "pooling_mode_cls_token";
    case PoolingMode::kMax: return "pooling_mode_max_tokens";
    case PoolingMode::kMean: return "pooling_mode_mean_tokens";
    case PoolingMode::kMeanSqrtLen: return "pooling_mode_mean_sqrt_len_tokens";
    case PoolingMode::kWeightedMean: return "pooling_mode_weightedmean_tokens";
    case PoolingMode::kLastToken: return "pooling_mode_lasttoken";
  }
  return "";
}

json read_json(const fs::path& path, const std::string& missing_why) {
  if (!fs::exists(path)) fail(path.string(), "not found" + missing_why);
  try {
    return json::parse(read_file(path.string()));
  } catch (const json::exception& e) {
    fail(path.string(), std::string("invalid JSON: ") + e.what());
  }
}

// The module type's class name: "sentence_transformers.models.Pooling" -> "Pooling".
std::string_view class_name(std::string_view type) {
  const size_t dot = type.rfind('.');
  return dot == std::string_view::npos ? type : type.substr(dot + 1);
}

void read_pooling(const fs::path& path, int64_t hidden_size, SentenceTransformersConfig& c) {
  const json j = read_json(path, " (modules.json's Pooling module keeps its settings there)");
  const std::string where = path.string();
  if (!j.is_object()) fail(where, "expected a JSON object");
  for (const char* key : {"word_embedding_dimension", "embedding_dimension"})
    if (const auto it = j.find(key); it != j.end()) {
      if (!it->is_number_integer() || it->get<int64_t>() != hidden_size)
        fail(where, std::string("\"") + key + "\" is " + it->dump() + " but the model's hidden_size is " +
                        std::to_string(hidden_size));
    }
  c.dimension = hidden_size;
  if (const auto it = j.find("include_prompt"); it != j.end()) {
    if (!it->is_boolean()) fail(where, "\"include_prompt\" must be true or false");
    c.include_prompt = it->get<bool>();
  }
  // sentence-transformers 5 writes "pooling_mode" (a name or a list of names); earlier ones a flag per mode.
  if (const auto it = j.find("pooling_mode"); it != j.end() && !it->is_null()) {
    const json names = it->is_array() ? *it : json::array({*it});
    std::vector<bool> on(std::size(kModes), false);
    for (const json& n : names) {
      bool known = false;
      for (size_t k = 0; k < std::size(kModes); ++k)
        if (n.is_string() && n.get<std::string>() == pooling_mode_name(kModes[k])) on[k] = known = true;
      if (!known) fail(where, "\"pooling_mode\" " + n.dump() + " is not supported (cls, max, mean, "
                              "mean_sqrt_len_tokens, weightedmean or lasttoken)");
    }
    for (size_t k = 0; k < std::size(kModes); ++k)
      if (on[k]) c.pooling.push_back(kModes[k]);
  }
  for (const auto& [key, value] : j.items()) {
    if (key.rfind("pooling_mode_", 0) != 0) continue;
    bool known = false;
    for (PoolingMode m : kModes) known = known || key == legacy_flag(m);
    if (!value.is_boolean()) fail(where, "\"" + key + "\" must be true or false");
    if (!known && value.get<bool>()) fail(where, "\"" + key + "\" is a pooling mode Ember does not implement");
  }
  if (c.pooling.empty())
    for (PoolingMode m : kModes)
      if (j.value(legacy_flag(m), false)) c.pooling.push_back(m);
  if (c.pooling.empty()) c.pooling.push_back(PoolingMode::kMean);  // sentence-transformers' default
}

void read_prompts(const fs::path& path, SentenceTransformersConfig& c) {
  if (!fs::exists(path)) return;  // no prompts
  const json j = read_json(path, "");
  const std::string where = path.string();
  if (!j.is_object()) fail(where, "expected a JSON object");
  if (const auto it = j.find("prompts"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) fail(where, "\"prompts\" must be an object of name -> text");
    for (const auto& [name, text] : it->items()) {
      if (!text.is_string()) fail(where, "prompt \"" + name + "\" must be a string");
      c.prompts[name] = text.get<std::string>();
    }
  }
  if (const auto it = j.find("default_prompt_name"); it != j.end() && !it->is_null()) {
    if (!it->is_string() || !c.prompts.contains(it->get<std::string>()))
      fail(where, "\"default_prompt_name\" " + it->dump() + " is not one of \"prompts\"");
    c.default_prompt_name = it->get<std::string>();
  }
  if (const auto it = j.find("truncate_dim"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > c.output_dimension())
      fail(where, "\"truncate_dim\" must be an integer from 1 to " + std::to_string(c.output_dimension()));
    c.truncate_dim = it->get<int64_t>();
  }
}

}  // namespace

const char* pooling_mode_name(PoolingMode m) {
  switch (m) {
    case PoolingMode::kCls: return "cls";
    case PoolingMode::kMax: return "max";
    case PoolingMode::kMean: return "mean";
    case PoolingMode::kMeanSqrtLen: return "mean_sqrt_len_tokens";
    case PoolingMode::kWeightedMean: return "weightedmean";
    case PoolingMode::kLastToken: return "lasttoken";
  }
  return "";
}

SentenceTransformersConfig load_sentence_transformers(const std::string& dir, int64_t hidden_size) {
  const fs::path root(dir);
  const json modules =
      read_json(root / "modules.json",
                " (embeddings need a sentence-transformers folder: modules.json and 1_Pooling/config.json say "
                "how to pool the hidden states)");
  const std::string where = (root / "modules.json").string();
  if (!modules.is_array()) fail(where, "expected a list of modules");
  SentenceTransformersConfig c;
  bool transformer = false, pooling = false;
  for (const json& m : modules) {
    if (!m.is_object() || !m.contains("type") || !m["type"].is_string())
      fail(where, "each module needs a \"type\" string");
    const std::string type = m["type"].get<std::string>();
    const std::string path = m.value("path", "");
    const std::string_view name = class_name(type);
    if (name == "Transformer" && !transformer && !pooling) {
      if (!path.empty()) fail(where, "the Transformer module must be the folder itself (path \"\"), not \"" + path + "\"");
      transformer = true;
    } else if (name == "Pooling" && transformer && !pooling) {
      read_pooling(root / path / "config.json", hidden_size, c);
      pooling = true;
    } else if (name == "Normalize" && pooling && !c.normalize) {
      c.normalize = true;  // no settings: sentence-transformers saves no folder for it
    } else {
      fail(where, "module \"" + type + "\" is not supported here (Ember runs Transformer, Pooling, then an "
                  "optional Normalize)");
    }
  }
  if (!transformer) fail(where, "lists no Transformer module");
  if (!pooling)
    fail(where, "lists no Pooling module (1_Pooling/config.json), so there is no rule for pooling the hidden states");
  read_prompts(root / "config_sentence_transformers.json", c);
  const fs::path sbert = root / "sentence_bert_config.json";
  if (fs::exists(sbert)) {
    const json j = read_json(sbert, "");
    if (!j.is_object()) fail(sbert.string(), "expected a JSON object");
    if (const auto it = j.find("max_seq_length"); it != j.end() && !it->is_null()) {
      if (!it->is_number_integer() || it->get<int64_t>() < 1)
        fail(sbert.string(), "\"max_seq_length\" must be a positive integer");
      c.max_seq_length = it->get<int64_t>();
    }
    if (j.value("do_lower_case", false))
      fail(sbert.string(), "\"do_lower_case\": true is not supported (Ember would embed the text as given)");
  }
  return c;
}

}  // namespace ember::model
