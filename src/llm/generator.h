// TextGenerator: prefill + decode on an LLM program that follows the
// ExecuTorch LLM contract (forward(input_ids[1,S], cache_position[S]) ->
// logits[1,S,V], KV cache in mutable buffers), or on a program without a KV
// cache (use_kv_cache = false: forward(input_ids[1,S]), every step recomputes
// the whole sequence). Greedy or sampled decoding
// (sampler.h), stop on EOS, cancellation, and timing stats. Text (tokenizer,
// streaming) is the caller's: see llm/tokenizer/tokenizer.h.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <functional>
#include <memory>
#include <vector>

#include "core/status.h"
#include "llm/sampler.h"
#include "runtime/program.h"

namespace hf2pte::llm {

/// What to generate and how to pick tokens.
struct GenerationConfig {
  int64_t max_new_tokens = 32;
  bool stop_at_eos = true;
  SamplingConfig sampling;  ///< default: greedy
  /// Checked before every step; when it becomes true, generation stops and
  /// returns the ids so far (stats.stop_reason "cancelled"). Not owned.
  const std::atomic<bool>* cancel = nullptr;
};

/// Timings of one generate() call.
struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;       ///< the decode loop (forward calls after the first token)
  double time_to_first_token = 0;  ///< prefill plus picking the first token
  /// "eos", "max_new_tokens", "context" (KV cache full), "cancelled" or "callback".
  std::string stop_reason;

  double prefill_tokens_per_second() const { return prefill_seconds > 0 ? double(prompt_tokens) / prefill_seconds : 0; }
  /// Tokens produced by decode steps (the first comes from prefill) per second.
  double decode_tokens_per_second() const {
    return decode_seconds > 0 && generated_tokens > 1 ? double(generated_tokens - 1) / decode_seconds : 0;
  }
  /// One line: prompt tokens, prefill tok/s, generated tokens, decode tok/s, time to first token.
  std::string summary() const;
};

class TextGenerator {
 public:
  /// Loads `forward` and reads the metadata constant methods (max_seq_len, eos ids).
  static Result<std::unique_ptr<TextGenerator>> create(std::shared_ptr<rt::Program> program,
                                                       const rt::KernelRegistry& registry);

  /// Runs the prompt, then decode steps; `on_token` sees every new id as it is
  /// produced (return false to stop). Returns the generated ids. A prompt
  /// longer than the program's context is refused (kOutOfRange) with both numbers.
  Result<std::vector<int64_t>> generate(const std::vector<int64_t>& prompt, const GenerationConfig& config,
                                        const std::function<bool(int64_t)>& on_token, GenerationStats* stats);

  /// One forward call at positions [start, start + ids.size()): logits [S, V], row-major,
  /// or [1, V] of the last position from a program exported with --logits last.
  /// Every caller that samples takes the last row. Without a KV cache the call
  /// sees only `ids`, so `start` must be 0.
  Result<std::vector<float>> forward(const std::vector<int64_t>& ids, int64_t start);

  /// The KV caches of one sequence in caller memory (one buffer per mutable
  /// buffer of forward), zero-filled. A server keeps one per slot and switches
  /// sequences with use_state, by pointer; kNotSupported when the program's
  /// plan shares a cache's bytes with other values (then it cannot move).
  using KvState = std::vector<rt::AlignedBuffer>;
  Result<KvState> new_state() const;
  /// Points forward's mutable buffers at `state` (from new_state of this
  /// generator); later forward calls read and update it. The caller keeps it alive.
  Status use_state(KvState& state);

  /// False for programs exported with --no-kv-cache (constant method use_kv_cache
  /// false, or a forward without the cache_position input).
  bool has_kv_cache() const { return kv_cache_; }
  /// The cache is a recurrent state (Mamba): a call continues from where the
  /// last one ended, so a runner may reuse a cached prefix only when it is all
  /// the state holds (no rewinding into it).
  bool has_recurrent_state() const { return recurrent_state_; }
  int64_t max_seq_len() const { return max_seq_len_; }
  int64_t vocab_size() const { return vocab_size_; }
  const std::vector<int64_t>& eos_ids() const { return eos_ids_; }

 private:
  std::shared_ptr<rt::Program> program_;
  /// Memory of forward's unplanned mutable buffers (KV caches of a program
  /// exported with alloc_mutable_buffers=false), zero-filled at create();
  /// declared before forward_ so it outlives the method.
  std::vector<rt::AlignedBuffer> kv_storage_;
  std::unique_ptr<rt::Method> forward_;
  bool kv_cache_ = true;
  bool recurrent_state_ = false;
  int64_t max_seq_len_ = 0;
  int64_t vocab_size_ = 0;
  std::vector<int64_t> eos_ids_;
};

}  // namespace hf2pte::llm
