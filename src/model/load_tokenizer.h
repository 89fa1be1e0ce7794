#pragma once
// A model's tokenizer from the path -m names: every command and the library get it here.
#include <string>

#include "tokenizer/tokenizer.h"

namespace ember::model {

// A Hugging Face folder: its tokenizer.json and tokenizer_config.json. A *.gguf file: the tokenizer
// its metadata describes (model/gguf_tokenizer.h), chat template included.
tokenizer::Tokenizer load_tokenizer(const std::string& path);

}  // namespace ember::model
