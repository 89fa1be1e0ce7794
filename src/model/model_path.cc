#include "model/model_path.h"

#include <filesystem>
#include <system_error>

#include "base/error.h"
#include "model/gguf_config.h"

namespace ember::model {

void check_model_path(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status))
    fail(path, "does not exist (give a Hugging Face model folder or a .gguf file)");
  if (!std::filesystem::is_directory(status) && !is_gguf_path(path))
    fail(path, "is not a folder or a .gguf file (give a Hugging Face model folder or a .gguf file)");
}

}  // namespace ember::model
