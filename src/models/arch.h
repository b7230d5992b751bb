// Architecture identity as data: one ArchTraits row per Hugging Face
// model_type (docs/STYLE.md rule 3). Behaviour lives in the shared decoder
// builder, driven by these traits; no switch over architectures. Which blocks
// a layer has follows from the row: an empty tensor-name template means "this
// layer has no such tensor" (no pre-norm for OLMo 2, no gate for GPT-NeoX...).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace hf2pte::models {

/// Tensor-name templates use "{}" (or "{0}") for the layer index and "{1}" for
/// the expert index. Norm names end in ".weight"; LayerNorm biases are found by
/// replacing it with ".bias".
struct TensorNames {
  std::string_view embed = "model.embed_tokens.weight";
  std::string_view pos_embed = "";  ///< learned absolute positions [max_pos, hidden] (GPT-2); set = no RoPE
  std::string_view attn_norm = "model.layers.{}.input_layernorm.weight";  ///< "" = no pre-attention norm
  std::string_view q = "model.layers.{}.self_attn.q_proj";  ///< + ".weight" / ".bias"
  std::string_view k = "model.layers.{}.self_attn.k_proj";
  std::string_view v = "model.layers.{}.self_attn.v_proj";
  std::string_view qkv = "";  ///< fused q/k/v rows (see ArchTraits::qkv_per_head); replaces q/k/v when set
  std::string_view q_norm = "";  ///< q/k norm weights (Qwen3, Gemma 3, OLMo 2); "" = none
  std::string_view k_norm = "";
  std::string_view o = "model.layers.{}.self_attn.o_proj";
  std::string_view post_attn_norm = "";  ///< norm of the attention output before the residual add
  std::string_view ffn_norm = "model.layers.{}.post_attention_layernorm.weight";  ///< "" = none
  std::string_view post_ffn_norm = "";   ///< norm of the MLP output before the residual add
  std::string_view gate = "model.layers.{}.mlp.gate_proj";  ///< "" = plain MLP down(act(up(x)))
  std::string_view up = "model.layers.{}.mlp.up_proj";
  std::string_view gate_up = "";  ///< fused [gate; up] rows (phi3), replaces gate/up when set
  std::string_view down = "model.layers.{}.mlp.down_proj";
  std::string_view router = "";  ///< MoE router [experts, hidden]; set = the MLP is a mixture of experts
  std::string_view expert_gate = "";  ///< per-expert templates ("{0}" layer, "{1}" expert)
  std::string_view expert_up = "";
  std::string_view expert_down = "";
  std::string_view shared_gate = "";  ///< shared expert added to every token (Qwen2-MoE), + ".weight"
  std::string_view shared_up = "";
  std::string_view shared_down = "";
  std::string_view shared_expert_gate = "";  ///< [1, hidden]: the shared expert is scaled by sigmoid(x . w)
  std::string_view router_bias = "";  ///< [experts] added to the router logits (gpt-oss)
  /// Router scores + this [experts] bias choose the experts, the plain scores weigh them (DeepSeek-V3).
  std::string_view router_correction_bias = "";
  /// Experts fused in one tensor per layer, stored [in, out] (gpt-oss):
  /// gate_up [experts, hidden, 2 * I] with gate j in column 2j and up j in 2j + 1,
  /// down [experts, I, hidden]; each with "<name>_bias" [experts, width].
  std::string_view fused_expert_gate_up = "";
  std::string_view fused_expert_down = "";
  std::string_view sinks = "";  ///< per-head attention sink logits [heads] (gpt-oss)
  /// Multi-head latent attention (DeepSeek-V3): q_a / q_b (or q when no q LoRA),
  /// kv_a_proj_with_mqa, kv_b; the two latent norms (+ ".weight").
  std::string_view q_a = "";
  std::string_view q_a_norm = "";
  std::string_view q_b = "";
  std::string_view kv_a = "";
  std::string_view kv_a_norm = "";
  std::string_view kv_b = "";
  std::string_view final_norm = "model.norm.weight";
  std::string_view lm_head = "lm_head";  ///< + ".weight" / ".bias"
};

/// Which normalisation every norm of the architecture is.
enum class NormKind : uint8_t {
  kRms,         ///< x * rsqrt(mean(x^2) + eps) * w (Llama)
  kRmsOnePlus,  ///< same, times (1 + w) (Gemma)
  kLayerNorm,   ///< (x - mean) * rsqrt(var + eps) * w + b (Phi, GPT-NeoX)
};

/// What a q/k norm normalises over.
enum class QkNormScope : uint8_t {
  kPerHead,    ///< each head's head_dim values, weight [head_dim] (Qwen3, Gemma 3)
  kFullWidth,  ///< the whole projection, weight [heads * head_dim] (OLMo 2)
};

/// Biases that an architecture always has (no config key switches them).
struct BiasTraits {
  bool qkv = false;      ///< Qwen2, Phi
  bool o = false;        ///< Phi
  bool mlp = false;      ///< Phi, GPT-NeoX
  bool lm_head = false;  ///< Phi
};

/// How a mixture of experts picks and weighs its experts.
enum class RouterKind : uint8_t {
  kSoftmaxTopK,     ///< softmax over the router logits, top k (Mixtral, Qwen-MoE, gpt-oss)
  kSigmoidGrouped,  ///< sigmoid scores, group-limited top k on corrected scores (DeepSeek-V3)
};

/// What mixes tokens in each layer.
enum class MixerKind : uint8_t {
  kAttention,      ///< the shared decoder (decoder.cpp)
  kSelectiveScan,  ///< Mamba's state-space block (mamba.cpp)
};

/// How an architecture is checked (printed by `hf2pte export --list-architectures`).
enum class ArchStatus : uint8_t {
  kReference,  ///< an independent reference fixture (tests/e2e_fixtures_test.cpp)
  kProperty,   ///< no reference: properties checked against fixtures (tests/families_test.cpp)
};

/// "verified against reference fixture" / "property-tested".
std::string_view arch_status_name(ArchStatus status);

struct ArchTraits {
  std::string_view model_type;    ///< config.json "model_type"
  std::string_view architecture;  ///< the HF class exported (for metadata)
  TensorNames names;
  BiasTraits bias;
  NormKind norm = NormKind::kRms;
  QkNormScope qk_norm = QkNormScope::kPerHead;
  /// Attention and MLP read the same residual stream and are added together
  /// (Phi, GPT-NeoX); without ffn_norm both share the attention norm's output.
  bool parallel_residual = false;
  /// Fused qkv rows are interleaved per head [q_h0 | k_h0 | v_h0 | q_h1 ...]
  /// (GPT-NeoX) instead of [q | k | v] blocks (Phi-3).
  bool qkv_per_head = false;
  /// Embeddings are multiplied by sqrt(hidden_size), rounded to the model dtype (Gemma).
  bool scale_embeddings = false;
  /// Linear weights are stored [in, out] (GPT-2's Conv1D), transposed while streaming.
  bool conv1d_weights = false;
  /// A leading prefix some checkpoints of the type omit ("transformer." on the original
  /// GPT-2 uploads): names are looked up with it, then without it.
  std::string_view optional_prefix = "";
  /// Checkpoint tensors that are derived buffers, never weights (ignored, not an error).
  std::string_view ignored_suffixes[3] = {"rotary_emb.inv_freq", "", ""};
  MixerKind mixer = MixerKind::kAttention;
  RouterKind router = RouterKind::kSoftmaxTopK;
  /// gpt-oss experts: (clamp(up) + 1) * g * sigmoid(1.702 g), g = min(gate, limit).
  bool clamped_swiglu = false;
  ArchStatus status = ArchStatus::kReference;
};

/// Every supported architecture, in table order.
std::span<const ArchTraits> all_architectures();
/// The row for `model_type`, or nullptr.
const ArchTraits* find_architecture(std::string_view model_type);
/// "llama, mistral, phi3, qwen2": for error messages.
std::string supported_model_types();

}  // namespace hf2pte::models
