// The serving engine: one loaded LLM program shared by N slots. Each slot owns
// the KV cache of one sequence (TextGenerator::KvState, switched by pointer),
// and one engine thread interleaves the slots' steps -- a prefill chunk or a
// decode token each -- so every active stream makes progress. Requests beyond
// the slots wait in a bounded queue; a request whose prompt extends what a
// free slot's cache already holds (a chat's next turn) skips that prefix.
//
// HTTP is not here (serve/server.h): a Job is what an HTTP thread waits on.
#pragma once

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

#include "core/status.h"
#include "llm/generator.h"
#include "llm/sampler.h"
#include "llm/tokenizer/tokenizer.h"
#include "serve/stop_matcher.h"

namespace hf2pte::serve {

/// Why a job ended: "stop" (EOS or a stop string), "length" (max_tokens or the
/// context), or the job did not finish normally.
enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
const char* finish_reason_name(FinishReason r);

/// What to generate: token ids in, text out.
struct JobSpec {
  std::vector<int64_t> prompt;
  int64_t max_tokens = 16;  ///< >= 1; prompt + max_tokens <= the context (the caller checks)
  llm::SamplingConfig sampling;
  std::vector<std::string> stop;  ///< stop strings (never part of the output)
};

/// Counts and times of one job (read after it is done).
struct JobTimings {
  int slot = -1;
  int64_t prompt_tokens = 0;
  int64_t reused_tokens = 0;  ///< prompt tokens whose KV the slot already held (not prefilled)
  int64_t completion_tokens = 0;
  double queue_seconds = 0;   ///< submitted -> given a slot
  double prefill_seconds = 0;
  double decode_seconds = 0;
  double time_to_first_token = 0;  ///< submitted -> first token

  double prefill_tokens_per_second() const {
    return prefill_seconds > 0 ? double(prompt_tokens - reused_tokens) / prefill_seconds : 0;
  }
  double decode_tokens_per_second() const {
    return decode_seconds > 0 && completion_tokens > 1 ? double(completion_tokens - 1) / decode_seconds : 0;
  }
};

/// One request's life: the engine thread appends text, an HTTP thread takes it.
class Job {
 public:
  /// Waits up to `timeout` for new text or the end; returns the text produced
  /// since the last call (possibly empty) and sets *done once the job ended
  /// and all its text has been taken.
  std::string take_text(std::chrono::microseconds timeout, bool* done);
  /// The client is gone: the engine frees the slot before its next step.
  void cancel() { cancel_.store(true, std::memory_order_relaxed); }
  /// After done: why it ended, the error of kError, and the counts.
  FinishReason finish_reason() const;
  Status error() const;
  JobTimings timings() const;

 private:
  friend class Engine;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string text_;  ///< produced, not taken yet
  bool done_ = false;
  FinishReason finish_ = FinishReason::kNone;
  Status error_;
  JobTimings timings_;
  std::atomic<bool> cancel_{false};
  JobSpec spec_;
  std::chrono::steady_clock::time_point submitted_;
};

struct EngineOptions {
  int slots = 1;
  int max_queue = 64;           ///< jobs waiting for a slot beyond the active ones
  int64_t prefill_chunk = 256;  ///< prompt tokens per step, so a long prompt does not stall the others
};

/// A consistent snapshot for /metrics.
struct EngineMetrics {
  int slots = 0, active = 0, queued = 0;
  uint64_t jobs_finished = 0, jobs_cancelled = 0;
  uint64_t prompt_tokens = 0, reused_tokens = 0, completion_tokens = 0, decode_steps = 0;
  double decode_step_seconds = 0;  ///< moving average of one slot's decode step
};

class Engine {
 public:
  /// Loads forward, one KV state per slot (slots > 1 needs caches the program
  /// lets move: TextGenerator::new_state), and starts the engine thread.
  static Result<std::unique_ptr<Engine>> create(std::shared_ptr<rt::Program> program, const rt::KernelRegistry& registry,
                                                std::shared_ptr<const llm::Tokenizer> tokenizer, EngineOptions options);
  ~Engine();  ///< cancels whatever runs and joins the thread

  /// Queues a job; kOutOfRange when the queue is full, kCancelled while draining.
  Result<std::shared_ptr<Job>> submit(JobSpec spec);
  /// Takes no new jobs and returns once every queued and active one has ended.
  void drain();
  /// Ends every queued and active job (finish reason kCancelled).
  void cancel_all();

  EngineMetrics metrics() const;
  int64_t max_seq_len() const { return gen_->max_seq_len(); }
  int64_t vocab_size() const { return gen_->vocab_size(); }
  /// How often a waiting client should check its connection: half a measured
  /// decode step (1 ms to 50 ms), so a dropped client frees its slot within one step.
  std::chrono::microseconds poll_interval() const;

 private:
  struct Slot {
    int index = 0;
    llm::TextGenerator::KvState state;
    std::vector<int64_t> cached;  ///< ids whose K/V the cache holds, positions 0..size-1
    uint64_t last_used = 0;
    // The active job (null when free) and its progress.
    std::shared_ptr<Job> job;
    int64_t pos = 0;  ///< next cache position to fill
    bool prefilling = false;
    int64_t next = 0;  ///< the last sampled id, fed by the next decode step
    std::vector<int64_t> history;
    std::optional<llm::Sampler> sampler;
    std::optional<llm::TextStreamer> streamer;
    std::optional<StopMatcher> stop;
  };

  Engine() = default;
  void loop();
  void admit(std::shared_ptr<Job> job);
  void step(Slot& s);
  void take_token(Slot& s, const std::vector<float>& logits, int64_t row);
  void finish(Slot& s, FinishReason reason, Status error = Status::ok());
  void publish(Job& j, const std::string& text);

  std::shared_ptr<const llm::Tokenizer> tok_;
  std::unique_ptr<llm::TextGenerator> gen_;
  EngineOptions opt_;
  std::vector<Slot> slots_;
  int bound_slot_ = -1;  ///< whose state forward's buffers point at (engine thread only)
  uint64_t use_clock_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  int active_ = 0;
  bool draining_ = false, stopping_ = false;
  EngineMetrics counters_;
  std::atomic<int64_t> step_us_{0};  ///< moving average of a decode step
  std::thread thread_;
};

}  // namespace hf2pte::serve
