#include "sampling/generation_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "sampling/logits_processors.h"

namespace ember::sampling {
namespace {

using json = nlohmann::json;

// Reads typed fields of one JSON object; null counts as absent, as in transformers.
class FieldReader {
 public:
  FieldReader(const json& j, std::string file) : j_(j), file_(std::move(file)) {}

  const json* find(const char* key) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  [[noreturn]] void bad(const char* key, const char* want) const {
    fail(file_, std::string("field \"") + key + "\" must be " + want);
  }
  void get(const char* key, bool& out) const {
    if (const json* v = find(key)) {
      if (!v->is_boolean()) bad(key, "a boolean");
      out = v->get<bool>();
    }
  }
  void get(const char* key, float& out) const {
    if (const json* v = find(key)) {
      if (!v->is_number()) bad(key, "a number");
      out = v->get<float>();
    }
  }
  int32_t as_int(const char* key, const json& v) const {
    if (!v.is_number_integer()) bad(key, "an integer");
    int64_t x = v.get<int64_t>();
    if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max())
      bad(key, "a 32-bit integer");
    return static_cast<int32_t>(x);
  }
  void get(const char* key, int32_t& out) const {
    if (const json* v = find(key)) out = as_int(key, *v);
  }
  void get(const char* key, std::optional<int32_t>& out) const {
    if (const json* v = find(key)) out = as_int(key, *v);
  }
  // An int or a list of ints (eos_token_id).
  void get(const char* key, std::vector<int32_t>& out) const {
    const json* v = find(key);
    if (!v) return;
    out.clear();
    if (v->is_array()) {
      for (const json& e : *v) {
        if (!e.is_number_integer()) bad(key, "an integer or a list of integers");
        out.push_back(as_int(key, e));
      }
    } else {
      if (!v->is_number_integer()) bad(key, "an integer or a list of integers");
      out.push_back(as_int(key, *v));
    }
  }
  // A string or a list of strings (stop_strings).
  void get(const char* key, std::vector<std::string>& out) const {
    const json* v = find(key);
    if (!v) return;
    out.clear();
    if (v->is_string()) {
      out.push_back(v->get<std::string>());
      return;
    }
    if (!v->is_array()) bad(key, "a string or a list of strings");
    for (const json& e : *v) {
      if (!e.is_string()) bad(key, "a string or a list of strings");
      out.push_back(e.get<std::string>());
    }
  }
  void get(const char* key, EarlyStopping& out) const {
    const json* v = find(key);
    if (!v) return;
    if (v->is_boolean()) {
      out = v->get<bool>() ? EarlyStopping::kTrue : EarlyStopping::kFalse;
    } else if (v->is_string() && v->get<std::string>() == "never") {
      out = EarlyStopping::kNever;
    } else {
      bad(key, "true, false or \"never\"");
    }
  }

 private:
  const json& j_;
  std::string file_;
};

[[noreturn]] void invalid(const std::string& what) { fail("sampling parameters", what); }

}  // namespace

void SamplingParams::validate(size_t vocab_size) const {
  auto finite = [](float x) { return std::isfinite(x); };
  if (!finite(temperature) || temperature < 0) invalid("temperature must be >= 0");
  if (top_k < 0) invalid("top_k must be >= 0");
  if (!(top_p > 0 && top_p <= 1)) invalid("top_p must be in (0, 1]");
  if (!(min_p >= 0 && min_p <= 1)) invalid("min_p must be in [0, 1]");
  if (!(typical_p > 0 && typical_p <= 1)) invalid("typical_p must be in (0, 1]");
  if (!finite(repetition_penalty) || repetition_penalty <= 0) invalid("repetition_penalty must be > 0");
  if (!finite(frequency_penalty)) invalid("frequency_penalty must be finite");
  if (!finite(presence_penalty)) invalid("presence_penalty must be finite");
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) invalid("logit_bias token id " + std::to_string(id) + " is negative");
    if (std::isnan(bias)) invalid("logit_bias of token " + std::to_string(id) + " is NaN");
    if (vocab_size > 0) check_token_id(id, vocab_size, "sampling parameters: logit_bias");
  }
  if (max_new_tokens && *max_new_tokens < 0) invalid("max_new_tokens must be >= 0");
  if (max_length && *max_length < 0) invalid("max_length must be >= 0");
  for (const std::string& s : stop_strings)
    if (s.empty()) invalid("a stop string is empty");
  if (num_beams < 1) invalid("num_beams must be >= 1");
  if (!finite(length_penalty)) invalid("length_penalty must be finite");
  if (num_return_sequences < 1) invalid("num_return_sequences must be >= 1");
  if (num_return_sequences > num_beams && num_beams > 1)
    invalid("num_return_sequences must be <= num_beams");
  if (top_logprobs < 0) invalid("top_logprobs must be >= 0");
}

SamplingParams from_generation_config(const std::string& model_dir) {
  SamplingParams p;
  const std::filesystem::path path = std::filesystem::path(model_dir) / "generation_config.json";
  std::ifstream in(path);
  if (!in) {
    if (std::filesystem::exists(path)) fail(path.string(), "cannot be read");
    return p;
  }
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    fail(path.string(), std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object()) fail(path.string(), "must hold a JSON object");
  FieldReader r(j, path.string());
  r.get("do_sample", p.do_sample);
  r.get("temperature", p.temperature);
  r.get("top_k", p.top_k);
  r.get("top_p", p.top_p);
  r.get("min_p", p.min_p);
  r.get("typical_p", p.typical_p);
  r.get("repetition_penalty", p.repetition_penalty);
  r.get("max_new_tokens", p.max_new_tokens);
  r.get("max_length", p.max_length);
  r.get("eos_token_id", p.eos_token_ids);
  r.get("stop_strings", p.stop_strings);
  r.get("num_beams", p.num_beams);
  r.get("length_penalty", p.length_penalty);
  r.get("early_stopping", p.early_stopping);
  r.get("num_return_sequences", p.num_return_sequences);
  try {
    p.validate();
  } catch (const Error& e) {
    fail(path.string(), e.what());
  }
  return p;
}

void merge_eos(SamplingParams& params, std::span<const int32_t> more) {
  for (int32_t id : more) {
    auto& ids = params.eos_token_ids;
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
}

}  // namespace ember::sampling
