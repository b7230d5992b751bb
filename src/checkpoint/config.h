// Typed view of config.json for the decoder-only models hf2pte exports (the
// Llama family plus Qwen3, Gemma 1-3, OLMo 2, Phi, GPT-NeoX, Mixtral,
// Qwen3-MoE, Granite, SmolLM3, StableLM, Starcoder2 and Qwen2-MoE), with the defaults transformers applies when a key is absent. The raw JSON stays available on the Checkpoint; this struct
// holds what the shared decoder builder needs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace hf2pte {

class Checkpoint;

/// Which attention a decoder layer uses (transformers' `layer_types`).
enum class AttentionKind : uint8_t {
  kFull,     ///< "full_attention": causal over the whole context
  kSliding,  ///< "sliding_attention": query i sees key j iff 0 <= i - j < sliding_window
};

/// Hyper-parameters of a Llama-family checkpoint, defaults applied.
struct LlamaFamilyConfig {
  std::string model_type;  ///< as written; the builder decides whether it is supported
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  ///< config value, else hidden_size / num_attention_heads
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  /// "rms_norm_eps", or "layer_norm_eps" for the LayerNorm models (phi, gpt_neox).
  double rms_norm_eps = 0;
  /// "rope_theta", rope_parameters.rope_theta (transformers 5.x) or GPT-NeoX's "rotary_emb_base".
  double rope_theta = 0;
  /// Fraction of head_dim that is rotated ("partial_rotary_factor", GPT-NeoX "rotary_pct").
  double partial_rotary_factor = 1.0;
  /// RoPE theta of sliding-window layers (Gemma 3 "rope_local_base_freq"); nullopt: rope_theta.
  std::optional<double> rope_local_base_freq;
  bool tie_word_embeddings = false;
  /// The config key `attention_bias` (Llama: biases on q, k, v and o). Qwen2's
  /// q/k/v biases are not a config key (modeling_qwen2 hard-codes them), so
  /// they belong to the architecture's traits, not here.
  bool attention_bias = false;
  bool mlp_bias = false;  ///< the config key `mlp_bias` (Llama only)
  /// The MLP activation: "hidden_activation" when set (Gemma), else "hidden_act";
  /// Gemma classes default to gelu_pytorch_tanh whatever hidden_act says.
  std::string hidden_act;
  /// Attention scores are scaled by query_pre_attn_scalar^-0.5 instead of head_dim^-0.5 (Gemma 2/3).
  std::optional<double> query_pre_attn_scalar;
  /// scores = tanh(scores / cap) * cap before the mask (Gemma 2).
  std::optional<double> attn_logit_softcapping;
  /// logits = tanh(logits / cap) * cap (Gemma 2).
  std::optional<double> final_logit_softcapping;
  bool qk_layernorm = false;          ///< Phi "qk_layernorm" (not supported when true)
  bool use_parallel_residual = false;  ///< "use_parallel_residual" (GPT-NeoX, StableLM); Phi: always true
  bool scale_attn_weights = true;     ///< GPT-2: scores / sqrt(head_dim) (false: unscaled, not supported)
  bool scale_attn_by_inverse_layer_idx = false;  ///< GPT-2 (not supported when true)
  /// Mixture of experts (Mixtral "num_local_experts", Qwen3-MoE "num_experts"); 0 = dense.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  /// Renormalise the top-k routing weights (Qwen3-MoE key; Mixtral always does).
  bool norm_topk_prob = true;
  int64_t moe_intermediate_size = 0;  ///< Qwen3-MoE expert width; Mixtral's is intermediate_size
  int64_t decoder_sparse_step = 1;    ///< Qwen3-MoE: every n-th layer is MoE
  std::vector<int64_t> mlp_only_layers;  ///< Qwen3-MoE: dense layers
  /// The window of sliding layers, or nullopt when no layer slides.
  std::optional<int64_t> sliding_window;
  /// One entry per layer (size num_hidden_layers).
  std::vector<AttentionKind> layer_types;
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  ///< from an int or a list; empty when none
  std::optional<int64_t> pad_token_id;
  /// "original_max_position_embeddings" at the top level (Phi-3 default 4096; any
  /// type when present): longrope's pretrained context. nullopt when absent.
  std::optional<int64_t> original_max_position_embeddings;
  std::string torch_dtype;  ///< "torch_dtype" or (transformers 5.x) "dtype"; "" when absent
  /// Granite's multipliers: embeddings times embedding_multiplier; attention and
  /// MLP outputs times residual_multiplier before each residual add; logits
  /// divided by logits_scaling; attention_multiplier replaces head_dim^-0.5.
  double embedding_multiplier = 1.0;
  double residual_multiplier = 1.0;
  double logits_scaling = 1.0;
  std::optional<double> attention_multiplier;
  /// One entry per layer: false = NoPE layer without RoPE (SmolLM3
  /// "no_rope_layers" / "no_rope_layer_interval"); empty = every layer rotates.
  std::vector<bool> rope_layers;
  /// Biases on q, k and v only (StableLM "use_qkv_bias"); attention_bias adds o too.
  bool qkv_bias = false;
  /// Qwen2-MoE: width of the shared expert gated by sigmoid(shared_expert_gate); 0 = none.
  int64_t shared_expert_intermediate_size = 0;
  /// RoPE scaling as written ("rope_scaling", or 5.x "rope_parameters"); null
  /// when absent, null, or plain RoPE ({"rope_type": "default"} plus rope_theta
  /// / partial_rotary_factor only). Anything else is kept verbatim: the
  /// builder decides which scalings it supports.
  nlohmann::json rope_scaling;
  /// gpt-oss: the experts' gate is clamped from above and the linear half to
  /// [-limit, limit] ("swiglu_limit"); nullopt for every other family.
  std::optional<double> swiglu_limit;
  /// DeepSeek-V3 multi-head latent attention; nullopt: standard attention.
  struct LatentAttention {
    int64_t q_lora_rank = 0;  ///< 0: a plain q_proj (V2-Lite)
    int64_t kv_lora_rank = 0;
    int64_t qk_nope_head_dim = 0;
    int64_t qk_rope_head_dim = 0;
    int64_t v_head_dim = 0;
    bool rope_interleave = true;  ///< the rope dims rotate in pairs (2j, 2j + 1)
  };
  std::optional<LatentAttention> mla;
  /// DeepSeek-V3 routing: experts in n_group groups, the topk_group best groups
  /// (by the sum of their two best scores) are eligible; the weights are scaled
  /// by routed_scaling_factor; n_shared_experts shared experts; layers below
  /// first_k_dense_replace are dense.
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double routed_scaling_factor = 1.0;
  int64_t n_shared_experts = 0;
  int64_t first_k_dense_replace = 0;
};

/// Parses `config` (config.json's content). `where` is its path, used in
/// errors ("config.json: missing required field 'hidden_size' (DIR/config.json)").
/// Required: model_type, hidden_size, intermediate_size, num_hidden_layers,
/// num_attention_heads, vocab_size. Other keys take the defaults of the
/// model_type's transformers config class (see config.cpp for the table and
/// sources); an unknown model_type takes LlamaConfig's defaults, and rejecting
/// it is the caller's job. All errors are kInvalidInput.
Result<LlamaFamilyConfig> parse_llama_family_config(const nlohmann::json& config, const std::string& where);

/// Same, reading the Checkpoint's config.json.
Result<LlamaFamilyConfig> parse_llama_family_config(const Checkpoint& checkpoint);

/// True for the model_types whose defaults the table knows (llama, mistral, qwen2, phi3,
/// qwen3, gemma, gemma2, gemma3_text, olmo2, phi, gpt_neox, mixtral, qwen3_moe, granite,
/// smollm3, stablelm, starcoder2, qwen2_moe).
bool is_llama_family_model_type(std::string_view model_type);

/// "full_attention" / "sliding_attention".
std::string_view attention_kind_name(AttentionKind kind);

/// Hyper-parameters of a Mamba (v1) checkpoint, MambaConfig's defaults applied
/// (transformers 4.55.0: hidden 768, state 16, 32 layers, expand 2, conv 4,
/// time_step_rank "auto" = ceil(hidden / 16), eps 1e-5, no linear biases, conv
/// bias, vocab 50280, tied head, bos = eos = pad = 0).
struct MambaConfig {
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  ///< "intermediate_size", else expand * hidden_size
  int64_t state_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t conv_kernel = 0;
  int64_t time_step_rank = 0;
  int64_t vocab_size = 0;
  double layer_norm_epsilon = 0;
  bool use_bias = false;       ///< in_proj / out_proj biases
  bool use_conv_bias = true;
  bool residual_in_fp32 = true;  ///< the residual stream stays f32 in a 16-bit model
  bool tie_word_embeddings = true;
  std::string hidden_act;      ///< only "silu" is supported
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;
  std::string torch_dtype;
};

/// Parses a Mamba config.json (errors as parse_llama_family_config).
Result<MambaConfig> parse_mamba_config(const nlohmann::json& config, const std::string& where);

/// Hyper-parameters of a BERT-style encoder (bert, roberta, xlm-roberta,
/// distilbert), defaults of the transformers config class applied.
/// DistilBERT's own spellings (dim, n_layers, n_heads, hidden_dim, activation)
/// are read into the BERT names.
struct EncoderConfig {
  std::string model_type;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  int64_t type_vocab_size = 0;   ///< 0 for distilbert (no token type embeddings)
  double layer_norm_eps = 0;     ///< distilbert: 1e-12 (fixed in its modeling code)
  std::string hidden_act;        ///< "hidden_act" (distilbert: "activation")
  std::optional<int64_t> pad_token_id;
  bool tie_word_embeddings = true;
  std::vector<std::string> architectures;  ///< config.json "architectures" (may be empty)
  std::string torch_dtype;
};

/// Parses an encoder config.json. Fields that change the math and are not
/// implemented (position_embedding_type other than "absolute", is_decoder,
/// add_cross_attention) are kNotSupported naming the field; bad values kInvalidInput.
Result<EncoderConfig> parse_encoder_config(const nlohmann::json& config, const std::string& where);

/// True for bert, roberta, xlm-roberta and distilbert.
bool is_encoder_model_type(std::string_view model_type);

}  // namespace hf2pte
