#pragma once
// Where tests find ../shared and the ember binary (set by tests/CMakeLists.txt).
#include <string>

namespace ember::test {
inline std::string shared_dir() { return EMBER_SHARED_DIR; }
inline std::string model_dir(const std::string& name) { return shared_dir() + "/models/" + name; }
inline std::string testdata(const std::string& rel) { return shared_dir() + "/testdata/" + rel; }
inline std::string ember_binary() { return EMBER_BINARY; }
}  // namespace ember::test
