#include "llm/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace hf2pte::llm {

Sampler::Sampler(const SamplingConfig& config) : config_(config), rng_(config.seed) {}

double Sampler::uniform() { return double(rng_() >> 11) * 0x1.0p-53; }

int64_t Sampler::sample(std::span<const float> logits, std::span<const int64_t> history) {
  work_.assign(logits.begin(), logits.end());
  const int64_t vocab = int64_t(work_.size());
  if (vocab == 0) return 0;
  if (config_.repetition_penalty != 1.0) {
    // Each seen id once, as HF gathers then scatters: positive logits are
    // divided by the penalty and negative ones multiplied.
    std::vector<bool> seen(size_t(vocab), false);
    for (int64_t id : history) {
      if (id < 0 || id >= vocab || seen[size_t(id)]) continue;
      seen[size_t(id)] = true;
      float& l = work_[size_t(id)];
      l = l > 0 ? float(l / config_.repetition_penalty) : float(l * config_.repetition_penalty);
    }
  }
  if (config_.temperature <= 0) {
    return int64_t(std::max_element(work_.begin(), work_.end()) - work_.begin());
  }
  candidates_.clear();
  candidates_.reserve(size_t(vocab));
  for (int64_t i = 0; i < vocab; ++i) candidates_.emplace_back(float(work_[size_t(i)] / config_.temperature), i);
  // Sort descending (ties by id, so the order is deterministic).
  auto by_logit = [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; };
  size_t keep = candidates_.size();
  if (config_.top_k > 0 && size_t(config_.top_k) < keep) {
    keep = size_t(config_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + long(keep), candidates_.end(), by_logit);
    candidates_.resize(keep);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  // Softmax over the survivors.
  const float mx = candidates_.front().first;
  std::vector<double> probs(candidates_.size());
  double sum = 0;
  for (size_t i = 0; i < candidates_.size(); ++i) sum += probs[i] = std::exp(double(candidates_[i].first - mx));
  for (auto& p : probs) p /= sum;
  if (config_.top_p < 1.0) {
    // Smallest prefix whose mass reaches top_p (at least one token).
    double cum = 0;
    size_t n = 0;
    while (n < probs.size()) {
      cum += probs[n++];
      if (cum >= config_.top_p) break;
    }
    keep = std::min(keep, n);
  }
  if (config_.min_p > 0) {
    const double floor = config_.min_p * probs.front();
    size_t n = 1;
    while (n < std::min(keep, probs.size()) && probs[n] >= floor) ++n;
    keep = std::min(keep, n);
  }
  keep = std::max<size_t>(1, std::min(keep, probs.size()));
  double mass = 0;
  for (size_t i = 0; i < keep; ++i) mass += probs[i];
  double r = uniform() * mass;
  for (size_t i = 0; i < keep; ++i) {
    r -= probs[i];
    if (r < 0) return candidates_[i].second;
  }
  return candidates_[keep - 1].second;
}

}  // namespace hf2pte::llm
