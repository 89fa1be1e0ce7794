#include "tokenizer/post_processors.h"

namespace ember::tokenizer {

void WrapProcessor::process(std::vector<int32_t>& ids) const {
  ids.insert(ids.begin(), before_.begin(), before_.end());
  ids.insert(ids.end(), after_.begin(), after_.end());
}

namespace {

class SequenceProcessor final : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<const PostProcessor>> parts) : parts_(std::move(parts)) {}
  void process(std::vector<int32_t>& ids) const override {
    for (const auto& p : parts_) p->process(ids);
  }

 private:
  std::vector<std::unique_ptr<const PostProcessor>> parts_;
};

// TemplateProcessing "single": the ids before and after the $A sequence.
std::unique_ptr<const PostProcessor> make_template(const json& j, const std::string& where) {
  const json& single = field<json>(j, "single", where);
  const json specials = field_or<json>(j, "special_tokens", json::object(), where);
  std::vector<int32_t> before, after;
  bool seen_a = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const json& piece = single[i];
    const std::string w = where + ".single[" + std::to_string(i) + "]";
    if (piece.contains("Sequence")) {
      if (seen_a) fail("tokenizer.json", w + ": more than one sequence in the single template");
      seen_a = true;
      continue;
    }
    if (!piece.contains("SpecialToken")) fail("tokenizer.json", w + ": expected SpecialToken or Sequence");
    const auto name = field<std::string>(piece["SpecialToken"], "id", w + ".SpecialToken");
    if (!specials.contains(name))
      fail("tokenizer.json", w + ": special token \"" + name + "\" missing from special_tokens");
    const auto ids = field<std::vector<int32_t>>(specials[name], "ids", where + ".special_tokens[\"" + name + "\"]");
    auto& dst = seen_a ? after : before;
    dst.insert(dst.end(), ids.begin(), ids.end());
  }
  return std::make_unique<WrapProcessor>(std::move(before), std::move(after));
}

// BertProcessing / RobertaProcessing: [cls] A [sep], each given as [token, id].
std::unique_ptr<const PostProcessor> make_cls_sep(const json& j, const std::string& where) {
  auto id_of = [&](const char* key) {
    const json& v = field<json>(j, key, where);
    if (!v.is_array() || v.size() != 2 || !v[1].is_number_integer())
      fail("tokenizer.json", where + "." + key + ": expected [token, id]");
    return v[1].get<int32_t>();
  };
  return std::make_unique<WrapProcessor>(std::vector<int32_t>{id_of("cls")}, std::vector<int32_t>{id_of("sep")});
}

}  // namespace

std::unique_ptr<const PostProcessor> make_post_processor(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, where);
  if (type == "Sequence")
    return std::make_unique<SequenceProcessor>(make_sequence<PostProcessor>(
        j, "processors", where, [](const json& item, const std::string& w) { return make_post_processor(item, w); }));
  if (type == "ByteLevel") return std::make_unique<WrapProcessor>(std::vector<int32_t>{}, std::vector<int32_t>{});
  if (type == "TemplateProcessing") return make_template(j, where);
  if (type == "BertProcessing" || type == "RobertaProcessing") return make_cls_sep(j, where);
  unsupported(where, type);
}

}  // namespace ember::tokenizer
