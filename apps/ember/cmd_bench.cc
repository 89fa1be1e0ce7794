// ember bench: prefill and decode speed, time to first token, peak memory, and the decode roofline
// (weight + KV bytes per token over the read bandwidth measured beside each repetition; a mixture of
// experts counts only the experts a token reads) of a model folder or a synthetic shape.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "apps/ember/commands.h"
#include "apps/ember/flag_range.h"
#include "apps/ember/model_options.h"
#include "apps/ember/spec_options.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/format.h"
#include "base/resident_memory.h"
#include "engine/session.h"
#include "kernels/membw.h"
#include "kernels/quant.h"
#include "kernels/quant_mix.h"
#include "model/load_tokenizer.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "sampling/vec.h"

namespace ember::app {

namespace {

struct BenchArgs {
  std::string model_dir, synthetic, dtype, kv_dtype = kernels::kv_type_name(model::kKvTypeDefault);
  std::string act_dtype = "f32";
  int threads = 0, reps = 3;
  int64_t prompt = 512, gen = 128;
  bool json = false, warmup = true;
  SpecFlags spec;
  std::string spec_text;  // --spec: the prompt text of the speculative runs ("": the random prompt)
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The values times `scale`, one decimal each, separated by spaces.
std::string one_decimal(const std::vector<double>& v, double scale = 1.0) {
  std::string out;
  for (double x : v) {
    char b[32];
    std::snprintf(b, sizeof b, "%s%.1f", out.empty() ? "" : " ", x * scale);
    out += b;
  }
  return out;
}

// --spec: greedy decode of `gen` tokens through a Session without and with speculation, `reps` times
// each (alternating): the same tokens, the decode rates' medians, the guesses taken.
struct SpecBench {
  double plain = 0, spec = 0, acceptance = 0, tokens_per_pass = 0;
  int64_t drafted = 0, accepted = 0;
};

SpecBench run_spec_bench(model::Model& m, const tokenizer::Tokenizer& tok, const std::vector<int32_t>& prompt,
                         int64_t gen, int reps, const engine::SpecOptions& spec) {
  std::vector<double> plain, fast;
  SpecBench b;
  int64_t steps = 0, tokens = 0;
  for (int r = 0; r < reps; ++r) {
    std::vector<int32_t> want;
    for (const bool on : {false, true}) {
      engine::Session s(m, tok, static_cast<int64_t>(prompt.size()) + gen + 1);
      if (on) s.set_speculation(spec);
      sampling::SamplingParams p;
      p.temperature = 0.0f;
      p.max_new_tokens = gen;
      const engine::GenerationResult g = s.generate(prompt, p);
      const double rate = g.decode_seconds > 0 ? static_cast<double>(g.decode_steps + g.accepted) / g.decode_seconds : 0.0;
      (on ? fast : plain).push_back(rate);
      if (!on) want = g.tokens;
      else if (g.tokens != want) fail("bench", "speculative decoding gave other tokens than plain decoding");
      if (on) {
        b.drafted += g.drafted;
        b.accepted += g.accepted;
        steps += g.decode_steps;
        tokens += g.decode_steps + g.accepted;
      }
    }
  }
  b.plain = median(plain);
  b.spec = median(fast);
  b.acceptance = b.drafted ? static_cast<double>(b.accepted) / static_cast<double>(b.drafted) : 0.0;
  b.tokens_per_pass = steps ? static_cast<double>(tokens) / static_cast<double>(steps) : 0.0;
  return b;
}

// Unmeasured decode steps of the warm-up: enough for the thread tuner to have tried both widths on
// decode-sized steps (WidthTuner), whose probes would otherwise fall in the first repetition.
constexpr int64_t kWarmupDecode = 8;

// Read bandwidth measured in a child process, so that its 1 GiB buffer never counts towards this
// process's peak RSS (which should be the model's). The child runs only the probe on its own threads
// (glibc keeps malloc usable in a child of a threaded process); this process waits for it.
double child_read_bandwidth(int threads) {
  int fds[2];
  if (::pipe(fds) != 0) fail("bench", "cannot create a pipe for the bandwidth measurement");
  const pid_t pid = ::fork();
  if (pid < 0) fail("bench", "cannot fork for the bandwidth measurement");
  if (pid == 0) {
    ::close(fds[0]);
    double bw = 0.0;
    try {
      kernels::ThreadPool pool(threads);
      bw = kernels::read_bandwidth(pool);
    } catch (...) {
    }
    const ssize_t w = ::write(fds[1], &bw, sizeof bw);
    ::_exit(w == static_cast<ssize_t>(sizeof bw) ? 0 : 1);
  }
  ::close(fds[1]);
  double bw = 0.0;
  const ssize_t r = ::read(fds[0], &bw, sizeof bw);
  ::close(fds[0]);
  ::waitpid(pid, nullptr, 0);
  if (r != static_cast<ssize_t>(sizeof bw) || !(bw > 0.0)) fail("bench", "the bandwidth measurement failed");
  return bw;
}

int run_bench(const BenchArgs& a) {
  using clock = std::chrono::steady_clock;
  auto note = [](const std::string& s) { std::fprintf(stderr, "[bench] %s\n", s.c_str()); };
  if (a.model_dir.empty() == a.synthetic.empty()) fail("bench", "give exactly one of -m DIR and --synthetic SHAPE");
  if (a.prompt < 1 || a.gen < 1 || a.reps < 1) fail("bench", "-p, -n and --reps must be at least 1");

  model::LoadOptions opt;
  opt.threads = a.threads;
  opt.progress = note;
  opt.kv_dtype = model::parse_kv_dtype(a.kv_dtype);
  opt.bf16_activations = bf16_activations(a.act_dtype);
  // Synthetic weights are made in the float type (bf16 unless --dtype says); a folder's or file's
  // plain matrices keep their stored type unless --dtype converts them at load.
  DType float_type = DType::BF16;
  if (auto t = parse_lower_dtype(a.dtype)) {
    if (a.model_dir.empty()) float_type = *t;
    else opt.weight_dtype = *t;
  } else if (!a.dtype.empty()) {
    opt.quantize = kernels::parse_quantization(a.dtype);  // the --dtype check admitted only these names
  }

  const auto t_load = clock::now();
  std::unique_ptr<model::Model> m = a.synthetic.empty() ? model::Model::load(a.model_dir, opt)
                                                        : model::make_synthetic_model(a.synthetic, float_type, opt);
  const double load_s = seconds_since(t_load);
  const model::ModelConfig& c = m->config();
  const int threads = m->pool().size();
  const std::string weights = m->weight_type();
  const double load_peak = peak_resident_mib();
  const bool reset = reset_peak_resident();

  // Decode reads every weight once plus the KV cache so far (mean context over the run), as each layer
  // reads it: within its window, and a layer sharing another's keys reads them again.
  const double kv_bytes = model::KvCache::bytes_read_per_token(c, m->kv_dtype(), a.prompt + a.gen / 2.0);
  // A hybrid's recurrent state (conv windows and delta-rule states) is read and rewritten each step.
  const int64_t state_bytes = model::KvCache::state_bytes(c);
  const double bytes_per_token = static_cast<double>(m->decode_weight_bytes()) + kv_bytes + static_cast<double>(state_bytes);

  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(c.vocab_size - 1));
  std::vector<int32_t> prompt(static_cast<size_t>(a.prompt));
  for (auto& t : prompt) t = tok(rng);

  std::vector<double> prefill, decode, ttft;
  // The roofline of each repetition is the bandwidth measured beside it: probes after the warm-up and
  // after each repetition, a repetition's the larger of the two around it. On a shared machine the
  // bandwidth left to this process changes within seconds (a 2-vCPU cloud machine: 35 to 67 GB/s at
  // two threads), so one figure for the whole run misjudges the repetitions run while it differed.
  std::vector<double> probes;
  auto probe = [&] {
    note("measuring memory read bandwidth (" + std::to_string(threads) + " threads, in a child process)");
    probes.push_back(child_read_bandwidth(threads));
  };
  auto cache = m->make_cache(a.prompt + a.gen);
  // As llama-bench does before its repetitions: one prompt and a few decode steps, not measured
  // (first touch of buffers, the thread tuner's first probes).
  if (a.warmup) {
    note("warm-up: prefill " + std::to_string(a.prompt) + " tokens, decode " + std::to_string(std::min(a.gen, kWarmupDecode)));
    model::KvSequence seq(*cache);
    std::vector<float> logits = m->forward(seq, prompt);
    for (int64_t i = 0; i < std::min(a.gen, kWarmupDecode); ++i) {
      const int32_t next = sampling::vec::argmax(logits);
      logits = m->forward(seq, std::span<const int32_t>(&next, 1));
    }
  }
  probe();
  for (int r = 0; r < a.reps; ++r) {
    note("rep " + std::to_string(r + 1) + "/" + std::to_string(a.reps) + ": prefill " + std::to_string(a.prompt) + " tokens");
    model::KvSequence seq(*cache);
    auto t0 = clock::now();
    std::vector<float> logits = m->forward(seq, prompt);
    // Greedy, as a server picks it (the sampler's vector argmax: a scalar one over 128k logits was 1.3%
    // of a 1B q4_k_m decode step).
    int32_t next = sampling::vec::argmax(logits);
    const double tp = seconds_since(t0);
    ttft.push_back(tp);
    prefill.push_back(static_cast<double>(a.prompt) / tp);
    note("rep " + std::to_string(r + 1) + ": decode " + std::to_string(a.gen) + " tokens");
    t0 = clock::now();
    for (int64_t i = 0; i < a.gen; ++i) {
      logits = m->forward(seq, std::span<const int32_t>(&next, 1));
      next = sampling::vec::argmax(logits);
    }
    decode.push_back(static_cast<double>(a.gen) / seconds_since(t0));
    probe();
  }
  // The peak of the model alone, before a draft model loads.
  const double run_peak = peak_resident_mib(), rss = resident_mib();
  std::vector<double> rep_bw, rep_fraction;
  for (int r = 0; r < a.reps; ++r) {
    rep_bw.push_back(std::max(probes[static_cast<size_t>(r)], probes[static_cast<size_t>(r) + 1]));
    rep_fraction.push_back(decode[static_cast<size_t>(r)] * bytes_per_token / rep_bw.back());
  }
  const double bw = median(rep_bw), roofline = bw / bytes_per_token, fraction = median(rep_fraction);
  std::optional<SpecBench> sb;
  const std::string spec_mode = a.spec.effective_mode();
  if (spec_mode != "off") {
    if (a.model_dir.empty()) fail("bench", "--spec needs a model (-m): its tokenizer runs the generation rules");
    const tokenizer::Tokenizer tk = model::load_tokenizer(a.model_dir);
    ModelOptions load;
    load.dir = a.model_dir;
    load.threads = a.threads;
    load.kv_dtype = a.kv_dtype;
    load.act_dtype = a.act_dtype;
    const engine::SpecOptions spec = a.spec.resolve(*m, tk, load);
    if (spec.mode != engine::SpecMode::kOff) {
      const std::vector<int32_t> sp = a.spec_text.empty() ? prompt : tk.encode(a.spec_text, true);
      note("speculation: greedy decode of " + std::to_string(a.gen) + " tokens without and with --spec " + spec_mode);
      sb = run_spec_bench(*m, tk, sp, a.gen, a.reps, spec);
    }
  }
  const double pf = median(prefill), dc = median(decode), tt = median(ttft);
  const double peak = std::max(load_peak, run_peak);

  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = a.synthetic.empty() ? a.model_dir : "synthetic:" + a.synthetic;
    j["dtype"] = weights;
    j["kv_dtype"] = a.kv_dtype;
    j["act_dtype"] = a.act_dtype;
    j["threads"] = threads;
    j["isa"] = kernels::isa_name(kernels::best_isa());
    j["prompt_tokens"] = a.prompt;
    j["gen_tokens"] = a.gen;
    j["reps"] = a.reps;
    j["warmup"] = a.warmup;
    j["load_s"] = load_s;
    j["prefill_tok_s"] = prefill;
    j["decode_tok_s"] = decode;
    j["ttft_s"] = ttft;
    j["prefill_tok_s_median"] = pf;
    j["decode_tok_s_median"] = dc;
    j["ttft_s_median"] = tt;
    j["read_bandwidth_gb_s"] = bw / 1e9;  // the median of the repetitions' rooflines
    std::vector<double> probes_gb;
    for (double x : probes) probes_gb.push_back(x / 1e9);
    j["read_bandwidth_probes_gb_s"] = probes_gb;  // after the warm-up and after each repetition
    j["decode_bytes_per_token"] = bytes_per_token;
    j["decode_kv_bytes_per_token"] = kv_bytes;  // what attention reads (in decode_bytes_per_token)
    // What a token of context holds in the cache: only the layers that compute keys (Gemma 4 shares them).
    j["kv_cache_bytes_per_position"] = model::KvCache::bytes_per_token(c, m->kv_dtype());
    j["state_bytes_per_sequence"] = state_bytes;  // 0: no linear-attention layers
    j["experts"] = c.moe.num_experts;  // 0: dense
    j["experts_per_token"] = c.moe.num_experts > 0 ? c.moe.experts_per_tok : 0;
    j["decode_roofline_tok_s"] = roofline;
    j["decode_roofline_fraction"] = fraction;  // the median of the repetitions' own
    j["decode_roofline_fractions"] = rep_fraction;
    j["peak_rss_mib"] = peak;
    if (reset) j["peak_rss_inference_mib"] = run_peak;
    j["rss_mib"] = rss;
    if (sb) {
      j["spec"] = spec_mode;
      j["spec_decode_tok_s_plain"] = sb->plain;  // both through a Session, greedy
      j["spec_decode_tok_s"] = sb->spec;
      j["spec_speedup"] = sb->plain > 0 ? sb->spec / sb->plain : 0.0;
      j["spec_drafted"] = sb->drafted;
      j["spec_accepted"] = sb->accepted;
      j["spec_acceptance_rate"] = sb->acceptance;
      j["spec_tokens_per_pass"] = sb->tokens_per_pass;
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("model %s  dtype %s  kv %s  activations %s  threads %d  isa %s  (median of %d reps; load %.1f s)\n",
                a.synthetic.empty() ? a.model_dir.c_str() : ("synthetic:" + a.synthetic).c_str(), weights.c_str(),
                a.kv_dtype.c_str(), a.act_dtype.c_str(), threads, kernels::isa_name(kernels::best_isa()), a.reps, load_s);
    std::printf("%-28s %12s\n", "metric", "value");
    std::printf("%-28s %12.2f\n", ("prefill tok/s (p=" + std::to_string(a.prompt) + ")").c_str(), pf);
    std::printf("%-28s %12.2f\n", ("decode tok/s (n=" + std::to_string(a.gen) + ")").c_str(), dc);
    // The repetitions themselves, and how far the farthest is from the median: a steady run is within 10%.
    auto spread = [](const std::vector<double>& v, double mid) {
      double far = 0;
      for (double x : v) far = std::max(far, std::fabs(x - mid) / mid);
      char b[32];
      std::snprintf(b, sizeof b, " (+-%.0f%%)", 100 * far);
      return one_decimal(v) + b;
    };
    std::printf("%-28s %s\n", "prefill reps tok/s", spread(prefill, pf).c_str());
    std::printf("%-28s %s\n", "decode reps tok/s", spread(decode, dc).c_str());
    std::printf("%-28s %12.3f\n", "time to first token s", tt);
    std::printf("%-28s %12.2f\n", "read bandwidth GB/s", bw / 1e9);
    std::printf("%-28s %s\n", "bandwidth probes GB/s", one_decimal(probes, 1e-9).c_str());
    std::printf("%-28s %12.1f\n", "decode MB read per token", bytes_per_token / 1e6);
    std::printf("%-28s %12.1f\n", "KV KB per context token",
                static_cast<double>(model::KvCache::bytes_per_token(c, m->kv_dtype())) / 1e3);
    if (state_bytes > 0) std::printf("%-28s %12.2f\n", "recurrent state MB per seq", static_cast<double>(state_bytes) / 1e6);
    if (c.moe.num_experts > 0)
      std::printf("%-28s %12s\n", "experts read per token",
                  (std::to_string(c.moe.experts_per_tok) + " of " + std::to_string(c.moe.num_experts)).c_str());
    std::printf("%-28s %12.2f\n", "decode roofline tok/s", roofline);
    // Each repetition against the bandwidth measured beside it; the median. Above 100%: the weights
    // were read from the caches, not from DRAM as the roofline assumes.
    std::printf("%-28s %11.1f%%%s\n", "decode / roofline", 100.0 * fraction,
                fraction > 1 ? " (in cache, above the DRAM roofline)" : "");
    std::printf("%-28s %s\n", "decode / roofline reps %", one_decimal(rep_fraction, 100).c_str());
    std::printf("%-28s %12.0f\n", "peak RSS MiB", peak);
    if (reset) std::printf("%-28s %12.0f\n", "peak RSS after load MiB", run_peak);
    std::printf("%-28s %12.0f\n", "RSS MiB (end)", rss);
    if (sb) {
      std::printf("%-28s %12.2f\n", "session decode tok/s", sb->plain);
      std::printf("%-28s %12.2f\n", ("--spec " + spec_mode + " decode tok/s").c_str(), sb->spec);
      std::printf("%-28s %11.2fx\n", "speculation speed-up", sb->plain > 0 ? sb->spec / sb->plain : 0.0);
      std::printf("%-28s %11.1f%%\n", "guesses taken", 100.0 * sb->acceptance);
      std::printf("%-28s %12.2f\n", "tokens per pass", sb->tokens_per_pass);
    }
  }
  return 0;
}

}  // namespace

Run add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Measure prefill/decode speed, time to first token and memory");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("-m,--model", a->model_dir, "Model folder");
  std::string shapes;
  for (const auto& s : model::synthetic_shape_names()) shapes += (shapes.empty() ? "" : ", ") + s;
  cmd->add_option("--synthetic", a->synthetic, "Random-weight model of a named shape: " + shapes);
  std::vector<const char*> quantized;  // what --quantize takes, but "none"
  for (const char* q : kernels::quantize_names())
    if (std::string_view(q) != "none") quantized.push_back(q);
  std::vector<std::string> weight_types(dtype_lower_names().begin(), dtype_lower_names().end());
  weight_types.insert(weight_types.end(), quantized.begin(), quantized.end());
  cmd->add_option("--dtype", a->dtype,
                  "Weights: " + one_of(dtype_lower_names()) + " (plain; synthetic default bf16, a model's plain matrices "
                  "converted at load) or quantized at load: " + one_of(quantized))
      ->check(CLI::IsMember(weight_types));
  add_kv_dtype_option(*cmd, a->kv_dtype);
  add_act_dtype_option(*cmd, a->act_dtype);
  add_threads_option(*cmd, a->threads);
  cmd->add_option("-p,--prompt", a->prompt, "Prompt tokens for prefill")->check(in_range<int64_t>(1, 1 << 20));
  cmd->add_option("-n,--gen", a->gen, "Tokens to decode")->check(in_range<int64_t>(1, 1 << 20));
  cmd->add_option("--reps", a->reps, "Repetitions (the median is reported)")->check(in_range(1, 1000));
  cmd->add_flag("--json", a->json, "One JSON object on stdout");
  a->spec.add_to(*cmd);
  cmd->add_option("--spec-text", a->spec_text,
                  "With --spec: the prompt text of the speculative runs (default: the random prompt's tokens)");
  cmd->add_flag("!--no-warmup", a->warmup, "Skip the unmeasured warm-up run (one prompt, a few decode steps) before the repetitions");
  return [a] { return run_bench(*a); };
}

}  // namespace ember::app
