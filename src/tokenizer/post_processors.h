#pragma once
// tokenizer.json "post_processor" for single sequences: TemplateProcessing, ByteLevel (ids unchanged),
// BertProcessing, RobertaProcessing, Sequence.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_util.h"

namespace ember::tokenizer {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Adds the special tokens of a single sequence (called only when add_special_tokens is true).
  virtual void process(std::vector<int32_t>& ids) const = 0;
};

// nullptr for null; throws ember::Error naming an unsupported type.
std::unique_ptr<const PostProcessor> make_post_processor(const json& j, const std::string& where = "post_processor");

// Adds `before` in front of and `after` behind the ids.
class WrapProcessor final : public PostProcessor {
 public:
  WrapProcessor(std::vector<int32_t> before, std::vector<int32_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  void process(std::vector<int32_t>& ids) const override;

 private:
  std::vector<int32_t> before_, after_;
};

}  // namespace ember::tokenizer
