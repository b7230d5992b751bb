// TextGenerator: prefill + decode on an LLM program that follows the
// ExecuTorch LLM contract (forward(input_ids[1,S], cache_position[S]) ->
// logits[1,S,V], KV cache in mutable buffers). Greedy decoding for now;
// sampling, tokenizers and streaming text are the generation issue's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/status.h"
#include "runtime/program.h"

namespace hf2pte::llm {

struct GenerationConfig {
  int64_t max_new_tokens = 32;
  bool stop_at_eos = true;
};

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  double time_to_first_token = 0;
};

class TextGenerator {
 public:
  /// Loads `forward` and reads the metadata constant methods (max_seq_len, eos ids).
  static Result<std::unique_ptr<TextGenerator>> create(std::shared_ptr<rt::Program> program,
                                                       const rt::KernelRegistry& registry);

  /// Runs the prompt, then greedy steps; `on_token` sees every new id as it is
  /// produced (return false to stop). Returns the generated ids.
  Result<std::vector<int64_t>> generate(const std::vector<int64_t>& prompt, const GenerationConfig& config,
                                        const std::function<bool(int64_t)>& on_token, GenerationStats* stats);

  /// One forward call at positions [start, start + ids.size()): logits [S, V], row-major.
  Result<std::vector<float>> forward(const std::vector<int64_t>& ids, int64_t start);

  int64_t max_seq_len() const { return max_seq_len_; }
  int64_t vocab_size() const { return vocab_size_; }
  const std::vector<int64_t>& eos_ids() const { return eos_ids_; }

 private:
  std::shared_ptr<rt::Program> program_;
  std::unique_ptr<rt::Method> forward_;
  int64_t max_seq_len_ = 0;
  int64_t vocab_size_ = 0;
  std::vector<int64_t> eos_ids_;
};

}  // namespace hf2pte::llm
