// Architecture identity as data: one ArchTraits row per Hugging Face
// model_type (docs/STYLE.md rule 3). Behaviour lives in the shared decoder
// builder, driven by these traits; no switch over architectures.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace hf2pte::models {

/// Tensor-name templates use "{}" for the layer index.
struct TensorNames {
  std::string_view embed = "model.embed_tokens.weight";
  std::string_view attn_norm = "model.layers.{}.input_layernorm.weight";
  std::string_view q = "model.layers.{}.self_attn.q_proj";  ///< + ".weight" / ".bias"
  std::string_view k = "model.layers.{}.self_attn.k_proj";
  std::string_view v = "model.layers.{}.self_attn.v_proj";
  std::string_view qkv = "";  ///< fused [q; k; v] rows (phi3), replaces q/k/v when set
  std::string_view o = "model.layers.{}.self_attn.o_proj";
  std::string_view ffn_norm = "model.layers.{}.post_attention_layernorm.weight";
  std::string_view gate = "model.layers.{}.mlp.gate_proj";
  std::string_view up = "model.layers.{}.mlp.up_proj";
  std::string_view gate_up = "";  ///< fused [gate; up] rows (phi3), replaces gate/up when set
  std::string_view down = "model.layers.{}.mlp.down_proj";
  std::string_view final_norm = "model.norm.weight";
  std::string_view lm_head = "lm_head.weight";
};

struct ArchTraits {
  std::string_view model_type;    ///< config.json "model_type"
  std::string_view architecture;  ///< the HF class exported (for metadata)
  TensorNames names;
  /// q/k/v projections always carry a bias (Qwen2 has no config switch for it).
  bool qkv_bias_always = false;
  /// Checkpoint tensors that are derived buffers, never weights (ignored, not an error).
  std::string_view ignored_suffixes[2] = {"rotary_emb.inv_freq", ""};
};

/// Every supported architecture, in table order.
std::span<const ArchTraits> all_architectures();
/// The row for `model_type`, or nullptr.
const ArchTraits* find_architecture(std::string_view model_type);
/// "llama, mistral, phi3, qwen2": for error messages.
std::string supported_model_types();

}  // namespace hf2pte::models
