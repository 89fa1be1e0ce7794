#include "model/architecture.h"

namespace ember::model {

namespace {
constexpr Architecture kArchitectures[] = {
    {"llama", false, false, false, false},
    {"mistral", false, false, true, false},
    {"qwen2", true, false, true, true},
    {"qwen3", false, true, true, true},
};
}  // namespace

const Architecture* find_architecture(std::string_view model_type) {
  for (const auto& a : kArchitectures)
    if (a.model_type == model_type) return &a;
  return nullptr;
}

std::string supported_architectures() {
  std::string s;
  for (const auto& a : kArchitectures) {
    if (!s.empty()) s += ", ";
    s += a.model_type;
  }
  return s;
}

}  // namespace ember::model
