// Entry point of the models layer: checkpoint folder -> graph::Program that
// follows the ExecuTorch LLM program contract (docs/llm-contract.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "graph/graph.h"

namespace hf2pte::models {

struct BuildOptions {
  /// Maximum sequence (= KV cache) length; default min(max_position_embeddings, 2048).
  std::optional<int64_t> max_seq_len;
  ScalarType dtype = ScalarType::kFloat;
  std::string exporter_version = "hf2pte";
  /// Decoders: attend over the written cache positions [0, max(cache_position] + 1)
  /// only (a data-dependent width) instead of all max_seq_len (--attention-span
  /// written / full). Unset: written wherever the model attends over a KV cache
  /// (decoders without --use-custom-sdpa), full elsewhere; BuiltModel says which.
  std::optional<bool> attend_written_only;
  /// Decoders: a static KV cache in mutable buffers and a cache_position input
  /// (the LLM contract). false: forward(input_ids[1, S]) only, positions 0..S-1,
  /// attention over this call's S tokens, no mutable state (--no-kv-cache).
  bool kv_cache = true;
  /// Decoders: the caches as [1, max_seq_len, kv_heads, head_dim] written by
  /// upstream's llama::update_cache and read in place by llama::custom_sdpa
  /// (optimum-executorch's --use_custom_sdpa --use_custom_kv_cache;
  /// --use-custom-sdpa). Standard causal attention only.
  bool custom_sdpa = false;
  /// Decoders: logits of the call's last position only,
  /// [1, 1, V] (ExportConfig::last_logits).
  bool last_logits = false;
};

struct BuiltModel {
  graph::Program program;
  std::string model_type;
  std::string architecture;
  int64_t max_seq_len = 0;
  std::vector<std::string> warnings;
  /// Some layer routes tokens to top-k experts: a discrete choice, which a
  /// 16-bit program may make differently from the fp32 model on near ties.
  bool routed_experts = false;
  /// A recurrent state carries every token's rounding into the next (Mamba's
  /// selective scan): its 16-bit distance to the fp32 model is reported, not
  /// bounded, as for routed experts (docs/decisions.md, "Half-precision programs").
  bool recurrent_state = false;
  /// The attention span the program was built with (BuildOptions::attend_written_only resolved).
  bool attends_written_only = false;
  /// forward returns the last position's logits only (BuildOptions::last_logits honoured).
  bool last_logits_only = false;
};

/// The LLM contract's metadata constant methods (docs/llm-contract.md) that
/// every decoder program carries.
struct LlmMetadata {
  int64_t max_seq_len = 0;
  int64_t vocab_size = 0;
  int64_t n_layers = 0;
  std::optional<int64_t> bos_id;
  std::vector<int64_t> eos_ids;
};
void set_llm_metadata(const LlmMetadata& md, const BuildOptions& opt, BuiltModel* out);

/// Builds the program for the checkpoint's model_type (error lists the supported
/// types), then checks that every checkpoint tensor was consumed or ignored.
Result<BuiltModel> build_model(Checkpoint& ckpt, const BuildOptions& options);

}  // namespace hf2pte::models
