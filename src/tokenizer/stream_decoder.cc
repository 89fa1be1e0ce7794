#include "base/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace ember::tokenizer {

namespace {
bool ends_with_replacement(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}
}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool skip_special_tokens)
    : tok_(tok), skip_(skip_special_tokens), groups_bytes_(tok.impl_->decoder && tok.impl_->decoder->groups_bytes()) {}

// The window holds context ids (already emitted, so that the decoder sees the text in mid-stream,
// e.g. Strip does not drop a leading space) followed by pending ids. Text is emitted once it extends
// the context's text and cannot change any more; the emitted ids become the next context.
std::string StreamDecoder::push(int32_t id) {
  const Tokenizer::Impl& im = *tok_.impl_;
  const std::string* token = im.token_of(id);
  if (!token) fail("decode", "token id " + std::to_string(id) + " is not in the vocabulary");
  if (skip_ && tok_.is_special(id)) return "";  // skipped tokens never change the text
  window_.push_back(id);
  unsigned char byte = 0;
  if (groups_bytes_ && parse_byte_token(*token, byte)) return "";  // the byte group may still grow
  std::string text = im.decode(window_, skip_);
  if (text.size() <= prefix_.size() || ends_with_replacement(text) || text.compare(0, prefix_.size(), prefix_) != 0)
    return "";
  std::string delta = text.substr(prefix_.size());
  std::vector<int32_t> context(window_.begin() + static_cast<std::ptrdiff_t>(read_), window_.end());
  std::string context_text = im.decode(context, skip_);
  if (!context_text.empty()) {
    window_ = std::move(context);
    prefix_ = std::move(context_text);
  } else {
    prefix_ = std::move(text);  // too little context: keep the older ids as well
  }
  read_ = window_.size();
  return delta;
}

std::string StreamDecoder::flush() {
  std::string delta;
  if (window_.size() > read_) {
    const std::string text = tok_.impl_->decode(window_, skip_);
    if (text.compare(0, prefix_.size(), prefix_) != 0)
      fail("StreamDecoder", "decoded text no longer extends the text already emitted");
    delta = text.substr(prefix_.size());
  }
  window_.clear();
  read_ = 0;
  prefix_.clear();
  return delta;
}

}  // namespace ember::tokenizer
