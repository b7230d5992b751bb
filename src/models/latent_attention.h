// Multi-head latent attention (DeepSeek-V2/V3), in the absorbed form: the KV
// cache holds the normalised compressed kv (kv_lora_rank) and the rotated
// shared rope key (qk_rope_head_dim) per token, not per-head keys and values.
// kv_b_proj is applied on the query side (q_nope W_kb) and after attention
// (W_vb), which is the same product re-associated (docs/decisions.md, "MLA").
#pragma once

#include <optional>
#include <string>

#include "checkpoint/config.h"
#include "models/blocks.h"

namespace hf2pte::models {

struct LatentAttentionWeights {
  std::optional<LinearWeights> q_a;  ///< q LoRA down-projection; none: q_nope / q_pe read x directly
  std::optional<NormWeights> q_a_norm;
  LinearWeights q_nope, q_pe;        ///< q_b_proj (or q_proj) rows per head, split; q_pe de-interleaved
  LinearWeights kv_latent, k_pe;     ///< kv_a_proj_with_mqa rows [compressed kv | k_pe]
  NormWeights kv_norm;
  ValueId w_kb = -1;                 ///< [heads, qk_nope, kv_lora_rank]: kv_b_proj's k_nope rows
  ValueId w_vb = -1;                 ///< [heads, v_head_dim, kv_lora_rank]: its v rows
};

/// Reads layer `layer`'s MLA weights (names from the architecture's row).
Result<LatentAttentionWeights> load_latent_attention(BlockBuilder& b, const ArchTraits& arch,
                                                     const LlamaFamilyConfig& c, int64_t layer);

/// What the latent attention of one layer needs from the decoder.
struct LatentAttentionInputs {
  SymInt S;
  ValueId cache_position = -1;
  int64_t max_seq_len = 0;
  bool kv_cache = true;
  std::optional<SymInt> end;  ///< --attention-span written
  ValueId cos = -1, sin = -1;  ///< RoPE rows [S, 1, qk_rope_head_dim]
  ValueId mask = -1;           ///< [S, keys] bool
};

/// h [S, hidden] -> attention output [S, hidden] (through o_proj).
Result<ValueId> latent_attention(BlockBuilder& b, const LlamaFamilyConfig& c, const LatentAttentionWeights& w,
                                 const LinearWeights& o_proj, const LatentAttentionInputs& in, ValueId h,
                                 const std::string& p);

/// qk_head_dim^-0.5, times mscale^2 under YaRN with mscale_all_dim (DeepSeek's softmax scale).
Result<double> latent_attention_scale(const LlamaFamilyConfig& c);

}  // namespace hf2pte::models
