#pragma once
// What -m names: a Hugging Face model folder or a .gguf file. A path that is neither fails here,
// named, before a loader reports the first file it could not open inside it.
#include <string>

namespace ember::model {

// Throws ember::Error when `path` does not exist, or is a file but not a .gguf.
void check_model_path(const std::string& path);

}  // namespace ember::model
