// Speculative decoding against plain decoding on three tasks: (a) replies that repeat the prompt
// (chat-skills asked to repeat phrases), (b) a long story-656k continuation, (c) chat-skills
// questions. Prints decode tokens/s without and with speculation (adaptive), their ratio (the median
// of each repetition's), the acceptance rate and the tokens per verification pass; medians over
// --reps runs. Greedy, so both runs produce the same tokens (checked). --spec ngram: prompt lookup;
// --spec draft: a draft model, each task's model quantized at load (--draft-quantize, q4_0 by
// default). --pass-cost: what a pass of 1 to 9 tokens costs (warm, rolled back after each).
// --chat-model DIR: tasks (a) and (c) on another folder with chat-skills' replies, e.g. chat-skills
// padded to a memory-bound size by bench/pad_model.py (chat-skills itself sits in the CPU's cache).
//   spec_bench [--reps N] [--max-draft K] [--threads T] [--spec ngram|draft] [--draft-quantize TYPE] [--chat-model DIR]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/chat_prompt.h"
#include "engine/session.h"
#include "kernels/quant.h"
#include "model/model.h"

namespace {

using namespace ember;

struct Task {
  std::string name, model;
  std::vector<std::vector<int32_t>> prompts;
  int max_new;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5, threads = 2;
  int64_t max_draft = 8;
  std::string mode = "ngram", draft_quantize = "q4_0", chat_model;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--spec")) mode = argv[i + 1];
    else if (!std::strcmp(argv[i], "--draft-quantize")) draft_quantize = argv[i + 1];
    else if (!std::strcmp(argv[i], "--max-draft")) max_draft = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--chat-model")) chat_model = argv[i + 1];
  }
  const std::string models = std::string(EMBER_SHARED_DIR) + "/models/";
  if (chat_model.empty()) chat_model = models + "chat-skills";
  if (argc > 1 && !std::strcmp(argv[argc - 1], "--pass-cost")) {  // what a verification pass of n tokens costs
    for (const char* name : {"chat-skills", "story-656k"}) {
      auto model = model::Model::load(models + name, {.threads = threads, .progress = {}});
      auto cache = model->make_cache(1024);
      const size_t vocab = static_cast<size_t>(model->config().vocab_size);
      for (int64_t n = 1; n <= 9; ++n) {
        std::vector<double> t;
        // Passes one after another on the same 100-token sequence, each rolled back, as in speculation:
        // the weights are as warm as between two verification passes.
        model::KvSequence seq(*cache);
        std::vector<int32_t> ids(100, 5);
        model->forward(seq, ids);
        for (int r = 0; r < 200; ++r) {
          seq.truncate(100);
          std::vector<int32_t> feed(static_cast<size_t>(n), 7);
          std::vector<float> out(static_cast<size_t>(n) * vocab);
          model::ForwardItem it{.seq = &seq, .tokens = feed, .logits = out.data(), .all_logits = n > 1, .single_tail = n - 1};
          const auto t0 = std::chrono::steady_clock::now();
          model->forward(std::span<model::ForwardItem>(&it, 1));
          t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        std::printf("%s: pass of %lld tokens %.1f us\n", name, static_cast<long long>(n), 1e6 * median(t));
      }
    }
    return 0;
  }
  std::printf("%-34s %10s %10s %7s %16s %12s\n", "task", "plain t/s", "spec t/s", "ratio", "taken/guessed", "tokens/pass");
  for (const char* which : {"a", "b", "c"}) {
    const std::string dir = which[0] == 'b' ? models + "story-656k" : chat_model;
    auto model = model::Model::load(dir, {.threads = threads, .progress = {}});
    const auto tok = tokenizer::Tokenizer::from_folder(dir);
    std::shared_ptr<model::Model> draft;
    if (mode == "draft")
      draft = model::Model::load(dir, {.threads = threads, .progress = {}, .quantize = kernels::parse_quantization(draft_quantize)});
    std::vector<std::vector<int32_t>> prompts;
    std::string label;
    int max_new = 128;
    if (which[0] == 'b') {
      label = "(b) story-656k, 256 tokens";
      prompts.push_back(tok.encode("Once upon a time, there was a little girl named Lily. She loved to play outside.", true));
      max_new = 256;
    } else {
      engine::ChatPromptBuilder builder(tok, dir);
      engine::ChatOptions o;
      o.enable_thinking = false;
      const std::vector<std::string> asks =
          which[0] == 'a'
              ? std::vector<std::string>{"Repeat the phrase king milk 8 times.", "Say ladder guitar cloud 5 times.",
                                         "Repeat the phrase red apple tree 6 times.", "Say sun moon 9 times."}
              : std::vector<std::string>{"What is the capital of France?", "Add 63 and 20.", "Reverse the word summer.",
                                         "Count the letters in violin.", "Who are you?", "Hello!"};
      for (const auto& a : asks)
        prompts.push_back(builder.build(nlohmann::ordered_json::array({{{"role", "user"}, {"content", a}}}), o).ids);
      label = which[0] == 'a' ? "(a) chat-skills: repeat phrases" : "(c) chat-skills: questions";
    }
    auto params = engine::default_params(dir, model->config());
    params.do_sample = false;
    params.temperature = 0.0f;
    params.max_new_tokens = max_new;
    if (which[0] == 'b') params.eos_token_ids.clear();  // the whole 256 tokens, across the story's end
    std::vector<double> plain_rate, spec_rate;
    int64_t drafted = 0, accepted = 0, steps = 0, tokens = 0;
    for (int r = 0; r < reps; ++r) {
      for (int spec : {0, 1}) {
        engine::Session s(*model, tok);
        engine::SpecOptions so;
        so.mode = spec ? engine::parse_spec_mode(mode) : engine::SpecMode::kOff;
        so.max_draft = max_draft;
        so.draft_model = draft;
        s.set_speculation(so);
        int64_t n = 0;
        double secs = 0;
        std::vector<std::vector<int32_t>> outs;
        for (const auto& p : prompts) {
          s.reset();
          const engine::GenerationResult g = s.generate(p, params);
          n += g.decode_steps + g.accepted;
          secs += g.decode_seconds;
          outs.push_back(g.tokens);
          if (spec && r == 0) {
            drafted += g.drafted;
            accepted += g.accepted;
            steps += g.decode_steps;
            tokens += g.decode_steps + g.accepted;
          }
        }
        (spec ? spec_rate : plain_rate).push_back(static_cast<double>(n) / secs);
        static std::vector<std::vector<int32_t>> plain_outs;
        if (!spec) plain_outs = outs;
        else if (outs != plain_outs) {
          std::fprintf(stderr, "%s: speculative output differs from plain\n", label.c_str());
          return 1;
        }
      }
    }
    // The ratio is the median of each repetition's: its two runs back to back see the same machine
    // (this host's speed drifts by 10% within a minute, more than a ratio of medians can hide).
    std::vector<double> ratios;
    for (size_t r = 0; r < spec_rate.size(); ++r) ratios.push_back(spec_rate[r] / plain_rate[r]);
    const double p = median(plain_rate), q = median(spec_rate);
    char acc[48];
    std::snprintf(acc, sizeof acc, "%lld/%lld %.0f%%", static_cast<long long>(accepted), static_cast<long long>(drafted),
                  drafted ? 100.0 * static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0);
    std::printf("%-34s %10.0f %10.0f %6.2fx %16s %12.2f\n", label.c_str(), p, q, median(ratios), acc,
                steps ? static_cast<double>(tokens) / static_cast<double>(steps) : 0.0);
  }
  return 0;
}
