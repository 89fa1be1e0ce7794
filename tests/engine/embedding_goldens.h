#pragma once
// The embedding goldens (testdata/embeddings/*.json, every file), what their cases ask of an
// engine, the check of a vector against a case within the golden's own tolerance, and copies of
// their model folders with settings changed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "../model/config_testing.h"
#include "base/mapped_file.h"
#include "engine/embedder.h"

namespace ember::test {

struct EmbeddingGolden {
  std::string file;
  nlohmann::json j;
  std::string model() const { return model_dir(j["model"].get<std::string>()); }
};

inline std::vector<EmbeddingGolden> embedding_goldens() {
  std::vector<EmbeddingGolden> out;
  for (const std::string& f : golden_jsons("embeddings")) out.push_back({f, nlohmann::json::parse(read_file(f))});
  return out;
}

// A case as text (with its prompt_name) or, with `as_ids`, as its token ids.
inline engine::EmbeddingInput case_input(const nlohmann::json& c, bool as_ids) {
  engine::EmbeddingInput in;
  if (as_ids) {
    in.ids = c["ids"].get<std::vector<int32_t>>();
    return in;
  }
  in.text = c["text"].get<std::string>();
  if (!c["prompt_name"].is_null()) in.prompt_name = c["prompt_name"].get<std::string>();
  return in;
}

inline double cosine(std::span<const double> a, std::span<const double> b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

// `v` against case `c` of golden `g`: its dimension, cosine and largest element difference.
inline void expect_matches(const EmbeddingGolden& g, const nlohmann::json& c, std::span<const float> v,
                           const std::string& how) {
  const auto want = c["embedding"].get<std::vector<double>>();
  ASSERT_EQ(v.size(), want.size()) << g.file << " " << c["name"] << " " << how;
  const std::vector<double> got(v.begin(), v.end());
  double diff = 0;
  for (size_t i = 0; i < want.size(); ++i) diff = std::max(diff, std::abs(got[i] - want[i]));
  const auto& tol = g.j["tolerance"];
  EXPECT_GE(cosine(got, want), tol["cosine_min"].get<double>()) << g.file << " " << c["name"] << " " << how;
  EXPECT_LE(diff, tol["max_abs_diff"].get<double>()) << g.file << " " << c["name"] << " " << how;
}

// A folder of links to a shared model's files, with some files replaced or left out.
class FolderCopy {
 public:
  FolderCopy(const std::string& src, const std::vector<std::string>& leave_out = {}) {
    namespace fs = std::filesystem;
    dir_ = fs::temp_directory_path() / ("ember_embed_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(dir_);
    for (const auto& e : fs::recursive_directory_iterator(src)) {
      const fs::path rel = fs::relative(e.path(), src);
      if (std::find(leave_out.begin(), leave_out.end(), rel.string()) != leave_out.end()) continue;
      if (e.is_directory()) fs::create_directories(dir_ / rel);
      else fs::create_symlink(fs::absolute(e.path()), dir_ / rel);
    }
  }
  ~FolderCopy() { std::filesystem::remove_all(dir_); }
  void write(const std::string& rel, const nlohmann::json& j) const {
    std::filesystem::remove(dir_ / rel);
    std::filesystem::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel) << j.dump(2);
  }
  std::string str() const { return dir_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path dir_;
};

}  // namespace ember::test
