#include "serve/engine.h"

#include <algorithm>
#include <span>

namespace hf2pte::serve {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

size_t common_prefix(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
    case FinishReason::kNone: break;
  }
  return "none";
}

std::string Job::take_text(std::chrono::microseconds timeout, bool* done) {
  std::unique_lock lk(mu_);
  if (text_.empty() && !done_) cv_.wait_for(lk, timeout, [&] { return !text_.empty() || done_; });
  std::string out;
  out.swap(text_);
  *done = done_;
  return out;
}

FinishReason Job::finish_reason() const {
  std::lock_guard lk(mu_);
  return finish_;
}

Status Job::error() const {
  std::lock_guard lk(mu_);
  return error_;
}

JobTimings Job::timings() const {
  std::lock_guard lk(mu_);
  return timings_;
}

Result<std::unique_ptr<Engine>> Engine::create(std::shared_ptr<rt::Program> program, const rt::KernelRegistry& registry,
                                               std::shared_ptr<const llm::Tokenizer> tokenizer, EngineOptions options) {
  HF2PTE_CHECK_OR_RETURN(tokenizer != nullptr, kInvalidArgument, "serving needs a tokenizer");
  HF2PTE_CHECK_OR_RETURN(options.slots >= 1 && options.max_queue >= 0 && options.prefill_chunk >= 1, kInvalidArgument,
                         "need --slots >= 1 and --max-queue >= 0");
  auto e = std::unique_ptr<Engine>(new Engine());
  e->tok_ = std::move(tokenizer);
  e->opt_ = options;
  HF2PTE_ASSIGN_OR_RETURN(e->gen_, llm::TextGenerator::create(std::move(program), registry));
  HF2PTE_CHECK_OR_RETURN(e->gen_->has_kv_cache(), kNotSupported,
                         "the program has no KV cache (use_kv_cache = false); serving needs one (export without "
                         "--no-kv-cache)");
  e->slots_.resize(size_t(options.slots));
  for (int i = 0; i < options.slots; ++i) {
    e->slots_[size_t(i)].index = i;
    // One slot keeps the generator's own cache; more need one each.
    if (options.slots > 1) {
      HF2PTE_ASSIGN_OR_RETURN(e->slots_[size_t(i)].state, e->gen_->new_state());
    }
  }
  e->counters_.slots = options.slots;
  e->thread_ = std::thread([raw = e.get()] { raw->loop(); });
  return e;
}

Engine::~Engine() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cancel_all();
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Result<std::shared_ptr<Job>> Engine::submit(JobSpec spec) {
  auto job = std::make_shared<Job>();
  job->spec_ = std::move(spec);
  job->submitted_ = Clock::now();
  job->timings_.prompt_tokens = int64_t(job->spec_.prompt.size());
  {
    std::lock_guard lk(mu_);
    HF2PTE_CHECK_OR_RETURN(!draining_ && !stopping_, kCancelled, "the server is shutting down");
    const int free_slots = int(slots_.size()) - active_;
    HF2PTE_CHECK_OR_RETURN(int(queue_.size()) < free_slots + opt_.max_queue, kOutOfRange,
                           "all {} slots are busy and {} requests are queued", slots_.size(), queue_.size());
    queue_.push_back(job);
    counters_.queued = int(queue_.size());
  }
  cv_.notify_all();
  return job;
}

void Engine::drain() {
  std::unique_lock lk(mu_);
  draining_ = true;
  cv_.notify_all();
  cv_.wait(lk, [&] { return queue_.empty() && active_ == 0; });
}

void Engine::cancel_all() {
  std::lock_guard lk(mu_);
  for (auto& j : queue_) j->cancel();
  for (auto& s : slots_) {
    if (s.job) s.job->cancel();  // the engine thread ends it before its next step
  }
}

EngineMetrics Engine::metrics() const {
  std::lock_guard lk(mu_);
  EngineMetrics m = counters_;
  m.decode_step_seconds = double(step_us_.load(std::memory_order_relaxed)) * 1e-6;
  return m;
}

std::chrono::microseconds Engine::poll_interval() const {
  return std::chrono::microseconds(std::clamp<int64_t>(step_us_.load(std::memory_order_relaxed) / 2, 1000, 50000));
}

void Engine::loop() {
  std::unique_lock lk(mu_);
  while (true) {
    cv_.wait(lk, [&] { return stopping_ || active_ > 0 || !queue_.empty(); });
    if (stopping_ && active_ == 0) break;
    while (!queue_.empty() && active_ < int(slots_.size())) {
      auto job = queue_.front();
      queue_.pop_front();
      ++active_;
      counters_.active = active_;
      lk.unlock();
      admit(std::move(job));
      lk.lock();
    }
    counters_.queued = int(queue_.size());
    lk.unlock();
    for (auto& s : slots_) {
      if (s.job) step(s);
    }
    lk.lock();
  }
  // Jobs still queued at shutdown end cancelled.
  for (auto& j : queue_) {
    std::lock_guard jl(j->mu_);
    j->done_ = true;
    j->finish_ = FinishReason::kCancelled;
    j->cv_.notify_all();
  }
  queue_.clear();
}

void Engine::admit(std::shared_ptr<Job> job) {
  // The free slot whose cache shares the longest prefix with the prompt; ties
  // go to the least recently used, so other slots' prefixes live longer.
  Slot* best = nullptr;
  size_t best_lcp = 0;
  for (auto& s : slots_) {
    if (s.job) continue;
    size_t lcp = common_prefix(s.cached, job->spec_.prompt);
    // A recurrent state is the state after all of `cached`: usable only whole.
    if (gen_->has_recurrent_state() && lcp != s.cached.size()) lcp = 0;
    if (best == nullptr || lcp > best_lcp || (lcp == best_lcp && s.last_used < best->last_used)) {
      best = &s;
      best_lcp = lcp;
    }
  }
  Slot& s = *best;  // admit runs only with a free slot
  const auto& prompt = job->spec_.prompt;
  // At least the last prompt token runs, for the logits of the first new one.
  size_t reuse = std::min(best_lcp, prompt.size() - 1);
  if (gen_->has_recurrent_state() && reuse != best_lcp) reuse = 0;  // cannot rewind a recurrent state
  s.cached.resize(reuse);
  s.pos = int64_t(reuse);
  s.prefilling = true;
  s.history = prompt;
  s.sampler.emplace(job->spec_.sampling);
  s.streamer.emplace(*tok_, prompt.back());
  s.stop.emplace(job->spec_.stop);
  s.last_used = ++use_clock_;
  {
    std::lock_guard jl(job->mu_);
    job->timings_.slot = s.index;
    job->timings_.reused_tokens = int64_t(reuse);
    job->timings_.queue_seconds = seconds_between(job->submitted_, Clock::now());
  }
  std::lock_guard lk(mu_);  // cancel_all reads the slots' jobs
  s.job = std::move(job);
}

void Engine::step(Slot& s) {
  Job& j = *s.job;
  if (j.cancel_.load(std::memory_order_relaxed)) return finish(s, FinishReason::kCancelled);
  if (slots_.size() > 1 && bound_slot_ != s.index) {
    if (Status st = gen_->use_state(s.state); !st) return finish(s, FinishReason::kError, st);
    bound_slot_ = s.index;
  }
  const auto& prompt = j.spec_.prompt;
  const auto t0 = Clock::now();
  std::vector<int64_t> ids;
  if (s.prefilling) {
    const size_t n = size_t(std::min<int64_t>(opt_.prefill_chunk, int64_t(prompt.size()) - s.pos));
    ids.assign(prompt.begin() + s.pos, prompt.begin() + s.pos + int64_t(n));
  } else {
    ids = {s.next};
  }
  auto logits = gen_->forward(ids, s.pos);
  if (!logits) {
    s.cached.resize(size_t(s.pos));  // what the failed call wrote is not trusted
    return finish(s, FinishReason::kError, logits.status());
  }
  s.cached.insert(s.cached.end(), ids.begin(), ids.end());
  s.pos += int64_t(ids.size());
  const double dt = seconds_between(t0, Clock::now());
  {
    std::lock_guard jl(j.mu_);
    (s.prefilling ? j.timings_.prefill_seconds : j.timings_.decode_seconds) += dt;
  }
  if (s.prefilling) {
    if (s.pos < int64_t(prompt.size())) return;  // more prompt chunks to go
    s.prefilling = false;
  } else {
    const auto us = int64_t(dt * 1e6);
    const int64_t prev = step_us_.load(std::memory_order_relaxed);
    step_us_.store(prev == 0 ? us : (prev * 7 + us) / 8, std::memory_order_relaxed);
    std::lock_guard lk(mu_);
    ++counters_.decode_steps;
  }
  take_token(s, *logits, int64_t(logits->size()) / gen_->vocab_size() - 1);  // the last row (all rows, or --logits last's one)
}

void Engine::take_token(Slot& s, const std::vector<float>& logits, int64_t row) {
  Job& j = *s.job;
  const int64_t vocab = gen_->vocab_size();
  const int64_t id = s.sampler->sample(std::span<const float>(logits.data() + row * vocab, size_t(vocab)), s.history);
  s.history.push_back(id);
  int64_t produced = 0;
  {
    std::lock_guard jl(j.mu_);
    produced = ++j.timings_.completion_tokens;
    if (produced == 1) j.timings_.time_to_first_token = seconds_between(j.submitted_, Clock::now());
  }
  const auto& eos = gen_->eos_ids();
  if (std::find(eos.begin(), eos.end(), id) != eos.end()) return finish(s, FinishReason::kStop);  // EOS is not text
  publish(j, s.stop->feed(s.streamer->push(id)));
  if (s.stop->matched()) return finish(s, FinishReason::kStop);
  // The next decode step would write position s.pos: it must exist.
  if (produced >= j.spec_.max_tokens || s.pos >= gen_->max_seq_len()) return finish(s, FinishReason::kLength);
  s.next = id;
}

void Engine::publish(Job& j, const std::string& text) {
  if (text.empty()) return;
  {
    std::lock_guard jl(j.mu_);
    j.text_ += text;
  }
  j.cv_.notify_all();
}

void Engine::finish(Slot& s, FinishReason reason, Status error) {
  std::shared_ptr<Job> job = s.job;
  if (reason == FinishReason::kStop || reason == FinishReason::kLength) {
    // What the streamer and the stop matcher still hold is text too, unless a stop string is in it.
    if (!s.stop->matched()) {
      publish(*job, s.stop->feed(s.streamer->flush()));
      if (s.stop->matched()) reason = FinishReason::kStop;
      else publish(*job, s.stop->flush());
    }
  }
  s.sampler.reset();
  s.streamer.reset();
  s.stop.reset();
  const JobTimings t = job->timings();
  {
    // The counters first: whoever sees the job done also sees it counted.
    std::lock_guard lk(mu_);
    s.job.reset();
    --active_;
    ++counters_.jobs_finished;
    if (reason == FinishReason::kCancelled) ++counters_.jobs_cancelled;
    counters_.prompt_tokens += uint64_t(t.prompt_tokens);
    counters_.reused_tokens += uint64_t(t.reused_tokens);
    counters_.completion_tokens += uint64_t(t.completion_tokens);
    counters_.active = active_;
  }
  cv_.notify_all();  // drain() waits for the last one
  {
    std::lock_guard jl(job->mu_);
    job->done_ = true;
    job->finish_ = reason;
    job->error_ = std::move(error);
  }
  job->cv_.notify_all();
}

}  // namespace hf2pte::serve
