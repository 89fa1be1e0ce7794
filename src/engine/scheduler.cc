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
// Per-sequence state: the generation rules and the cache positions they fill.

struct Scheduler::Sequence {
  Sequence(Pending pending, model::KvCache& cache, const tokenizer::Tokenizer& tok, int64_t context, int64_t vocab,
           const SpecOptions& spec_options, const SpecLearned& learned)
      : stream(std::move(pending.stream)),
        submitted(pending.submitted),
        siblings(std::move(pending.siblings)),
        gen(tok, std::move(pending.request), context, vocab),
        kv(cache) {
    if (spec_options.mode != SpecMode::kOff && gen.request().speculate) spec.emplace(spec_options, context, vocab, nullptr, learned);
  }

  const GenerationRequest& req() const { return gen.request(); }
  size_t n_prompt() const { return req().prompt.size(); }
  bool prefilling() const { return kv_tokens.size() < n_prompt(); }

  std::shared_ptr<RequestStream> stream;
  Clock::time_point submitted;
  std::vector<std::shared_ptr<RequestStream>> siblings;  // choices to fork once the prompt is in
  Generation gen;
  model::KvSequence kv;
  std::vector<int32_t> kv_tokens;  // the tokens whose keys and values kv holds
  std::vector<int32_t> feed;       // tokens to run in the next step once the prompt is in
  std::optional<Speculator> spec;  // with speculation on
  int64_t guesses = 0;             // of feed, the last ones are guesses to check
  int64_t reused = 0;
  bool first_token = true, done = false;
  std::string error_code;  // of the RequestError that ended it
};

// A finished sequence kept for prefix reuse.
struct Scheduler::Cached {
  model::KvSequence kv;
  std::vector<int32_t> tokens;
};

// ---------------------------------------------------------------------------------------------------

Scheduler::Scheduler(model::Model& model, const tokenizer::Tokenizer& tokenizer, SchedulerOptions options)
    : model_(model), tokenizer_(tokenizer), options_(options) {
  options_.context = resolve_context(model.config(), options_.context);
  options_.max_parallel = std::max<int64_t>(1, options_.max_parallel);
  options_.prefill_chunk = std::max<int64_t>(1, options_.prefill_chunk);
  if (options_.cached_sequences <= 0) options_.cached_sequences = 2 * options_.max_parallel;
  if (!spec_unsupported(model.config(), options_.spec).empty()) options_.spec = SpecOptions{};
  // Running sequences never reference more distinct blocks than their tables hold, so this many
  // blocks always suffice once finished sequences are evicted; the rest of the pool is the reuse cache.
  const int64_t per_seq = ceil_div(options_.context, options_.block_size) + 1;
  const int64_t n_blocks = options_.max_parallel * per_seq * kPoolFactor;
  cache_ = model.make_cache(n_blocks * options_.block_size, options_.block_size);
  stats_.kv_blocks_total = n_blocks;
  stats_.kv_blocks_free = n_blocks;
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "ember-schedule");  // so top -H and perf tell the threads apart
    loop();
  });
}

Scheduler::~Scheduler() { shutdown(/*cancel=*/true); }

std::shared_ptr<RequestStream> Scheduler::submit(GenerationRequest request) {
  return submit(std::move(request), 1).front();
}

std::vector<std::shared_ptr<RequestStream>> Scheduler::submit(GenerationRequest request, int choices) {
  if (choices < 1 || choices > options_.max_parallel)
    throw RequestError("'n' asks for " + std::to_string(choices) + " choices, but this server runs " +
                           std::to_string(options_.max_parallel) + " parallel sequences (--parallel)",
                       "n", "invalid_request");
  check_request(request, options_.context, model_.config().vocab_size);
  if (!model_.has_logits())
    throw RequestError("this model was loaded without lm_head (an embedding folder that stores none): it makes "
                       "embeddings only", "model", "model_not_supported");

  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < choices; ++i) streams.push_back(std::make_shared<RequestStream>());
  {
    std::lock_guard lock(mu_);
    if (stopping_) throw Error("the server is shutting down");
    if (static_cast<int64_t>(queue_.size()) >= options_.max_queue) {
      ++stats_.requests_rejected;
      throw QueueFull("too many requests are waiting (" + std::to_string(queue_.size()) + ")");
    }
    stats_.requests_submitted += choices;
    queue_.push_back(Pending{std::move(request), streams.front(), Clock::now(), {streams.begin() + 1, streams.end()}});
    stats_.queued = static_cast<int64_t>(queue_.size());
  }
  wake_.notify_all();
  return streams;
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
          p.siblings.push_back(p.stream);
          for (auto& stream : p.siblings) {
            stream->cancel();
            stream->publish([](StreamUpdate& u) {
              u.finished = true;
              u.finish = FinishReason::kCancelled;
            });
            ++stats_.requests_cancelled;
          }
        }
        queue_.clear();
        stats_.queued = 0;
        for (auto& s : running_) s->stream->cancel();
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
      if (queue_.empty()) break;
      const auto room = options_.max_parallel - static_cast<int64_t>(running_.size());
      if (room < 1 + static_cast<int64_t>(queue_.front().siblings.size())) break;
      p = std::move(queue_.front());
      queue_.pop_front();
      stats_.queued = static_cast<int64_t>(queue_.size());
    }
    if (p.stream->cancelled() && std::all_of(p.siblings.begin(), p.siblings.end(), [](auto& s) { return s->cancelled(); })) {
      p.siblings.push_back(p.stream);
      for (auto& stream : p.siblings)
        stream->publish([](StreamUpdate& u) {
          u.finished = true;
          u.finish = FinishReason::kCancelled;
        });
      std::lock_guard lock(mu_);
      stats_.requests_cancelled += static_cast<int64_t>(p.siblings.size());
      continue;
    }
    start(std::move(p));
  }
}

void Scheduler::start(Pending p) {
  auto seq = std::make_unique<Sequence>(std::move(p), *cache_, tokenizer_, options_.context, model_.config().vocab_size,
                                        options_.spec, spec_learned_);
  Sequence& s = *seq;
  const auto& prompt = s.req().prompt;

  // Longest prefix among live sequences (forked: they keep writing) and finished ones (taken over).
  size_t best = 0;
  const Sequence* live = nullptr;
  auto cached = lru_.end();
  for (const auto& r : running_) {
    const size_t n = reusable_prefix(r->kv_tokens, prompt);
    if (n > best) best = n, live = r.get(), cached = lru_.end();
  }
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    const size_t n = reusable_prefix((*it)->tokens, prompt);
    if (n > best) best = n, live = nullptr, cached = it;
  }
  size_t keep = best;
  if (keep > 0) {
    if (cached != lru_.end()) {
      s.kv = std::move((*cached)->kv);
      lru_.erase(cached);
    } else {
      s.kv = live->kv.fork();
    }
    // A hybrid model's sequence may go back further, to its deepest state snapshot (KvSequence::truncate).
    s.kv.truncate(static_cast<int64_t>(keep));
    keep = static_cast<size_t>(s.kv.length());
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

// Blocks one step of `new_tokens` may need: new blocks plus one copy of a shared partial block, and
// of every shared block when the pass computes the sequence again (LongRoPE crossing its original context).
int64_t Scheduler::blocks_for(const Sequence& s, int64_t new_tokens) const {
  const int64_t len = s.kv.length(), bs = cache_->block_size();
  return ceil_div(len + new_tokens, bs) - ceil_div(len, bs) + 1 + ceil_div(model_.recompute_length(s.kv, new_tokens), bs);
}

void Scheduler::ensure_blocks(int64_t needed) {
  while (cache_->free_blocks() < needed && !lru_.empty()) lru_.pop_back();
}

// ---------------------------------------------------------------------------------------------------

bool Scheduler::step() {
  // Cancelled sequences leave before the pass.
  for (auto& s : running_)
    if (!s->done && s->stream->cancelled()) finish(*s, FinishReason::kCancelled);
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
      items.push_back({.seq = &s->kv, .tokens = s->feed, .all_logits = s->guesses > 0, .single_tail = s->guesses});
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
  size_t rows = 0;  // an item with guesses gets every token's logits
  for (const auto& it : items) rows += it.all_logits ? it.tokens.size() : 1;
  logits_.resize(rows * vocab);
  rows = 0;
  for (auto& it : items) {
    it.logits = logits_.data() + rows * vocab;
    rows += it.all_logits ? it.tokens.size() : 1;
  }
  ensure_blocks(needed);
  const auto pass_start = Clock::now();
  try {
    model_.forward(items);
  } catch (const std::exception& e) {
    for (Sequence* s : owners) finish(*s, FinishReason::kCancelled, std::string("forward pass failed: ") + e.what());
    return true;
  }

  const double pass_seconds = seconds_between(pass_start, Clock::now());
  int64_t generated_before = 0, generated_after = 0, prefilled = 0, drafted = 0, accepted = 0;
  for (const auto& s : running_) generated_before += static_cast<int64_t>(s->gen.generated().size());
  for (size_t i = 0; i < items.size(); ++i) {
    Sequence& s = *owners[i];
    const auto ran = items[i].tokens;
    if (s.prefilling()) prefilled += static_cast<int64_t>(ran.size());
    s.kv_tokens.insert(s.kv_tokens.end(), ran.begin(), ran.end());
    if (s.prefilling()) continue;  // more prompt to go: these logits are not needed
    // What the pass cost, for the adaptive length: the batch's whole pass, which this sequence's
    // guesses lengthen and its draft model's passes (run between passes) delay.
    if (s.spec) s.spec->timed(static_cast<int64_t>(ran.size()), pass_seconds);
    // The rows from the last token fed before the guesses on.
    const size_t n_rows = static_cast<size_t>(s.guesses) + 1;
    const float* first = items[i].logits + (items[i].all_logits ? ran.size() - n_rows : 0) * vocab;
    s.feed.clear();
    s.guesses = 0;
    for (Sequence* c : fork_siblings(s)) {
      const SpecCounts before = c->spec ? c->spec->counts() : SpecCounts{};
      try {
        after_forward(*c, std::span<const float>(first, n_rows * vocab));
      } catch (const RequestError& e) {  // e.g. a grammar that this vocabulary cannot continue
        c->error_code = e.code;
        finish(*c, FinishReason::kCancelled, e.what());
      } catch (const std::exception& e) {
        finish(*c, FinishReason::kCancelled, e.what());
      }
      if (c->spec) {
        drafted += c->spec->counts().drafted - before.drafted;
        accepted += c->spec->counts().accepted - before.accepted;
      }
    }
  }
  for (const auto& s : running_) generated_after += static_cast<int64_t>(s->gen.generated().size());
  remove_finished();
  {
    std::lock_guard lock(mu_);
    ++stats_.steps;
    stats_.prefilled_tokens += prefilled;
    stats_.completion_tokens += generated_after - generated_before;
    stats_.spec_drafted += drafted;
    stats_.spec_accepted += accepted;
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

// The other choices of a request start from its prompt's cache and logits (each then runs its own
// step on them), so the prompt is computed once for all of them.
// Returns s and the new sequences, in choice order.
std::vector<Scheduler::Sequence*> Scheduler::fork_siblings(Sequence& s) {
  std::vector<Sequence*> all{&s};
  for (size_t i = 0; i < s.siblings.size(); ++i) {
    GenerationRequest r = s.req();
    r.params = params_of_choice(std::move(r.params), static_cast<int64_t>(i) + 1);
    auto c = std::make_unique<Sequence>(Pending{std::move(r), std::move(s.siblings[i]), s.submitted, {}}, *cache_,
                                        tokenizer_, options_.context, model_.config().vocab_size, options_.spec,
                                        spec_learned_);
    c->kv = s.kv.fork();
    c->kv_tokens = s.kv_tokens;
    c->reused = s.reused;
    all.push_back(c.get());
    running_.push_back(std::move(c));
  }
  s.siblings.clear();
  return all;
}

// One generation step of a sequence whose logits just came out of the pass.
void Scheduler::after_forward(Sequence& s, std::span<const float> rows) {
  if (s.stream->cancelled()) return finish(s, FinishReason::kCancelled);
  GenerationStep step;
  if (s.spec) {
    Verdict v = s.spec->verify(s.gen, rows, static_cast<size_t>(model_.config().vocab_size));
    // The guesses not taken leave the cache and the tokens a later prompt may reuse.
    s.kv.truncate(s.kv.length() - v.rejected);
    s.kv_tokens.resize(static_cast<size_t>(s.kv.length()));
    step = std::move(v.step);
  } else {
    step = s.gen.step(rows);
  }
  const auto now = Clock::now();
  const bool first = s.first_token && !step.tokens.empty();
  if (!step.tokens.empty()) s.first_token = false;
  if (step.finished) return finish(s, *step.finished, {}, std::move(step));
  publish(s, step, first ? std::optional(now) : std::nullopt);
  s.feed = std::move(step.feed);
  if (s.spec) {
    const auto n_feed = static_cast<int64_t>(s.feed.size());
    const auto& guesses = s.spec->draft(s.gen, draft_room(model_, s.kv, n_feed, options_.spec.max_draft));
    s.feed.insert(s.feed.end(), guesses.begin(), guesses.end());
    s.guesses = static_cast<int64_t>(guesses.size());
  }
}

// Sends a step's text and tokens to the client (merged with what it has not read yet).
void Scheduler::publish(Sequence& s, GenerationStep& step, std::optional<Clock::time_point> first_token) {
  s.stream->publish([&](StreamUpdate& u) {
    u.content += step.content;
    u.reasoning += step.reasoning;
    for (auto& t : step.tokens) u.tokens.push_back(std::move(t));
    if (first_token) u.first_token_seconds = seconds_between(s.submitted, *first_token);
  });
}

void Scheduler::finish(Sequence& s, FinishReason reason, const std::string& error, GenerationStep last) {
  if (s.done) return;
  s.done = true;
  if (!last.finished) last = s.gen.finish(reason);
  {  // counted before the client can see the end, so that its next look at the metrics agrees
    std::lock_guard lock(mu_);
    if (!error.empty()) ++stats_.requests_failed;
    else if (reason == FinishReason::kCancelled) ++stats_.requests_cancelled;
    else ++stats_.requests_finished;
  }
  const bool first = s.first_token && !last.tokens.empty();
  s.first_token = false;
  publish(s, last, first ? std::optional(Clock::now()) : std::nullopt);
  s.stream->publish([&](StreamUpdate& u) {
    u.finished = true;
    u.finish = reason;
    u.stop_string = s.gen.matched_stop();
    u.error = error;
    u.error_code = s.error_code;
    u.prompt_tokens = static_cast<int64_t>(s.n_prompt());
    u.cached_tokens = s.reused;
    u.completion_tokens = static_cast<int64_t>(s.gen.generated().size());
  });
  for (auto& sibling : s.siblings) {  // choices not forked yet end with it (a cancel, a failed pass)
    sibling->publish([&](StreamUpdate& u) {
      u.finished = true;
      u.finish = reason;
      u.error = error;
    u.error_code = s.error_code;
      u.prompt_tokens = static_cast<int64_t>(s.n_prompt());
    });
    std::lock_guard lock(mu_);
    if (!error.empty()) ++stats_.requests_failed;
    else ++stats_.requests_cancelled;
  }
  s.siblings.clear();
}

void Scheduler::remove_finished() {
  std::erase_if(running_, [&](const std::unique_ptr<Sequence>& s) {
    if (s->done) retire(*s);
    return s->done;
  });
}

// A finished sequence's cache goes to the reuse list (a cancelled one's is freed at once).
void Scheduler::retire(Sequence& s) {
  // What its speculation learnt of costs (a longer pass, a draft model's guess) is where the next
  // request starts; acceptance belongs to a request's text, so each starts from the prior.
  if (s.spec) {
    spec_learned_ = s.spec->learned();
    spec_learned_.p = SpecLearned{}.p;
  }
  if (s.stream->cancelled() || s.kv_tokens.empty()) return;
  auto c = std::make_unique<Cached>(Cached{std::move(s.kv), std::move(s.kv_tokens)});
  lru_.push_front(std::move(c));
  while (static_cast<int64_t>(lru_.size()) > options_.cached_sequences) lru_.pop_back();
}

}  // namespace ember::engine
