#include "model/load_tokenizer.h"

#include "model/gguf.h"
#include "model/gguf_config.h"
#include "model/gguf_tokenizer.h"
#include "model/model_path.h"

namespace ember::model {

tokenizer::Tokenizer load_tokenizer(const std::string& path) {
  check_model_path(path);
  if (is_gguf_path(path)) return gguf_tokenizer(GgufFile(path));
  return tokenizer::Tokenizer::from_folder(path);
}

}  // namespace ember::model
