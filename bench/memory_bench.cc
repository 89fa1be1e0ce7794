// Peak resident memory of a BF16 model run from its Hugging Face folder: writes a random-weight
// model of a named shape (default smollm-360m, about 720 MB of BF16) as config.json +
// model.safetensors, then runs prefill and decode on it in a fresh process (this program again, so
// the writer's memory does not count) and compares that process's peak RSS with the file size plus
// the KV cache. Weights are used as stored (mapped, not upcast), so the peak should stay near the
// file size. Exit status 1 when the peak exceeds 1.2 x file + KV cache.
//
//   memory_bench [--shape smollm-360m] [--dir /tmp/ember-memory-bench] [--ctx 1024] [--prompt 256]
//                [--gen 64] [--threads 1]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/model.h"
#include "model/safetensors_writer.h"
#include "model/synthetic.h"
#include "model_folder.h"

namespace {

using namespace ember;
namespace fs = std::filesystem;

struct Args {
  std::string shape = "smollm-360m";
  std::string dir = "/tmp/ember-memory-bench";
  int64_t ctx = 1024, prompt = 256, gen = 64;
  int threads = 1;
};

// The measured process: load from disk, prefill, decode. Prints nothing on success.
int child(const Args& a) {
  auto m = model::Model::load(a.dir, {.threads = a.threads, .progress = {}});
  const auto cache = m->make_cache(a.ctx);
  model::KvSequence seq(*cache);
  std::mt19937 rng(1);
  std::vector<int32_t> prompt(static_cast<size_t>(a.prompt));
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(m->config().vocab_size));
  std::vector<float> logits = m->forward(seq, prompt);
  for (int64_t i = 0; i < a.gen; ++i) {
    const auto next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    logits = m->forward(seq, std::span<const int32_t>(&next, 1));
  }
  return 0;
}

int run(const Args& a, const char* self) {
  const model::ModelConfig c = model::synthetic_config(a.shape);
  const fs::path dir(a.dir);
  fs::create_directories(dir);
  std::fprintf(stderr, "writing a random BF16 %s to %s ...\n", a.shape.c_str(), a.dir.c_str());
  {
    kernels::ThreadPool pool(a.threads);
    const model::InMemoryWeights w = model::synthetic_weights(c, DType::BF16, 1, pool);
    bench::write_config(c, DType::BF16, dir / "config.json");
    model::write_safetensors(w, dir / "model.safetensors");
  }
  const auto file_bytes = static_cast<double>(fs::file_size(dir / "model.safetensors"));
  const double kv_bytes = static_cast<double>(a.ctx) * static_cast<double>(c.num_hidden_layers) * 2.0 *
                          static_cast<double>(c.kv_dim()) * sizeof(float);

  std::fprintf(stderr, "running %lld prompt + %lld generated tokens in a fresh process ...\n",
               static_cast<long long>(a.prompt), static_cast<long long>(a.gen));
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) throw Error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    const std::string ctx = std::to_string(a.ctx), pr = std::to_string(a.prompt), gen = std::to_string(a.gen),
                      th = std::to_string(a.threads);
    execl(self, self, "--child", a.dir.c_str(), ctx.c_str(), pr.c_str(), gen.c_str(), th.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  if (wait4(pid, &status, 0, &usage) < 0) throw Error(std::string("wait4: ") + std::strerror(errno));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw Error("the measured process failed");
  const double peak = static_cast<double>(usage.ru_maxrss) * 1024.0;  // Linux reports KiB
  const double limit = 1.2 * file_bytes + kv_bytes;
  const double mb = 1e6;
  std::printf("model %s BF16: safetensors %.1f MB, KV cache (%lld positions, f32) %.1f MB\n", a.shape.c_str(),
              file_bytes / mb, static_cast<long long>(a.ctx), kv_bytes / mb);
  std::printf("peak RSS %.1f MB = %.3f x file + KV (limit 1.2: %.1f MB); peak / file = %.3f; run %.1f s\n",
              peak / mb, (peak - kv_bytes) / file_bytes, limit / mb, peak / file_bytes, seconds);
  return peak <= limit ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a;
    if (argc == 7 && std::strcmp(argv[1], "--child") == 0) {
      a.dir = argv[2];
      a.ctx = std::stoll(argv[3]);
      a.prompt = std::stoll(argv[4]);
      a.gen = std::stoll(argv[5]);
      a.threads = std::stoi(argv[6]);
      return child(a);
    }
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string k = argv[i], v = argv[i + 1];
      if (k == "--shape") a.shape = v;
      else if (k == "--dir") a.dir = v;
      else if (k == "--ctx") a.ctx = std::stoll(v);
      else if (k == "--prompt") a.prompt = std::stoll(v);
      else if (k == "--gen") a.gen = std::stoll(v);
      else if (k == "--threads") a.threads = std::stoi(v);
      else throw Error("unknown option " + k + " (see the comment at the top of bench/memory_bench.cc)");
    }
    if (argc % 2 == 0) throw Error(std::string("option ") + argv[argc - 1] + " needs a value");
    return run(a, "/proc/self/exe");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "memory_bench: %s\n", e.what());
    return 2;
  }
}
