// Rotary embedding frequencies: plain RoPE and every Hugging Face rope_scaling
// / rope_parameters type (default, linear, dynamic, yarn, longrope, llama3),
// with transformers' modeling_rope_utils semantics. Tables are computed in
// double at export; the types whose HF frequencies depend on the current
// sequence length (dynamic, longrope) are evaluated for a sequence of
// max_seq_len tokens (docs/decisions.md, "RoPE scalings that depend on the
// sequence length").
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "graph/graph.h"

namespace hf2pte::models {

/// What determines one set of RoPE tables.
struct RopeSpec {
  int64_t rotary_dim = 0;  ///< rotated dims per head (head_dim * partial_rotary_factor)
  double theta = 10000.0;
  nlohmann::json scaling;  ///< config rope_scaling / rope_parameters (null: plain RoPE)
  int64_t max_position_embeddings = 0;
  /// The top-level config key (Phi-3); longrope then uses factor = max / original.
  std::optional<int64_t> original_max_position_embeddings;
};

/// inv_freq[j] (j < rotary_dim / 2) after scaling, and the factor HF multiplies
/// cos and sin by (yarn, longrope; 1 otherwise).
struct RopeFrequencies {
  std::vector<double> inv_freq;
  double attention_factor = 1.0;
};

/// The frequencies for a program whose sequences reach max_seq_len tokens.
/// Unknown types and unknown fields are kNotSupported naming them; missing or
/// malformed numbers are kInvalidInput naming the key.
Result<RopeFrequencies> rope_frequencies(const RopeSpec& spec, int64_t max_seq_len);
/// rope_frequencies(...).inv_freq.
Result<std::vector<double>> rope_inv_freq(const RopeSpec& spec, int64_t max_seq_len);

/// cos/sin tables [max_seq_len, rotary_dim] of rotate_half RoPE (angles repeated
/// over both halves), times the attention factor, rounded to float32 once.
struct RopeTables {
  graph::ConstantData cos, sin;
};
Result<RopeTables> rope_tables(const RopeSpec& spec, int64_t max_seq_len, ScalarType dtype = ScalarType::kFloat);

}  // namespace hf2pte::models
