#pragma once
// A read-only memory mapping of a whole file (RAII). Model weights are used in place from it.
#include <cstddef>
#include <cstdint>
#include <string>

namespace ember {

class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);  // throws ember::Error naming the path
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops this process's copies of the pages (the data was copied elsewhere); a later read faults
  // them back in from the page cache, so the mapping stays valid.
  void release_pages() const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Drops the resident pages lying wholly inside [data, data + bytes) of a read-only file mapping, as
// MappedFile::release_pages does for the whole file.
void release_pages(const void* data, size_t bytes);

// Reads a whole (small) file into a string; throws ember::Error naming the path.
std::string read_file(const std::string& path);

}  // namespace ember
