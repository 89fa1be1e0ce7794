#pragma once
// Where tests find ../shared, the repository's fixtures and the ember binary (set by tests/CMakeLists.txt).
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

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
// Every model of ../shared/models that generates text, sorted: the folders (not the embedding-only
// ones, which a sentence-transformers modules.json marks) and the GGUF files.
inline std::vector<std::string> generating_models() {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(shared_dir() + "/models"))
    if (e.is_directory() && fs::exists(e.path() / "config.json") && !fs::exists(e.path() / "modules.json"))
      out.push_back(e.path().string());
  for (const auto& e : fs::directory_iterator(shared_path("models", "gguf")))
    if (e.path().extension() == ".gguf") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace ember::test
