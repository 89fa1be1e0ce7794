#pragma once
// Continuous batching: one thread owns the model and, every step, runs ONE forward pass over the next
// token of every decoding sequence plus a bounded chunk of the prompts being prefilled. Requests join
// and leave between steps. All sequences share one paged KV cache; a new prompt forks the blocks of
// the live or recently finished sequence that shares its longest prefix instead of recomputing them.
//
// Each sequence runs the same engine::Generation as Session::generate, so greedy answers equal a
// single Session's.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/generation.h"
#include "engine/speculation.h"
#include "model/model.h"
#include "sampling/generation_config.h"
#include "tokenizer/tokenizer.h"

namespace ember::engine {

// What a request produced since the consumer last looked (deltas are merged).
struct StreamUpdate {
  std::string content, reasoning;
  std::vector<GeneratedToken> tokens;
  bool finished = false;
  FinishReason finish = FinishReason::kLength;
  std::string stop_string;  // with finish kStopString: which of the request's stop strings matched
  std::string error;  // non-empty: the request failed inside the scheduler
  std::string error_code;  // set when the request itself was at fault (a RequestError's code)
  int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
  double queue_seconds = 0, first_token_seconds = 0;  // from submit
};

// The channel between the scheduler thread and one client.
class RequestStream {
 public:
  // Waits up to `timeout` for news; returns false if there was none. Once `finished` was returned,
  // later calls return false at once.
  bool next(StreamUpdate& out, std::chrono::milliseconds timeout);
  // The client is gone or gave up: the scheduler stops the sequence and frees its blocks.
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

 private:
  friend class Scheduler;
  void publish(const std::function<void(StreamUpdate&)>& change);

  std::mutex mu_;
  std::condition_variable cv_;
  StreamUpdate pending_;
  bool has_news_ = false, delivered_end_ = false;
  std::atomic<bool> cancelled_{false};
};

struct SchedulerOptions {
  int64_t max_parallel = 8;     // sequences decoded together
  int64_t context = 0;          // per-sequence tokens; <= 0: the model's max_position_embeddings
  int64_t max_queue = 64;       // waiting requests beyond the running ones; more are refused
  int64_t prefill_chunk = 256;  // prompt tokens computed per step (over all prefilling sequences)
  int64_t cached_sequences = 0; // finished sequences kept for prefix reuse; <= 0: 2 * max_parallel
  int64_t block_size = model::KvCache::kDefaultBlock;
  // Speculative decoding for every sequence (engine/speculation.h): guesses ride in the same pass as
  // the other sequences' tokens. Off for a model that cannot (spec_unsupported).
  SpecOptions spec = {};
};

struct SchedulerStats {
  int64_t requests_submitted = 0, requests_rejected = 0, requests_finished = 0, requests_cancelled = 0,
          requests_failed = 0;
  int64_t prompt_tokens = 0, prefilled_tokens = 0, reused_tokens = 0, completion_tokens = 0;
  int64_t queued = 0, running = 0, cached_sequences = 0;
  int64_t kv_blocks_total = 0, kv_blocks_free = 0, kv_blocks_held_by_running = 0;
  int64_t steps = 0;
  int64_t spec_drafted = 0, spec_accepted = 0;  // speculation: guesses fed, and those taken
  double tokens_per_second = 0;  // generated tokens/s over the last few seconds
};

// Thrown by submit() when the queue is full.
struct QueueFull : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Scheduler {
 public:
  using Clock = std::chrono::steady_clock;
  // KV blocks held per sequence's context: as many again as the running sequences need, to keep
  // finished conversations' prefixes for reuse (the memory plan's pool_factor).
  static constexpr int64_t kPoolFactor = 2;
  Scheduler(model::Model& model, const tokenizer::Tokenizer& tokenizer, SchedulerOptions options = {});
  ~Scheduler();  // cancels everything and joins the thread
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. Throws QueueFull when max_queue requests already wait, ember::Error when the
  // prompt is empty or does not fit the context, or after shutdown(); RequestError for a model
  // loaded without lm_head.
  std::shared_ptr<RequestStream> submit(GenerationRequest request);
  // `choices` completions of one prompt (OpenAI's `n`): the prompt is computed once and its KV blocks
  // are forked for each choice, which samples with its own generator (choice i with seed + i when
  // the request has a seed). Throws ember::Error also when choices exceeds max_parallel.
  std::vector<std::shared_ptr<RequestStream>> submit(GenerationRequest request, int choices);

  // Refuses new requests; with cancel, stops the running ones too. Returns when nothing runs.
  void shutdown(bool cancel);

  int64_t context() const { return options_.context; }
  int64_t max_parallel() const { return options_.max_parallel; }
  // The speculation in force (off where the model cannot; see SchedulerOptions::spec).
  const SpecOptions& speculation() const { return options_.spec; }
  kernels::KvType kv_dtype() const { return cache_->type(); }
  SchedulerStats stats() const;

 private:
  struct Sequence;
  struct Cached;
  struct Pending {
    GenerationRequest request;
    std::shared_ptr<RequestStream> stream;
    std::chrono::steady_clock::time_point submitted;
    std::vector<std::shared_ptr<RequestStream>> siblings;  // the other choices, forked after the prompt
  };

  void loop();
  bool step();  // false when there was nothing to do
  void admit();
  void start(Pending p);
  std::vector<Sequence*> fork_siblings(Sequence& s);
  void ensure_blocks(int64_t needed);
  // rows: the logits after the last token fed before its guesses, then after each guess.
  void after_forward(Sequence& s, std::span<const float> rows);
  void publish(Sequence& s, GenerationStep& step, std::optional<Clock::time_point> first_token);
  void finish(Sequence& s, FinishReason reason, const std::string& error = {}, GenerationStep last = {});
  void retire(Sequence& s);
  void remove_finished();
  int64_t blocks_for(const Sequence& s, int64_t new_tokens) const;
  void update_gauges();

  model::Model& model_;
  const tokenizer::Tokenizer& tokenizer_;
  SchedulerOptions options_;
  std::unique_ptr<model::KvCache> cache_;

  mutable std::mutex mu_;  // guards queue_, stopping_, stats_ and the wake-up
  std::condition_variable wake_;
  std::deque<Pending> queue_;
  bool stopping_ = false, cancel_all_ = false;
  SchedulerStats stats_;
  std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> recent_;  // (time, tokens) per step

  // Owned by the scheduler thread.
  std::vector<std::unique_ptr<Sequence>> running_;
  std::deque<std::unique_ptr<Cached>> lru_;  // front: most recently used
  SpecLearned spec_learned_;  // the last finished speculating sequence's estimates: new ones start there
  std::vector<float> logits_;
  std::thread thread_;
};

}  // namespace ember::engine
