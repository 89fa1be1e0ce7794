#include "engine/scheduler.h"

#include <pthread.h>

#include <algorithm>

#include "base/error.h"
#include "chat/reasoning.h"
#include "sampling/stop_strings.h"

namespace ember::engine {

namespace {
using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

// ---------------------------------------------------------------------------------------------------
// RequestStream

bool RequestStream::next(StreamUpdate& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (delivered_end_) return false;
  if (!cv_.wait_for(lock, timeout, [&] { return has_news_; })) return false;
  out = std::move(pending_);
  pending_ = StreamUpdate{};
  has_news_ = false;
  delivered_end_ = out.finished;
  return true;
}

void RequestStream::publish(const std::function<void(StreamUpdate&)>& change) {
  {
    std::lock_guard lock(mu_);
    change(pending_);
    has_news_ = true;
  }
  cv_.notify_all();
}

// ---------------------------------------------------------------------------------------------------
// Per-sequence state: the same pieces Session::generate keeps on its stack.

struct Scheduler::Sequence {
  Sequence(Pending pending, model::KvCache& cache, const tokenizer::Tokenizer& tok)
      : p(std::move(pending)),
        kv(cache),
        sampler(p.request.params),
        stops(p.request.params.stop_strings),
        decoder(tok, /*skip_special_tokens=*/false),
        parser(p.request.starts_in_reasoning) {}

  const GenerationRequest& req() const { return p.request; }
  size_t n_prompt() const { return p.request.prompt.size(); }
  bool prefilling() const { return kv_tokens.size() < n_prompt(); }
  bool is_eos(int32_t t) const {
    const auto& e = p.request.params.eos_token_ids;
    return std::find(e.begin(), e.end(), t) != e.end();
  }

  Pending p;
  model::KvSequence kv;
  std::vector<int32_t> kv_tokens;  // the tokens whose keys and values kv holds
  std::vector<int32_t> context;    // prompt + generated
  std::vector<int32_t> feed;       // tokens to run in the next step once the prompt is in
  sampling::Sampler sampler;
  sampling::StopStringMatcher stops;
  tokenizer::StreamDecoder decoder;
  chat::ReasoningParser parser;
  int64_t max_new = 0, generated = 0, reused = 0, context_limit = 0;
  bool first_token = true, done = false;
};

// A finished sequence kept for prefix reuse.
struct Scheduler::Cached {
  model::KvSequence kv;
  std::vector<int32_t> tokens;
};

// ---------------------------------------------------------------------------------------------------

Scheduler::Scheduler(model::Model& model, const tokenizer::Tokenizer& tokenizer, SchedulerOptions options)
    : model_(model), tokenizer_(tokenizer), options_(options) {
  if (options_.context <= 0) options_.context = model.config().max_position_embeddings;
  options_.max_parallel = std::max<int64_t>(1, options_.max_parallel);
  options_.prefill_chunk = std::max<int64_t>(1, options_.prefill_chunk);
  if (options_.cached_sequences <= 0) options_.cached_sequences = 2 * options_.max_parallel;
  // Running sequences never reference more distinct blocks than their tables hold, so this many
  // blocks always suffice once finished sequences are evicted; the rest of the pool is the reuse cache.
  const int64_t per_seq = ceil_div(options_.context, options_.block_size) + 1;
  const int64_t n_blocks = options_.max_parallel * per_seq * 2;
  cache_ = std::make_unique<model::KvCache>(model.config(), n_blocks, options_.block_size);
  stats_.kv_blocks_total = n_blocks;
  stats_.kv_blocks_free = n_blocks;
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "ember-schedule");  // so top -H and perf tell the threads apart
    loop();
  });
}

Scheduler::~Scheduler() { shutdown(/*cancel=*/true); }

std::shared_ptr<RequestStream> Scheduler::submit(GenerationRequest request) {
  if (request.prompt.empty()) throw Error("the prompt is empty: nothing to continue");
  if (static_cast<int64_t>(request.prompt.size()) >= options_.context)
    throw Error("the prompt has " + std::to_string(request.prompt.size()) + " tokens but the context holds " +
                std::to_string(options_.context));
  const int32_t vocab = static_cast<int32_t>(model_.config().vocab_size);
  for (int32_t t : request.prompt)
    if (t < 0 || t >= vocab) throw Error("prompt token id " + std::to_string(t) + " is outside the vocabulary");
  request.params.validate();
  sampling::StopStringMatcher check(request.params.stop_strings);  // throws for a bad stop string

  auto stream = std::make_shared<RequestStream>();
  {
    std::lock_guard lock(mu_);
    if (stopping_) throw Error("the server is shutting down");
    if (static_cast<int64_t>(queue_.size()) >= options_.max_queue) {
      ++stats_.requests_rejected;
      throw QueueFull("too many requests are waiting (" + std::to_string(queue_.size()) + ")");
    }
    ++stats_.requests_submitted;
    queue_.push_back(Pending{std::move(request), stream, Clock::now()});
    stats_.queued = static_cast<int64_t>(queue_.size());
  }
  wake_.notify_all();
  return stream;
}

void Scheduler::shutdown(bool cancel) {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cancel_all_ = cancel_all_ || cancel;
  }
  wake_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mu_);
  SchedulerStats s = stats_;
  const auto now = Clock::now();
  int64_t tokens = 0;
  for (const auto& [t, n] : recent_)
    if (seconds_between(t, now) <= 5.0) tokens += n;
  if (!recent_.empty()) {
    const double span = std::clamp(seconds_between(recent_.front().first, now), 0.25, 5.0);
    s.tokens_per_second = static_cast<double>(tokens) / span;
  }
  return s;
}

void Scheduler::loop() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !running_.empty(); });
      if (cancel_all_) {
        for (Pending& p : queue_) {
          p.stream->cancel();
          p.stream->publish([](StreamUpdate& u) {
            u.finished = true;
            u.finish = FinishReason::kCancelled;
          });
          ++stats_.requests_cancelled;
        }
        queue_.clear();
        stats_.queued = 0;
        for (auto& s : running_) s->p.stream->cancel();
      }
      if (stopping_ && queue_.empty() && running_.empty()) break;
    }
    step();
  }
  lru_.clear();
}

// ---------------------------------------------------------------------------------------------------
// Admission: queued requests become sequences while there is room, longest shared prefix first reused.

void Scheduler::admit() {
  for (;;) {
    Pending p;
    {
      std::lock_guard lock(mu_);
      if (queue_.empty() || static_cast<int64_t>(running_.size()) >= options_.max_parallel) break;
      p = std::move(queue_.front());
      queue_.pop_front();
      stats_.queued = static_cast<int64_t>(queue_.size());
    }
    if (p.stream->cancelled()) {
      p.stream->publish([](StreamUpdate& u) {
        u.finished = true;
        u.finish = FinishReason::kCancelled;
      });
      std::lock_guard lock(mu_);
      ++stats_.requests_cancelled;
      continue;
    }
    start(std::move(p));
  }
}

void Scheduler::start(Pending p) {
  auto seq = std::make_unique<Sequence>(std::move(p), *cache_, tokenizer_);
  Sequence& s = *seq;
  const auto& prompt = s.req().prompt;
  const auto& params = s.req().params;
  s.context.assign(prompt.begin(), prompt.end());
  s.context_limit = options_.context;
  s.max_new = params.max_new_tokens.value_or(
      params.max_length ? std::max<int64_t>(0, *params.max_length - static_cast<int64_t>(prompt.size()))
                        : options_.context);

  // Longest prefix among live sequences (forked: they keep writing) and finished ones (taken over).
  size_t best = 0;
  const Sequence* live = nullptr;
  auto cached = lru_.end();
  for (const auto& r : running_) {
    const size_t n = common_prefix(r->kv_tokens, prompt);
    if (n > best) best = n, live = r.get(), cached = lru_.end();
  }
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    const size_t n = common_prefix((*it)->tokens, prompt);
    if (n > best) best = n, live = nullptr, cached = it;
  }
  // As Session::prefill: the last prompt token is always computed, its logits start generation.
  const size_t keep = std::min(best, prompt.size() - 1);
  if (keep > 0) {
    if (cached != lru_.end()) {
      s.kv = std::move((*cached)->kv);
      lru_.erase(cached);
    } else {
      s.kv = live->kv.fork();
    }
    s.kv.truncate(static_cast<int64_t>(keep));
    s.kv_tokens.assign(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(keep));
  }
  s.reused = static_cast<int64_t>(keep);
  {
    std::lock_guard lock(mu_);
    stats_.prompt_tokens += static_cast<int64_t>(prompt.size());
    stats_.reused_tokens += s.reused;
  }
  running_.push_back(std::move(seq));
}

// Blocks one step of `new_tokens` may need: new blocks plus one copy of a shared partial block.
int64_t Scheduler::blocks_for(const Sequence& s, int64_t new_tokens) const {
  const int64_t len = s.kv.length(), bs = cache_->block_size();
  return ceil_div(len + new_tokens, bs) - ceil_div(len, bs) + 1;
}

void Scheduler::ensure_blocks(int64_t needed) {
  while (cache_->free_blocks() < needed && !lru_.empty()) lru_.pop_back();
}

// ---------------------------------------------------------------------------------------------------

bool Scheduler::step() {
  // Cancelled sequences leave before the pass.
  for (auto& s : running_)
    if (!s->done && s->p.stream->cancelled()) finish(*s, FinishReason::kCancelled);
  remove_finished();
  admit();
  update_gauges();
  if (running_.empty()) return false;

  // One pass: every decoding sequence's next tokens, then prompt chunks within the prefill budget.
  std::vector<model::ForwardItem> items;
  std::vector<Sequence*> owners;
  int64_t needed = 0, budget = options_.prefill_chunk;
  for (auto& s : running_)
    if (!s->prefilling() && !s->feed.empty()) {
      items.push_back({&s->kv, s->feed, nullptr, false});
      owners.push_back(s.get());
      needed += blocks_for(*s, static_cast<int64_t>(s->feed.size()));
    }
  for (auto& s : running_) {
    if (!s->prefilling() || budget <= 0) continue;
    const int64_t rest = static_cast<int64_t>(s->n_prompt() - s->kv_tokens.size());
    const int64_t chunk = std::min(rest, budget);
    budget -= chunk;
    items.push_back({&s->kv,
                     std::span<const int32_t>(s->req().prompt).subspan(s->kv_tokens.size(), static_cast<size_t>(chunk)),
                     nullptr, false});
    owners.push_back(s.get());
    needed += blocks_for(*s, chunk);
  }
  if (items.empty()) return false;

  const size_t vocab = static_cast<size_t>(model_.config().vocab_size);
  logits_.resize(items.size() * vocab);
  for (size_t i = 0; i < items.size(); ++i) items[i].logits = logits_.data() + i * vocab;
  ensure_blocks(needed);
  try {
    model_.forward(items);
  } catch (const std::exception& e) {
    for (Sequence* s : owners) finish(*s, FinishReason::kCancelled, std::string("forward pass failed: ") + e.what());
    return true;
  }

  int64_t generated_before = 0, generated_after = 0, prefilled = 0;
  for (const auto& s : running_) generated_before += s->generated;
  for (size_t i = 0; i < items.size(); ++i) {
    Sequence& s = *owners[i];
    const auto ran = items[i].tokens;
    if (s.prefilling()) prefilled += static_cast<int64_t>(ran.size());
    s.kv_tokens.insert(s.kv_tokens.end(), ran.begin(), ran.end());
    if (s.prefilling()) continue;  // more prompt to go: these logits are not needed
    s.feed.clear();
    try {
      after_forward(s, std::span<const float>(items[i].logits, vocab));
    } catch (const std::exception& e) {
      finish(s, FinishReason::kCancelled, e.what());
    }
  }
  for (const auto& s : running_) generated_after += s->generated;
  remove_finished();
  {
    std::lock_guard lock(mu_);
    ++stats_.steps;
    stats_.prefilled_tokens += prefilled;
    stats_.completion_tokens += generated_after - generated_before;
    const auto now = Clock::now();
    recent_.emplace_back(now, generated_after - generated_before);
    while (!recent_.empty() && seconds_between(recent_.front().first, now) > 5.0) recent_.pop_front();
  }
  update_gauges();
  return true;
}

void Scheduler::update_gauges() {
  std::vector<int32_t> held;
  for (const auto& s : running_) held.insert(held.end(), s->kv.blocks().begin(), s->kv.blocks().end());
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
  std::lock_guard lock(mu_);
  stats_.running = static_cast<int64_t>(running_.size());
  stats_.cached_sequences = static_cast<int64_t>(lru_.size());
  stats_.kv_blocks_free = cache_->free_blocks();
  stats_.kv_blocks_held_by_running = static_cast<int64_t>(held.size());
}

// Session::generate's loop body for one sequence whose logits just came out of the pass.
void Scheduler::after_forward(Sequence& s, std::span<const float> logits) {
  const GenerationRequest& req = s.req();
  if (s.p.stream->cancelled()) return finish(s, FinishReason::kCancelled);
  if (s.generated >= s.max_new) return finish(s, FinishReason::kLength);

  std::vector<int32_t> pending;
  const int32_t tok = s.sampler.sample(logits, s.context, s.n_prompt());
  pending.push_back(tok);
  std::vector<GeneratedToken> reported;
  const bool want_logprobs = req.params.logprobs || req.params.top_logprobs > 0;
  reported.push_back({tok, want_logprobs && s.sampler.last_logprobs()
                               ? std::optional<sampling::TokenLogprobs>(*s.sampler.last_logprobs())
                               : std::nullopt});
  if (s.p.request.think_budget && !s.is_eos(tok))
    for (int32_t f : s.p.request.think_budget->after_token(tok)) {
      pending.push_back(f);
      reported.push_back({f, std::nullopt});
    }

  std::string text;
  std::optional<FinishReason> end;
  for (int32_t t : pending) {
    ++s.generated;
    s.context.push_back(t);
    if (s.is_eos(t)) {
      end = FinishReason::kEos;
      break;
    }
    const auto out = s.stops.feed(s.decoder.push(t));
    text += out.text;
    if (out.stopped) {
      end = FinishReason::kStopString;
      break;
    }
  }
  const auto now = Clock::now();
  const bool first = s.first_token;
  s.first_token = false;
  chat::ReasoningDelta d;
  if (req.split_reasoning) d = s.parser.push(text);
  else d.content = std::move(text);
  s.p.stream->publish([&](StreamUpdate& u) {
    u.content += d.content;
    u.reasoning += d.reasoning;
    for (auto& r : reported) u.tokens.push_back(std::move(r));
    if (first) u.first_token_seconds = seconds_between(s.p.submitted, now);
  });
  if (end) return finish(s, *end);
  if (static_cast<int64_t>(s.kv_tokens.size() + pending.size()) >= s.context_limit)
    return finish(s, FinishReason::kContext);
  s.feed = std::move(pending);
}

void Scheduler::finish(Sequence& s, FinishReason reason, const std::string& error) {
  if (s.done) return;
  s.done = true;
  std::string text;
  if (reason != FinishReason::kStopString) text = s.stops.feed(s.decoder.flush()).text + s.stops.flush();
  chat::ReasoningDelta d;
  if (s.req().split_reasoning) {
    d = s.parser.push(text);
    const chat::ReasoningDelta rest = s.parser.flush();
    d.content += rest.content;
    d.reasoning += rest.reasoning;
  } else {
    d.content = std::move(text);
  }
  {  // counted before the client can see the end, so that its next look at the metrics agrees
    std::lock_guard lock(mu_);
    if (!error.empty()) ++stats_.requests_failed;
    else if (reason == FinishReason::kCancelled) ++stats_.requests_cancelled;
    else ++stats_.requests_finished;
  }
  s.p.stream->publish([&](StreamUpdate& u) {
    u.content += d.content;
    u.reasoning += d.reasoning;
    u.finished = true;
    u.finish = reason;
    u.error = error;
    u.prompt_tokens = static_cast<int64_t>(s.n_prompt());
    u.cached_tokens = s.reused;
    u.completion_tokens = s.generated;
  });
}

void Scheduler::remove_finished() {
  std::erase_if(running_, [&](const std::unique_ptr<Sequence>& s) {
    if (s->done) retire(*s);
    return s->done;
  });
}

// A finished sequence's cache goes to the reuse list (a cancelled one's is freed at once).
void Scheduler::retire(Sequence& s) {
  if (s.p.stream->cancelled() || s.kv_tokens.empty()) return;
  auto c = std::make_unique<Cached>(Cached{std::move(s.kv), std::move(s.kv_tokens)});
  lru_.push_front(std::move(c));
  while (static_cast<int64_t>(lru_.size()) > options_.cached_sequences) lru_.pop_back();
}

}  // namespace ember::engine
