// write_model_folder SOURCE... DIR: a random-weight model folder at DIR from SOURCE folders or files
// (their .json files and chat_template.jinja, later ones replacing earlier ones; a .jinja file is
// taken as the chat template), with model.safetensors of config.json's shapes in its torch_dtype.
#include <cstdio>
#include <exception>
#include <filesystem>

#include "model_folder.h"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc < 3) {
    std::fprintf(stderr, "usage: write_model_folder SOURCE... DIR\n");
    return 2;
  }
  try {
    const fs::path dir = argv[argc - 1];
    const fs::path staging = dir.string() + ".sources";
    fs::remove_all(staging);
    fs::create_directories(staging);
    for (int i = 1; i < argc - 1; ++i) {
      const fs::path src = argv[i];
      if (fs::is_directory(src)) {
        for (const auto& e : fs::directory_iterator(src))
          if (e.path().extension() == ".json" || e.path().filename() == "chat_template.jinja")
            fs::copy_file(e.path(), staging / e.path().filename(), fs::copy_options::overwrite_existing);
      } else {
        const fs::path name = src.extension() == ".jinja" ? fs::path("chat_template.jinja") : src.filename();
        fs::copy_file(src, staging / name, fs::copy_options::overwrite_existing);
      }
    }
    std::fprintf(stderr, "writing random weights to %s ...\n", dir.c_str());
    ember::bench::write_random_model_folder(staging, dir);
    fs::remove_all(staging);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_model_folder: %s\n", e.what());
    return 1;
  }
  return 0;
}
