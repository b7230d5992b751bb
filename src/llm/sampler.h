// Next-token selection: greedy argmax or seeded sampling with the usual
// Hugging Face warpers (repetition penalty, temperature, top-k, top-p, min-p).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace hf2pte::llm {

/// Sampling settings; the defaults mean greedy decoding without penalties.
struct SamplingConfig {
  double temperature = 0.0;         ///< 0: greedy (argmax); otherwise logits are divided by it
  int64_t top_k = 0;                ///< keep the k most likely tokens (0: off)
  double top_p = 1.0;               ///< keep the smallest set with cumulative probability >= p (1: off)
  double min_p = 0.0;               ///< drop tokens below min_p * max probability (0: off)
  double repetition_penalty = 1.0;  ///< CTRL-style penalty on ids already seen (1: off)
  uint64_t seed = 0;                ///< PRNG seed: same seed, same program, same ids
};

/// Picks tokens from logits. The PRNG is std::mt19937_64, whose output
/// sequence the C++ standard fixes, and a draw is the top 53 bits of one
/// output scaled to [0, 1): the same seed gives the same ids on every
/// platform (std::uniform_real_distribution is not portable, so it is not used).
class Sampler {
 public:
  explicit Sampler(const SamplingConfig& config);

  /// Chooses the next id; `history` (prompt and generated ids) feeds the repetition penalty.
  int64_t sample(std::span<const float> logits, std::span<const int64_t> history);

 private:
  double uniform();
  SamplingConfig config_;
  std::mt19937_64 rng_;
  std::vector<float> work_;  // reused logits buffer
  std::vector<std::pair<float, int64_t>> candidates_;
};

}  // namespace hf2pte::llm
