// Constrained decoding speed: the token mask per step for five JSON schemas on the Qwen3 vocabulary
// (151,669 tokens), walked by a random decoder (a uniformly random allowed token each step, as a
// random-weight model would), and the decode tokens/s of a synthetic 1B model (llama-1b shape with
// the Llama-3.2 vocabulary: llama-1b-128k) with and without a schema. A plain program: its numbers are printed.
//   grammar_bench [--steps N] [--decode-tokens N] [--threads T] [--no-model] [--shared DIR] [--schemas DIR]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/grammar_constraint.h"
#include "engine/session.h"
#include "sampling/json_schema.h"
#include "sampling/grammar_matcher.h"
#include "model/synthetic.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace ember;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string g_schemas = EMBER_SCHEMA_CORPUS;  // set once by main (--schemas)

std::shared_ptr<const grammar::Grammar> schema_grammar(const std::string& name) {
  const std::string path = g_schemas + "/" + name + ".json";
  return std::make_shared<const grammar::Grammar>(
      grammar::Grammar::from_gbnf(grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(read_text(path)))));
}

struct MaskStats {
  std::vector<double> ms;
  size_t tokens = 0, sequences = 0;
  size_t first_sequence_tokens = 0;  // the masks computed with nothing cached yet come first
};

// Random decoding under the grammar: mask, pick an allowed token, feed it; a complete sentence ends
// (as an end token would) with probability 1/2 per step. The sequences share one mask cache, as the
// requests of one schema do in a server.
void random_decode(const std::shared_ptr<const grammar::Grammar>& g,
                   const std::shared_ptr<const grammar::Vocabulary>& v, size_t steps, MaskStats& st) {
  std::mt19937_64 rng(7);
  std::vector<int32_t> allowed;
  const auto cache = std::make_shared<grammar::MaskCache>();
  while (st.tokens < steps) {
    if (st.sequences == 1) st.first_sequence_tokens = st.tokens;
    grammar::Matcher m(g, v, cache);
    ++st.sequences;
    for (size_t i = 0; i < 400 && st.tokens < steps; ++i) {
      const auto t0 = Clock::now();
      const std::vector<uint64_t>& mask = m.allowed();
      st.ms.push_back(ms_since(t0));
      ++st.tokens;
      allowed.clear();
      for (size_t w = 0; w < mask.size(); ++w)
        for (uint64_t bits = mask[w]; bits; bits &= bits - 1)
          allowed.push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
      if (m.complete() && (allowed.empty() || rng() % 2 == 0)) break;
      if (allowed.empty()) break;
      m.accept_token(allowed[rng() % allowed.size()]);
    }
  }
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines appear as they are measured
  size_t steps = 300, decode_tokens = 48;
  int threads = 0;
  bool model = true;
  std::string shared = EMBER_SHARED_DIR;  // its tokenizers/qwen3 and tokenizers/llama-3.2
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::stoul(argv[++i]);
    else if (!std::strcmp(argv[i], "--decode-tokens") && i + 1 < argc) decode_tokens = std::stoul(argv[++i]);
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-model")) model = false;
    else if (!std::strcmp(argv[i], "--shared") && i + 1 < argc) shared = argv[++i];
    else if (!std::strcmp(argv[i], "--schemas") && i + 1 < argc) g_schemas = argv[++i];
  }
  auto t0 = Clock::now();
  const auto qwen = tokenizer::Tokenizer::from_folder(shared + "/tokenizers/qwen3");
  t0 = Clock::now();
  const auto vocab = engine::grammar_vocabulary(qwen);
  std::printf("Qwen3 vocabulary: %d tokens, trie of %zu nodes built in %.0f ms\n", qwen.vocab_size(), vocab->nodes(),
              ms_since(t0));
  std::printf("mean ms: over all sequences (sharing one mask cache); cold ms: the first sequence's mean\n");
  std::printf("%-18s %8s %5s %9s %9s %9s %9s %9s %9s\n", "schema", "tokens", "seqs", "mean ms", "cold ms", "p50 ms",
              "p99 ms", "max ms", "first ms");
  for (const char* name : {"person", "openai_strict", "array_of_objects", "nested", "unicode_strings"}) {
    const auto g = schema_grammar(name);
    MaskStats st;
    random_decode(g, vocab, steps, st);
    if (st.sequences == 1) st.first_sequence_tokens = st.tokens;
    double sum = 0, cold = 0;
    for (size_t i = 0; i < st.ms.size(); ++i) (i < st.first_sequence_tokens ? cold : sum) += st.ms[i];
    sum += cold;
    std::printf("%-18s %8zu %5zu %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n", name, st.tokens, st.sequences,
                sum / static_cast<double>(st.ms.size()), cold / static_cast<double>(st.first_sequence_tokens),
                percentile(st.ms, 0.5), percentile(st.ms, 0.99), percentile(st.ms, 1.0), st.ms.front());
  }
  if (!model) return 0;

  const auto llama_tok = tokenizer::Tokenizer::from_folder(shared + "/tokenizers/llama-3.2");
  model::LoadOptions opt;
  opt.threads = threads;
  auto m = model::make_synthetic_model("llama-1b-128k", DType::BF16, opt);
  const auto constraint = engine::GrammarConstraint{schema_grammar("openai_strict"), engine::grammar_vocabulary(llama_tok)};
  const std::vector<int32_t> prompt = llama_tok.encode("Answer in JSON: what is 2 + 2?", true);
  for (int with : {0, 1, 0, 1}) {
    engine::Session session(*m, llama_tok, 512);
    engine::GenerationRequest req;
    req.prompt = prompt;
    req.params.do_sample = true;
    req.params.temperature = 1.0f;
    req.params.seed = 3;
    req.params.max_new_tokens = static_cast<int32_t>(decode_tokens);
    req.params.eos_token_ids.clear();  // run the full count either way
    if (with) req.grammar = constraint;
    const engine::GenerationResult r = session.generate(std::move(req));
    std::printf("llama-1b decode %-14s %zu tokens in %.2f s: %.2f tokens/s\n", with ? "with schema:" : "without schema:",
                r.tokens.size(), r.decode_seconds,
                r.decode_seconds > 0 ? static_cast<double>(r.decode_steps) / r.decode_seconds : 0.0);
  }
  return 0;
}
