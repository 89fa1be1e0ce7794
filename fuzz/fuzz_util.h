#pragma once
// Helpers shared by the fuzz targets.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>

namespace ember::fuzz {

// A private folder for the files a parser insists on reading from disk; removed at exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ember-fuzz-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string write(const std::string& name, std::string_view bytes) const {
    const std::string p = path_ + "/" + name;
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) std::abort();
    return p;
  }

 private:
  std::string path_;
};

// Splits a fuzz input at its first NUL byte: JSON and templates never hold one, so seeds taken
// from ../shared are whole first parts and the fuzzer may learn to add a second part.
inline std::pair<std::string_view, std::string_view> split_at_nul(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t k = all.find('\0');
  if (k == std::string_view::npos) return {all, {}};
  return {all.substr(0, k), all.substr(k + 1)};
}

}  // namespace ember::fuzz
