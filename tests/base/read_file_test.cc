// read_file: the whole file, or an ember::Error naming the path.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/error.h"
#include "base/mapped_file.h"

namespace ember {
namespace {

std::string error_of(const std::string& path) {
  try {
    read_file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ReadFile, ReadsBytesAndNamesWhatItCannotRead) {
  const auto dir = std::filesystem::temp_directory_path() / ("ember_read_file_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "f.bin").string();
  std::ofstream(file, std::ios::binary) << std::string("a\0b", 3);
  EXPECT_EQ(read_file(file), std::string("a\0b", 3));
  // A directory opened as a stream reads nothing; it must not pass for an empty file.
  EXPECT_EQ(error_of(dir.string()), dir.string() + ": is a directory, not a file");
  EXPECT_EQ(error_of((dir / "missing").string()), (dir / "missing").string() + ": cannot open");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ember
