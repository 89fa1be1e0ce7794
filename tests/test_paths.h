#pragma once
// Where tests find ../shared, the repository's fixtures and the ember binary (set by tests/CMakeLists.txt).
#include <string>

namespace ember::test {
inline std::string shared_dir() { return EMBER_SHARED_DIR; }
// shared_dir()/<folder>/<name>, appended in place: GCC 12 warns falsely (-Warray-bounds) about
// `std::string + literal + string` once inlined through a precompiled <string>.
inline std::string shared_path(const char* folder, const std::string& name) {
  std::string path = shared_dir();
  path.append("/").append(folder).append("/").append(name);
  return path;
}
inline std::string model_dir(const std::string& name) { return shared_path("models", name); }
inline std::string testdata(const std::string& rel) { return shared_path("testdata", rel); }
inline std::string ember_binary() { return EMBER_BINARY; }
// A file of the repository (a test fixture), by its path from the repository's root.
inline std::string source_path(const std::string& rel) {
  std::string path = EMBER_SOURCE_DIR;
  path.append("/").append(rel);
  return path;
}
}  // namespace ember::test
