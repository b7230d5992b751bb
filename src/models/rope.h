// Rotary embedding frequencies: plain RoPE and the Hugging Face rope_scaling
// types that only change inv_freq (linear, dynamic within the trained
// context, llama3). Tables are computed in double at export.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "graph/graph.h"

namespace hf2pte::models {

/// What determines one set of RoPE tables.
struct RopeSpec {
  int64_t rotary_dim = 0;  ///< rotated dims per head (head_dim * partial_rotary_factor)
  double theta = 10000.0;
  nlohmann::json scaling;  ///< config rope_scaling (null: plain RoPE)
  int64_t max_position_embeddings = 0;
};

/// inv_freq[j], j < rotary_dim / 2, after scaling. Scaling types whose effect is
/// not a fixed inv_freq (yarn, longrope, ...) are kNotSupported naming the type.
Result<std::vector<double>> rope_inv_freq(const RopeSpec& spec, int64_t max_seq_len);

/// cos/sin tables [max_seq_len, rotary_dim] of rotate_half RoPE (angles repeated
/// over both halves), rounded to float32 once.
struct RopeTables {
  graph::ConstantData cos, sin;
};
Result<RopeTables> rope_tables(const RopeSpec& spec, int64_t max_seq_len);

}  // namespace hf2pte::models
