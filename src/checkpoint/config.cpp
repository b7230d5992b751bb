#include "checkpoint/config.h"

#include <cmath>

#include "checkpoint/checkpoint.h"
#include "checkpoint/json_fields.h"

namespace hf2pte {

using nlohmann::json;

namespace {

// How a model_type decides which layers slide (transformers' modeling code).
enum class SlidingRule : uint8_t {
  kNever,      // LlamaModel has no sliding window; the key is ignored
  kAllLayers,  // Mistral, Phi-3: every layer uses sliding_window when it is set
  kQwen2,      // only with use_sliding_window, and only layers >= max_window_layers
  kEvenLayers, // Gemma 2: layers 0, 2, 4, ... slide
  kPattern,    // Gemma 3: layer i is global iff (i + 1) % sliding_window_pattern == 0
  kNoPeLayers, // SmolLM3: with use_sliding_window, the NoPE layers slide
};

// The defaults of each transformers config class for keys a config.json may
// omit. save_pretrained (use_diff=True) omits a key only when its value equals
// both the PretrainedConfig default and the class default, so for these keys
// the class default is what transformers itself would read back.
//
// Sources (huggingface/transformers; values unchanged from v4.46.3, the version
// that wrote our fixtures, to the 5.x dataclass rewrite; checked in
// src/transformers/models/<type>/configuration_<type>.py):
//   LlamaConfig:   num_key_value_heads None (-> num_attention_heads), head_dim None
//                  (-> hidden_size // num_attention_heads), hidden_act "silu",
//                  max_position_embeddings 2048, rms_norm_eps 1e-6, bos 1, eos 2, pad None,
//                  tie_word_embeddings False, rope_theta 10000.0, attention_bias False,
//                  mlp_bias False.
//   MistralConfig: num_key_value_heads 8 (None -> num_attention_heads), head_dim None,
//                  hidden_act "silu", max_position_embeddings 4096*32 = 131072,
//                  rms_norm_eps 1e-6, bos 1, eos 2, pad None, tie_word_embeddings False,
//                  rope_theta 10000.0, sliding_window 4096 (every layer).
//   Qwen2Config:   num_key_value_heads 32 (None -> num_attention_heads), hidden_act "silu",
//                  max_position_embeddings 32768, rms_norm_eps 1e-6, bos/eos/pad None
//                  (not passed, so PretrainedConfig's None), tie_word_embeddings False,
//                  rope_theta 10000.0, use_sliding_window False, sliding_window 4096,
//                  max_window_layers 28.
//   Phi3Config:    num_key_value_heads None (-> num_attention_heads), hidden_act "silu",
//                  max_position_embeddings 4096, original_max_position_embeddings 4096,
//                  rms_norm_eps 1e-5, bos 1, eos 32000, pad 32000, tie_word_embeddings False,
//                  rope_theta 10000.0, sliding_window None (every layer when set).
// Newer classes (same files, transformers 4.51.3 for qwen3 / qwen3_moe / gemma3 / olmo2):
//   Qwen3Config:   as Qwen2 plus head_dim 128; tie False.
//   Qwen3MoeConfig: num_key_value_heads 4, as Qwen2 otherwise; num_experts 128,
//                  num_experts_per_tok 8, moe_intermediate_size 768, norm_topk_prob False,
//                  decoder_sparse_step 1, mlp_only_layers [].
//   GemmaConfig:   num_key_value_heads 16, head_dim 256, hidden_activation None (->
//                  gelu_pytorch_tanh), max_position_embeddings 8192, rms_norm_eps 1e-6,
//                  bos 2, eos 1, pad 0, tie_word_embeddings True.
//   Gemma2Config:  as Gemma plus query_pre_attn_scalar 256, sliding_window 4096 (even layers),
//                  attn_logit_softcapping 50.0, final_logit_softcapping 30.0.
//   Gemma3TextConfig: num_key_value_heads 4, max_position_embeddings 131072, rope_theta 1e6,
//                  rope_local_base_freq 10000, sliding_window 4096, sliding_window_pattern 6,
//                  softcappings None, query_pre_attn_scalar 256.
//   Olmo2Config:   num_key_value_heads None, max_position_embeddings 2048, rms_norm_eps 1e-5,
//                  bos None, eos 50279, pad 1, tie False.
//   PhiConfig:     num_key_value_heads None, hidden_act gelu_new, max_position_embeddings 2048,
//                  layer_norm_eps 1e-5, partial_rotary_factor 0.5, qk_layernorm False,
//                  bos 1, eos 2, tie False.
//   GPTNeoXConfig: hidden_act gelu, rotary_pct 0.25, rotary_emb_base 10000,
//                  max_position_embeddings 2048, layer_norm_eps 1e-5, bos 0, eos 2,
//                  use_parallel_residual True, attention_bias True, tie False.
//   GPT2Config:    n_positions 1024, n_inner None (-> 4 * n_embd), activation_function gelu_new,
//                  layer_norm_epsilon 1e-5, bos/eos 50256, tie_word_embeddings True (PretrainedConfig's);
//                  attribute_map hidden_size=n_embd, num_hidden_layers=n_layer,
//                  num_attention_heads=n_head, max_position_embeddings=n_positions.
//   MixtralConfig: num_key_value_heads 8, max_position_embeddings 131072, rms_norm_eps 1e-5,
//                  rope_theta 1e6, sliding_window None, num_local_experts 8,
//                  num_experts_per_tok 2, bos 1, eos 2, tie False.
// Families without a reference fixture (transformers main, checked for this table):
//   GraniteConfig: as Llama (num_key_value_heads None, max_position_embeddings 2048,
//                  rms_norm_eps 1e-6, bos 1, eos 2, tie False) plus embedding_multiplier,
//                  logits_scaling, residual_multiplier, attention_multiplier all 1.0.
//   SmolLM3Config: num_key_value_heads 4, max_position_embeddings 32768, rms_norm_eps 1e-6,
//                  rope_theta 2e6, bos 128000, eos 128001, pad 128004, tie True,
//                  no_rope_layers None (-> layer i uses RoPE iff (i + 1) % no_rope_layer_interval
//                  != 0, interval 4), use_sliding_window False (NoPE layers slide when set).
//   StableLmConfig: num_key_value_heads 32, max_position_embeddings 4096, layer_norm_eps 1e-5,
//                  partial_rotary_factor 0.25, use_qkv_bias False, qk_layernorm False,
//                  use_parallel_residual False, bos 0, eos 0, tie False.
//   Starcoder2Config: num_key_value_heads 2, hidden_act gelu_pytorch_tanh,
//                  max_position_embeddings 4096, norm_epsilon 1e-5, bos/eos 50256,
//                  sliding_window None (every layer when set), use_bias True, tie True.
//   Qwen2MoeConfig: num_key_value_heads 16, as Qwen2 otherwise; num_experts 60,
//                  num_experts_per_tok 4, moe_intermediate_size 1408,
//                  shared_expert_intermediate_size 5632, norm_topk_prob False.
// Note that tie_word_embeddings defaults to False for all four: the True of
// PretrainedConfig applies only to classes that do not pass their own value
// (Gemma, GPT-2, BERT), which is why those omit the key when tied.
// num_key_value_heads follows the classes too: an absent key is 8 for mistral
// and 32 for qwen2 (what transformers loads), an explicit null means
// num_attention_heads for all.
// Columns of the newer classes (defaults = the Llama-family values).
struct FamilyDefaults {
  std::optional<int64_t> head_dim = std::nullopt;  // nullopt: hidden_size / num_attention_heads
  double rope_theta = 10000.0;
  double partial_rotary_factor = 1.0;
  std::string_view hidden_act = "silu";
  bool gemma_activation = false;  // "hidden_activation" wins; its None means gelu_pytorch_tanh
  bool tie_word_embeddings = false;
  std::string_view eps_key = "rms_norm_eps";
  bool attention_bias = false;
  std::optional<double> query_pre_attn_scalar = std::nullopt;
  std::optional<double> attn_logit_softcapping = std::nullopt;
  std::optional<double> final_logit_softcapping = std::nullopt;
  std::optional<double> rope_local_base_freq = std::nullopt;
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  bool norm_topk_prob = true;
  int64_t moe_intermediate_size = 0;
  bool gpt2_keys = false;  // n_embd, n_layer, ... (GPT2Config's attribute_map); n_inner None = 4 * n_embd
  bool use_parallel_residual = false;  // the class default (Phi has no key and is always parallel)
  bool granite_multipliers = false;    // embedding/attention/residual multipliers, logits_scaling
  bool no_rope_layers = false;         // SmolLM3 no_rope_layers / no_rope_layer_interval (default 4)
  std::string_view qkv_bias_key = "";  // StableLM "use_qkv_bias" (default false): q/k/v biases
  std::string_view use_bias_key = "";  // Starcoder2 "use_bias" (default true): every linear but lm_head
  int64_t shared_expert_intermediate_size = 0;  // Qwen2-MoE
  std::optional<double> swiglu_limit = std::nullopt;  // gpt-oss
  std::string_view default_rope_scaling = "";  // the class's rope_scaling when the key is absent (JSON)
  bool deepseek_keys = false;  // MLA ranks, grouped routing, n_routed_experts, first_k_dense_replace
};

struct Defaults {
  std::string_view model_type;
  std::optional<int64_t> num_key_value_heads;  // nullopt: num_attention_heads
  int64_t max_position_embeddings;
  double rms_norm_eps;
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> eos_token_id;
  std::optional<int64_t> pad_token_id;
  SlidingRule sliding_rule;
  std::optional<int64_t> sliding_window;
  std::optional<int64_t> original_max_position_embeddings;
  FamilyDefaults family{};
};

constexpr int64_t kQwen2DefaultMaxWindowLayers = 28;
constexpr int64_t kGemma3DefaultSlidingWindowPattern = 6;
constexpr auto kNone = std::nullopt;

const Defaults kDefaults[] = {
    {"llama", std::nullopt, 2048, 1e-6, 1, 2, std::nullopt, SlidingRule::kNever, std::nullopt, std::nullopt},
    {"mistral", 8, 4096 * 32, 1e-6, 1, 2, std::nullopt, SlidingRule::kAllLayers, 4096, std::nullopt},
    {"qwen2", 32, 32768, 1e-6, std::nullopt, std::nullopt, std::nullopt, SlidingRule::kQwen2, 4096, std::nullopt},
    {"phi3", std::nullopt, 4096, 1e-5, 1, 32000, 32000, SlidingRule::kAllLayers, std::nullopt, 4096},
    {"qwen3", 32, 32768, 1e-6, kNone, kNone, kNone, SlidingRule::kQwen2, 4096, kNone, {.head_dim = 128}},
    {"qwen3_moe", 4, 32768, 1e-6, kNone, kNone, kNone, SlidingRule::kQwen2, 4096, kNone, {.num_experts = 128,
     .num_experts_per_tok = 8, .norm_topk_prob = false, .moe_intermediate_size = 768}},
    {"gemma", 16, 8192, 1e-6, 2, 1, 0, SlidingRule::kNever, kNone, kNone, {.head_dim = 256,
     .hidden_act = "gelu_pytorch_tanh", .gemma_activation = true, .tie_word_embeddings = true}},
    {"gemma2", 16, 8192, 1e-6, 2, 1, 0, SlidingRule::kEvenLayers, 4096, kNone, {.head_dim = 256,
     .hidden_act = "gelu_pytorch_tanh", .gemma_activation = true, .tie_word_embeddings = true,
     .query_pre_attn_scalar = 256.0, .attn_logit_softcapping = 50.0, .final_logit_softcapping = 30.0}},
    {"gemma3_text", 4, 131072, 1e-6, 2, 1, 0, SlidingRule::kPattern, 4096, kNone, {.head_dim = 256,
     .rope_theta = 1e6, .hidden_act = "gelu_pytorch_tanh", .gemma_activation = true, .tie_word_embeddings = true,
     .query_pre_attn_scalar = 256.0, .rope_local_base_freq = 10000.0}},
    {"olmo2", kNone, 2048, 1e-5, kNone, 50279, 1, SlidingRule::kNever, kNone, kNone},
    {"phi", kNone, 2048, 1e-5, 1, 2, kNone, SlidingRule::kNever, kNone, kNone, {.partial_rotary_factor = 0.5,
     .hidden_act = "gelu_new", .eps_key = "layer_norm_eps", .use_parallel_residual = true}},
    {"gpt_neox", kNone, 2048, 1e-5, 0, 2, kNone, SlidingRule::kNever, kNone, kNone, {.partial_rotary_factor = 0.25,
     .hidden_act = "gelu", .eps_key = "layer_norm_eps", .attention_bias = true, .use_parallel_residual = true}},
    {"gpt2", kNone, 1024, 1e-5, 50256, 50256, kNone, SlidingRule::kNever, kNone, kNone, {.hidden_act = "gelu_new",
     .tie_word_embeddings = true, .eps_key = "layer_norm_epsilon", .gpt2_keys = true}},
    {"mixtral", 8, 4096 * 32, 1e-5, 1, 2, kNone, SlidingRule::kAllLayers, kNone, kNone, {.rope_theta = 1e6,
     .num_experts = 8, .num_experts_per_tok = 2}},
    {"granite", kNone, 2048, 1e-6, 1, 2, kNone, SlidingRule::kNever, kNone, kNone, {.granite_multipliers = true}},
    {"smollm3", 4, 32768, 1e-6, 128000, 128001, 128004, SlidingRule::kNoPeLayers, kNone, kNone, {.rope_theta = 2e6,
     .tie_word_embeddings = true, .no_rope_layers = true}},
    {"stablelm", 32, 4096, 1e-5, 0, 0, kNone, SlidingRule::kNever, kNone, kNone, {.partial_rotary_factor = 0.25,
     .eps_key = "layer_norm_eps", .qkv_bias_key = "use_qkv_bias"}},
    {"starcoder2", 2, 4096, 1e-5, 50256, 50256, kNone, SlidingRule::kAllLayers, kNone, kNone, {
     .hidden_act = "gelu_pytorch_tanh", .tie_word_embeddings = true, .eps_key = "norm_epsilon", .use_bias_key = "use_bias"}},
    {"qwen2_moe", 16, 32768, 1e-6, kNone, kNone, kNone, SlidingRule::kQwen2, 4096, kNone, {.num_experts = 60,
     .num_experts_per_tok = 4, .norm_topk_prob = false, .moe_intermediate_size = 1408,
     .shared_expert_intermediate_size = 5632}},
    // GptOssConfig (transformers 4.55.0): even layers slide over 128; the yarn dict is its default.
    {"gpt_oss", 8, 131072, 1e-5, kNone, kNone, kNone, SlidingRule::kEvenLayers, 128, kNone, {.head_dim = 64,
     .rope_theta = 150000.0, .attention_bias = true, .num_experts = 128, .num_experts_per_tok = 4,
     .swiglu_limit = 7.0, .default_rope_scaling = R"({"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
     "beta_slow": 1.0, "truncate": false, "original_max_position_embeddings": 4096})"}},
    // DeepseekV3Config (4.55.0): 128 heads (no GQA), 256 routed experts in 8 groups, top-4 groups, top-8;
    // head_dim is set to qk_rope_head_dim (HF does the same), so hidden need not divide by heads.
    {"deepseek_v3", 128, 4096, 1e-6, 0, 1, kNone, SlidingRule::kNever, kNone, kNone, {.head_dim = 64, .num_experts = 256,
     .num_experts_per_tok = 8, .moe_intermediate_size = 2048, .deepseek_keys = true}},
};

const Defaults* find_defaults(std::string_view model_type) {
  for (const auto& d : kDefaults) {
    if (d.model_type == model_type) return &d;
  }
  return nullptr;
}

Status must_be_positive(std::string_view key, int64_t v, const std::string& where) {
  HF2PTE_CHECK_OR_RETURN(v > 0, kInvalidInput, "{}: field '{}' must be positive; expected > 0, got {} ({})",
                         json_label(where), key, v, where);
  return Status::ok();
}

/// More layers than any model has: the count sizes per-layer tables before any
/// weight is read, so a hostile config must not reach them.
constexpr int64_t kMaxLayers = 4096;

Status layer_count_in_range(std::string_view key, int64_t v, const std::string& where) {
  HF2PTE_CHECK_OR_RETURN(v <= kMaxLayers, kInvalidInput, "{}: field '{}' is too large; expected <= {}, got {} ({})",
                         json_label(where), key, kMaxLayers, v, where);
  return Status::ok();
}

Status must_be_positive_finite(std::string_view key, double v, const std::string& where) {
  HF2PTE_CHECK_OR_RETURN(std::isfinite(v) && v > 0, kInvalidInput,
                         "{}: field '{}' must be positive; expected > 0, got {} ({})", json_label(where), key, v,
                         where);
  return Status::ok();
}

Result<int64_t> required_positive(const json& config, std::string_view key, const std::string& where) {
  HF2PTE_ASSIGN_OR_RETURN(int64_t v, get_int(config, key, where));
  HF2PTE_RETURN_IF_ERROR(must_be_positive(key, v, where));
  return v;
}

// Absent keeps the class default, explicit null gives nullopt (what
// transformers does with bos/eos/pad_token_id).
Result<std::optional<int64_t>> token_id(const json& config, std::string_view key, std::optional<int64_t> fallback,
                                        const std::string& where) {
  if (!config.contains(key)) return fallback;
  return get_optional_int(config, key, where);
}

// RoPE: theta, partial rotary factor and scaling, from the 4.x keys
// (rope_theta, partial_rotary_factor, rope_scaling) or the 5.x rope_parameters.
// As in transformers' convert_rope_params_to_dict: a non-null rope_scaling
// wins over rope_parameters, and values inside the dict win over top-level keys.
Status parse_rope(const json& config, const Defaults& d, const std::string& where, LlamaFamilyConfig* out) {
  const json* rope = nullptr;
  std::string rope_key;
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) continue;
    HF2PTE_CHECK_OR_RETURN(it->is_object(), kInvalidInput,
                           "{}: field '{}' has wrong type; expected object or null, got {} ({})", json_label(where),
                           key, json_type_name(*it), where);
    rope = &*it;
    rope_key = key;
    break;
  }
  // GPT-NeoX spells them rotary_emb_base / rotary_pct.
  const char* theta_key = config.contains("rope_theta") || !config.contains("rotary_emb_base") ? "rope_theta" : "rotary_emb_base";
  const char* partial_key =
      config.contains("partial_rotary_factor") || !config.contains("rotary_pct") ? "partial_rotary_factor" : "rotary_pct";
  HF2PTE_ASSIGN_OR_RETURN(out->rope_theta, get_double_or(config, theta_key, d.family.rope_theta, where));
  HF2PTE_ASSIGN_OR_RETURN(out->partial_rotary_factor,
                          get_double_or(config, partial_key, d.family.partial_rotary_factor, where));
  if (d.family.rope_local_base_freq) {
    HF2PTE_ASSIGN_OR_RETURN(double local, get_double_or(config, "rope_local_base_freq", *d.family.rope_local_base_freq, where));
    HF2PTE_RETURN_IF_ERROR(must_be_positive_finite("rope_local_base_freq", local, where));
    out->rope_local_base_freq = local;
  }
  out->rope_scaling = json();  // null
  json class_default;
  if (rope == nullptr && !config.contains("rope_scaling") && !config.contains("rope_parameters") &&
      !d.family.default_rope_scaling.empty()) {
    class_default = json::parse(d.family.default_rope_scaling);
    rope = &class_default;
    rope_key = "rope_scaling";
  }
  if (rope != nullptr) {
    if (rope->contains("rope_theta")) {
      auto v = get_double(*rope, "rope_theta", where);
      if (!v.is_ok()) return v.status().with_context(rope_key);
      out->rope_theta = *v;
    }
    if (rope->contains("partial_rotary_factor")) {
      auto v = get_double(*rope, "partial_rotary_factor", where);
      if (!v.is_ok()) return v.status().with_context(rope_key);
      out->partial_rotary_factor = *v;
    }
    // Plain RoPE spelled as a dict ({"rope_type": "default", "rope_theta": ...},
    // what 5.x writes for every model) is no scaling at all.
    bool plain = true;
    for (const auto& [k, v] : rope->items()) {
      if (k == "rope_type" || k == "type") {
        plain = plain && v.is_string() && v.get_ref<const std::string&>() == "default";
      } else if (k != "rope_theta" && k != "partial_rotary_factor") {
        plain = false;
      }
    }
    if (!plain) out->rope_scaling = *rope;
  }
  HF2PTE_RETURN_IF_ERROR(must_be_positive_finite("rope_theta", out->rope_theta, where));
  HF2PTE_CHECK_OR_RETURN(std::isfinite(out->partial_rotary_factor) && out->partial_rotary_factor > 0 &&
                             out->partial_rotary_factor <= 1,
                         kInvalidInput, "{}: field 'partial_rotary_factor' out of range; expected (0, 1], got {} ({})",
                         json_label(where), out->partial_rotary_factor, where);
  return Status::ok();
}

// Newer transformers write the per-layer list `layer_types`; when present it
// overrides the class's rule.
Status parse_explicit_layer_types(const json& types, const std::string& where, LlamaFamilyConfig* out) {
  const int64_t layers = out->num_hidden_layers;
  HF2PTE_CHECK_OR_RETURN(types.is_array(), kInvalidInput,
                         "{}: field 'layer_types' has wrong type; expected array, got {} ({})", json_label(where),
                         json_type_name(types), where);
  HF2PTE_CHECK_OR_RETURN(int64_t(types.size()) == layers, kInvalidInput,
                         "{}: field 'layer_types' has wrong length; expected {} (num_hidden_layers), got {} ({})",
                         json_label(where), layers, types.size(), where);
  for (size_t i = 0; i < types.size(); ++i) {
    const json& t = types[i];
    if (t == "full_attention") {
      out->layer_types[i] = AttentionKind::kFull;
    } else if (t == "sliding_attention") {
      out->layer_types[i] = AttentionKind::kSliding;
    } else {
      return make_error(ErrorCode::kInvalidInput,
                        "{}: bad layer_types[{}]; expected \"full_attention\" or \"sliding_attention\", got {} ({})",
                        json_label(where), i, t.dump(), where);
    }
  }
  return Status::ok();
}

Status parse_layer_types(const json& config, const Defaults& d, const std::string& where, LlamaFamilyConfig* out) {
  const int64_t layers = out->num_hidden_layers;
  out->layer_types.assign(size_t(layers), AttentionKind::kFull);
  if (d.sliding_rule == SlidingRule::kNever) {
    out->sliding_window.reset();
    return Status::ok();
  }
  if (config.contains("sliding_window")) {
    HF2PTE_ASSIGN_OR_RETURN(out->sliding_window, get_optional_int(config, "sliding_window", where));
  } else {
    out->sliding_window = d.sliding_window;
  }
  switch (d.sliding_rule) {
    case SlidingRule::kNever:
      break;
    case SlidingRule::kAllLayers:
      if (out->sliding_window) out->layer_types.assign(size_t(layers), AttentionKind::kSliding);
      break;
    case SlidingRule::kQwen2: {
      HF2PTE_ASSIGN_OR_RETURN(bool use, get_bool_or(config, "use_sliding_window", false, where));
      // Qwen2Config: sliding_window = sliding_window if use_sliding_window else None.
      if (!use) out->sliding_window.reset();
      if (out->sliding_window) {
        HF2PTE_ASSIGN_OR_RETURN(int64_t first,
                                get_int_or(config, "max_window_layers", kQwen2DefaultMaxWindowLayers, where));
        for (int64_t i = std::max<int64_t>(first, 0); i < layers; ++i) {
          out->layer_types[size_t(i)] = AttentionKind::kSliding;
        }
      }
      break;
    }
    case SlidingRule::kEvenLayers:
      for (int64_t i = 0; out->sliding_window && i < layers; i += 2) {
        out->layer_types[size_t(i)] = AttentionKind::kSliding;
      }
      break;
    case SlidingRule::kNoPeLayers: {
      HF2PTE_ASSIGN_OR_RETURN(bool use, get_bool_or(config, "use_sliding_window", false, where));
      if (!use) out->sliding_window.reset();
      for (int64_t i = 0; out->sliding_window && i < layers; ++i) {
        if (!out->rope_layers.empty() && !out->rope_layers[size_t(i)]) out->layer_types[size_t(i)] = AttentionKind::kSliding;
      }
      break;
    }
    case SlidingRule::kPattern: {
      HF2PTE_ASSIGN_OR_RETURN(int64_t pattern, get_int_or(config, "sliding_window_pattern",
                                                          kGemma3DefaultSlidingWindowPattern, where));
      HF2PTE_RETURN_IF_ERROR(must_be_positive("sliding_window_pattern", pattern, where));
      for (int64_t i = 0; out->sliding_window && i < layers; ++i) {
        if ((i + 1) % pattern != 0) out->layer_types[size_t(i)] = AttentionKind::kSliding;
      }
      break;
    }
  }
  auto explicit_types = config.find("layer_types");
  if (explicit_types != config.end() && !explicit_types->is_null()) {
    HF2PTE_RETURN_IF_ERROR(parse_explicit_layer_types(*explicit_types, where, out));
  }
  bool any_sliding = false;
  for (AttentionKind k : out->layer_types) any_sliding = any_sliding || k == AttentionKind::kSliding;
  HF2PTE_CHECK_OR_RETURN(!any_sliding || out->sliding_window.has_value(), kInvalidInput,
                         "{}: layer_types has sliding_attention layers; expected a sliding_window, got null ({})",
                         json_label(where), where);
  if (out->sliding_window) {
    HF2PTE_RETURN_IF_ERROR(must_be_positive("sliding_window", *out->sliding_window, where));
  }
  return Status::ok();
}

// Optional doubles whose absence means the class default and whose null means "off".
Result<std::optional<double>> optional_double(const json& config, std::string_view key,
                                              std::optional<double> fallback, const std::string& where) {
  if (!config.contains(key)) return fallback;
  return get_optional_double(config, key, where);
}

// Granite multipliers, SmolLM3 NoPE layers, StableLM / Starcoder2 bias switches.
Status parse_newer_family_keys(const json& config, const Defaults& d, const std::string& where, LlamaFamilyConfig* c) {
  if (d.family.granite_multipliers) {
    for (auto [key, field] : {std::pair{"embedding_multiplier", &c->embedding_multiplier},
                              std::pair{"residual_multiplier", &c->residual_multiplier},
                              std::pair{"logits_scaling", &c->logits_scaling}}) {
      HF2PTE_ASSIGN_OR_RETURN(*field, get_double_or(config, key, 1.0, where));
      HF2PTE_RETURN_IF_ERROR(must_be_positive_finite(key, *field, where));
    }
    HF2PTE_ASSIGN_OR_RETURN(double attn, get_double_or(config, "attention_multiplier", 1.0, where));
    HF2PTE_RETURN_IF_ERROR(must_be_positive_finite("attention_multiplier", attn, where));
    c->attention_multiplier = attn;
  }
  if (d.family.no_rope_layers) {
    const int64_t layers = c->num_hidden_layers;
    HF2PTE_ASSIGN_OR_RETURN(auto list, get_optional_int_list(config, "no_rope_layers", where));
    if (list) {
      // SmolLM3: 1 = the layer uses RoPE, 0 = NoPE; at least one entry per layer.
      HF2PTE_CHECK_OR_RETURN(int64_t(list->size()) >= layers, kInvalidInput,
                             "{}: field 'no_rope_layers' too short; expected {} entries (num_hidden_layers), got {} "
                             "({})",
                             json_label(where), layers, list->size(), where);
      for (int64_t i = 0; i < layers; ++i) c->rope_layers.push_back((*list)[size_t(i)] != 0);
    } else {
      HF2PTE_ASSIGN_OR_RETURN(int64_t interval, get_int_or(config, "no_rope_layer_interval", 4, where));
      HF2PTE_RETURN_IF_ERROR(must_be_positive("no_rope_layer_interval", interval, where));
      for (int64_t i = 0; i < layers; ++i) c->rope_layers.push_back((i + 1) % interval != 0);
    }
  }
  if (!d.family.qkv_bias_key.empty()) {
    HF2PTE_ASSIGN_OR_RETURN(c->qkv_bias, get_bool_or(config, d.family.qkv_bias_key, false, where));
  }
  if (!d.family.use_bias_key.empty()) {
    HF2PTE_ASSIGN_OR_RETURN(bool bias, get_bool_or(config, d.family.use_bias_key, true, where));
    c->attention_bias = c->mlp_bias = bias;
  }
  return Status::ok();
}

// DeepSeek-V3: latent attention ranks and grouped routing (DeepseekV3Config
// 4.55.0 defaults: q_lora_rank 1536, kv_lora_rank 512, qk_nope 128, qk_rope 64,
// v 128, n_group 8, topk_group 4, routed_scaling_factor 2.5, 1 shared expert,
// first_k_dense_replace 3, rope_interleave true).
Status parse_deepseek_keys(const json& config, const std::string& where, LlamaFamilyConfig* c) {
  LlamaFamilyConfig::LatentAttention m;
  if (config.contains("q_lora_rank")) {
    HF2PTE_ASSIGN_OR_RETURN(auto q, get_optional_int(config, "q_lora_rank", where));
    m.q_lora_rank = q.value_or(0);  // null: plain q_proj
  } else {
    m.q_lora_rank = 1536;
  }
  HF2PTE_ASSIGN_OR_RETURN(m.kv_lora_rank, get_int_or(config, "kv_lora_rank", 512, where));
  HF2PTE_ASSIGN_OR_RETURN(m.qk_nope_head_dim, get_int_or(config, "qk_nope_head_dim", 128, where));
  HF2PTE_ASSIGN_OR_RETURN(m.qk_rope_head_dim, get_int_or(config, "qk_rope_head_dim", 64, where));
  HF2PTE_ASSIGN_OR_RETURN(m.v_head_dim, get_int_or(config, "v_head_dim", 128, where));
  HF2PTE_ASSIGN_OR_RETURN(m.rope_interleave, get_bool_or(config, "rope_interleave", true, where));
  for (auto [key, v] : {std::pair{"kv_lora_rank", m.kv_lora_rank}, std::pair{"qk_nope_head_dim", m.qk_nope_head_dim},
                        std::pair{"qk_rope_head_dim", m.qk_rope_head_dim}, std::pair{"v_head_dim", m.v_head_dim}}) {
    HF2PTE_RETURN_IF_ERROR(must_be_positive(key, v, where));
  }
  if (m.q_lora_rank != 0) HF2PTE_RETURN_IF_ERROR(must_be_positive("q_lora_rank", m.q_lora_rank, where));
  HF2PTE_CHECK_OR_RETURN(m.qk_rope_head_dim % 2 == 0, kInvalidInput,
                         "{}: field 'qk_rope_head_dim' must be even for rotary embeddings; got {} ({})",
                         json_label(where), m.qk_rope_head_dim, where);
  c->mla = m;
  // HF's head_dim is the rope width; the builder reads the MLA fields instead.
  c->head_dim = m.qk_rope_head_dim;
  HF2PTE_ASSIGN_OR_RETURN(c->num_experts, get_int_or(config, "n_routed_experts", 256, where));
  HF2PTE_ASSIGN_OR_RETURN(c->n_group, get_int_or(config, "n_group", 8, where));
  HF2PTE_ASSIGN_OR_RETURN(c->topk_group, get_int_or(config, "topk_group", 4, where));
  HF2PTE_ASSIGN_OR_RETURN(c->routed_scaling_factor, get_double_or(config, "routed_scaling_factor", 2.5, where));
  HF2PTE_ASSIGN_OR_RETURN(c->n_shared_experts, get_int_or(config, "n_shared_experts", 1, where));
  HF2PTE_ASSIGN_OR_RETURN(c->first_k_dense_replace, get_int_or(config, "first_k_dense_replace", 3, where));
  HF2PTE_RETURN_IF_ERROR(must_be_positive("n_routed_experts", c->num_experts, where));
  HF2PTE_RETURN_IF_ERROR(must_be_positive("n_group", c->n_group, where));
  HF2PTE_RETURN_IF_ERROR(must_be_positive_finite("routed_scaling_factor", c->routed_scaling_factor, where));
  HF2PTE_CHECK_OR_RETURN(c->num_experts % c->n_group == 0, kInvalidInput,
                         "{}: n_routed_experts must be a multiple of n_group; expected a multiple of {}, got {} ({})",
                         json_label(where), c->n_group, c->num_experts, where);
  const int64_t per_group = c->num_experts / c->n_group;
  HF2PTE_CHECK_OR_RETURN(c->topk_group >= 1 && c->topk_group <= c->n_group, kInvalidInput,
                         "{}: field 'topk_group' out of range; expected 1..{}, got {} ({})", json_label(where),
                         c->n_group, c->topk_group, where);
  HF2PTE_CHECK_OR_RETURN(per_group >= 2, kInvalidInput,
                         "{}: a group needs at least 2 experts (its score is the sum of its best two); got {} ({})",
                         json_label(where), per_group, where);
  HF2PTE_CHECK_OR_RETURN(c->n_shared_experts >= 0 && c->first_k_dense_replace >= 0, kInvalidInput,
                         "{}: n_shared_experts and first_k_dense_replace must be >= 0; got {} and {} ({})",
                         json_label(where), c->n_shared_experts, c->first_k_dense_replace, where);
  return Status::ok();
}

// The keys of the newer families: activation spelling, Gemma attention
// scaling and soft-capping, Phi / GPT-NeoX switches, mixture of experts.
Status parse_family_keys(const json& config, const Defaults& d, const std::string& where, LlamaFamilyConfig* c) {
  HF2PTE_ASSIGN_OR_RETURN(c->hidden_act, get_string_or(config, "hidden_act", std::string(d.family.hidden_act), where));
  if (d.family.gemma_activation) {
    // transformers' Gemma classes read hidden_activation; its None means
    // gelu_pytorch_tanh (the early-2024 GELU fix), whatever hidden_act says.
    HF2PTE_ASSIGN_OR_RETURN(auto act, get_optional_string(config, "hidden_activation", where));
    c->hidden_act = act.value_or(std::string(d.family.hidden_act));
  }
  HF2PTE_ASSIGN_OR_RETURN(c->query_pre_attn_scalar,
                          optional_double(config, "query_pre_attn_scalar", d.family.query_pre_attn_scalar, where));
  HF2PTE_ASSIGN_OR_RETURN(c->attn_logit_softcapping,
                          optional_double(config, "attn_logit_softcapping", d.family.attn_logit_softcapping, where));
  HF2PTE_ASSIGN_OR_RETURN(c->final_logit_softcapping,
                          optional_double(config, "final_logit_softcapping", d.family.final_logit_softcapping, where));
  for (const auto& [key, v] : {std::pair{"query_pre_attn_scalar", c->query_pre_attn_scalar},
                               std::pair{"attn_logit_softcapping", c->attn_logit_softcapping},
                               std::pair{"final_logit_softcapping", c->final_logit_softcapping}}) {
    if (v) HF2PTE_RETURN_IF_ERROR(must_be_positive_finite(key, *v, where));
  }
  HF2PTE_ASSIGN_OR_RETURN(c->qk_layernorm, get_bool_or(config, "qk_layernorm", false, where));
  HF2PTE_ASSIGN_OR_RETURN(c->use_parallel_residual,
                          get_bool_or(config, "use_parallel_residual", d.family.use_parallel_residual, where));
  HF2PTE_ASSIGN_OR_RETURN(c->scale_attn_weights, get_bool_or(config, "scale_attn_weights", true, where));
  HF2PTE_ASSIGN_OR_RETURN(c->scale_attn_by_inverse_layer_idx,
                          get_bool_or(config, "scale_attn_by_inverse_layer_idx", false, where));

  const char* experts_key = config.contains("num_local_experts") ? "num_local_experts" : "num_experts";
  HF2PTE_ASSIGN_OR_RETURN(c->num_experts, get_int_or(config, experts_key, d.family.num_experts, where));
  HF2PTE_ASSIGN_OR_RETURN(c->num_experts_per_tok, get_int_or(config, "num_experts_per_tok", d.family.num_experts_per_tok, where));
  HF2PTE_ASSIGN_OR_RETURN(c->norm_topk_prob, get_bool_or(config, "norm_topk_prob", d.family.norm_topk_prob, where));
  HF2PTE_ASSIGN_OR_RETURN(c->moe_intermediate_size,
                          get_int_or(config, "moe_intermediate_size", d.family.moe_intermediate_size, where));
  HF2PTE_ASSIGN_OR_RETURN(c->decoder_sparse_step, get_int_or(config, "decoder_sparse_step", 1, where));
  HF2PTE_ASSIGN_OR_RETURN(auto dense_layers, get_optional_int_list(config, "mlp_only_layers", where));
  c->mlp_only_layers = dense_layers.value_or(std::vector<int64_t>{});
  HF2PTE_ASSIGN_OR_RETURN(c->shared_expert_intermediate_size,
                          get_int_or(config, "shared_expert_intermediate_size",
                                     d.family.shared_expert_intermediate_size, where));
  HF2PTE_RETURN_IF_ERROR(parse_newer_family_keys(config, d, where, c));
  if (d.family.swiglu_limit) {
    HF2PTE_ASSIGN_OR_RETURN(double limit, get_double_or(config, "swiglu_limit", *d.family.swiglu_limit, where));
    HF2PTE_RETURN_IF_ERROR(must_be_positive_finite("swiglu_limit", limit, where));
    c->swiglu_limit = limit;
  }
  if (d.family.deepseek_keys) HF2PTE_RETURN_IF_ERROR(parse_deepseek_keys(config, where, c));
  if (c->num_experts > 0) {
    HF2PTE_CHECK_OR_RETURN(c->num_experts_per_tok > 0 && c->num_experts_per_tok <= c->num_experts, kInvalidInput,
                           "{}: field 'num_experts_per_tok' out of range; expected 1..{}, got {} ({})",
                           json_label(where), c->num_experts, c->num_experts_per_tok, where);
  }
  return Status::ok();
}

}  // namespace

bool is_llama_family_model_type(std::string_view model_type) { return find_defaults(model_type) != nullptr; }

std::string_view attention_kind_name(AttentionKind kind) {
  return kind == AttentionKind::kSliding ? "sliding_attention" : "full_attention";
}

namespace {

Result<LlamaFamilyConfig> parse_renamed(const json& config, const Defaults& d, const std::string& where,
                                        LlamaFamilyConfig c) {

  HF2PTE_ASSIGN_OR_RETURN(c.hidden_size, required_positive(config, "hidden_size", where));
  HF2PTE_ASSIGN_OR_RETURN(c.intermediate_size, required_positive(config, "intermediate_size", where));
  HF2PTE_ASSIGN_OR_RETURN(c.num_hidden_layers, required_positive(config, "num_hidden_layers", where));
  HF2PTE_RETURN_IF_ERROR(layer_count_in_range("num_hidden_layers", c.num_hidden_layers, where));
  HF2PTE_ASSIGN_OR_RETURN(c.num_attention_heads, required_positive(config, "num_attention_heads", where));
  HF2PTE_ASSIGN_OR_RETURN(c.vocab_size, required_positive(config, "vocab_size", where));

  // num_key_value_heads: absent -> class default; null -> num_attention_heads.
  std::optional<int64_t> kv = d.num_key_value_heads;
  if (config.contains("num_key_value_heads")) {
    HF2PTE_ASSIGN_OR_RETURN(kv, get_optional_int(config, "num_key_value_heads", where));
  }
  c.num_key_value_heads = kv.value_or(c.num_attention_heads);
  HF2PTE_RETURN_IF_ERROR(must_be_positive("num_key_value_heads", c.num_key_value_heads, where));
  HF2PTE_CHECK_OR_RETURN(c.num_attention_heads % c.num_key_value_heads == 0, kInvalidInput,
                         "{}: num_attention_heads must be a multiple of num_key_value_heads; expected a multiple of "
                         "{}, got {} ({})",
                         json_label(where), c.num_key_value_heads, c.num_attention_heads, where);

  // head_dim: transformers computes hidden_size // num_attention_heads when it
  // is absent; we refuse a remainder instead of truncating, since q_proj's
  // shape would then not be [hidden, hidden].
  std::optional<int64_t> head_dim = d.family.head_dim;
  if (config.contains("head_dim")) {
    HF2PTE_ASSIGN_OR_RETURN(head_dim, get_optional_int(config, "head_dim", where));
  }
  if (head_dim) {
    HF2PTE_RETURN_IF_ERROR(must_be_positive("head_dim", *head_dim, where));
    c.head_dim = *head_dim;
  } else {
    HF2PTE_CHECK_OR_RETURN(c.hidden_size % c.num_attention_heads == 0, kInvalidInput,
                           "{}: hidden_size must be a multiple of num_attention_heads when head_dim is absent; "
                           "expected a multiple of {}, got {} ({})",
                           json_label(where), c.num_attention_heads, c.hidden_size, where);
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }

  HF2PTE_ASSIGN_OR_RETURN(c.max_position_embeddings,
                          get_int_or(config, "max_position_embeddings", d.max_position_embeddings, where));
  HF2PTE_RETURN_IF_ERROR(must_be_positive("max_position_embeddings", c.max_position_embeddings, where));
  HF2PTE_ASSIGN_OR_RETURN(c.rms_norm_eps, get_double_or(config, d.family.eps_key, d.rms_norm_eps, where));
  HF2PTE_RETURN_IF_ERROR(must_be_positive_finite(d.family.eps_key, c.rms_norm_eps, where));
  HF2PTE_ASSIGN_OR_RETURN(c.tie_word_embeddings,
                          get_bool_or(config, "tie_word_embeddings", d.family.tie_word_embeddings, where));
  HF2PTE_ASSIGN_OR_RETURN(c.attention_bias, get_bool_or(config, "attention_bias", d.family.attention_bias, where));
  HF2PTE_ASSIGN_OR_RETURN(c.mlp_bias, get_bool_or(config, "mlp_bias", false, where));
  HF2PTE_RETURN_IF_ERROR(parse_family_keys(config, d, where, &c));

  HF2PTE_RETURN_IF_ERROR(parse_rope(config, d, where, &c));
  HF2PTE_RETURN_IF_ERROR(parse_layer_types(config, d, where, &c));

  HF2PTE_ASSIGN_OR_RETURN(c.bos_token_id, token_id(config, "bos_token_id", d.bos_token_id, where));
  HF2PTE_ASSIGN_OR_RETURN(c.pad_token_id, token_id(config, "pad_token_id", d.pad_token_id, where));
  if (config.contains("eos_token_id")) {
    HF2PTE_ASSIGN_OR_RETURN(auto eos, get_optional_int_list(config, "eos_token_id", where));
    c.eos_token_ids = eos.value_or(std::vector<int64_t>{});
  } else if (d.eos_token_id) {
    c.eos_token_ids = {*d.eos_token_id};
  }

  auto top_original = config.find("original_max_position_embeddings");
  if (d.original_max_position_embeddings || (top_original != config.end() && !top_original->is_null())) {
    // HF's longrope reads the attribute from any config that has it.
    HF2PTE_ASSIGN_OR_RETURN(int64_t v, get_int_or(config, "original_max_position_embeddings",
                                                  d.original_max_position_embeddings.value_or(0), where));
    HF2PTE_RETURN_IF_ERROR(must_be_positive("original_max_position_embeddings", v, where));
    c.original_max_position_embeddings = v;
  }

  // transformers 5.x renamed torch_dtype to dtype; accept either.
  HF2PTE_ASSIGN_OR_RETURN(std::optional<std::string> dtype, get_optional_string(config, "torch_dtype", where));
  if (!dtype) {
    HF2PTE_ASSIGN_OR_RETURN(dtype, get_optional_string(config, "dtype", where));
  }
  c.torch_dtype = dtype.value_or("");
  return c;
}

}  // namespace

Result<LlamaFamilyConfig> parse_llama_family_config(const json& config, const std::string& where) {
  HF2PTE_CHECK_OR_RETURN(config.is_object(), kInvalidInput, "{}: expected a JSON object, got {} ({})",
                         json_label(where), json_type_name(config), where);
  LlamaFamilyConfig c;
  HF2PTE_ASSIGN_OR_RETURN(c.model_type, get_string(config, "model_type", where));
  // Unknown types get LlamaConfig's defaults; the builder rejects them by name.
  const Defaults& d = find_defaults(c.model_type) ? *find_defaults(c.model_type) : kDefaults[0];
  if (d.family.gpt2_keys) {
    // Read GPT-2's spellings through transformers' attribute_map, then parse as usual.
    json renamed = config;
    for (auto [from, to] : {std::pair{"n_embd", "hidden_size"}, std::pair{"n_layer", "num_hidden_layers"},
                            std::pair{"n_head", "num_attention_heads"}, std::pair{"n_positions", "max_position_embeddings"},
                            std::pair{"activation_function", "hidden_act"}}) {
      if (renamed.contains(from) && !renamed.contains(to)) renamed[to] = renamed[from];
    }
    auto inner = renamed.find("n_inner");
    if (!renamed.contains("intermediate_size") && renamed.contains("hidden_size") && renamed["hidden_size"].is_number_integer()) {
      renamed["intermediate_size"] =
          inner == renamed.end() || inner->is_null() ? json(4 * renamed["hidden_size"].get<int64_t>()) : json(*inner);
    }
    return parse_renamed(renamed, d, where, std::move(c));
  }
  return parse_renamed(config, d, where, std::move(c));
}


Result<LlamaFamilyConfig> parse_llama_family_config(const Checkpoint& checkpoint) {
  return parse_llama_family_config(checkpoint.config(), checkpoint.config_path());
}

// ---- Mamba --------------------------------------------------------------------

Result<MambaConfig> parse_mamba_config(const json& config, const std::string& where) {
  HF2PTE_CHECK_OR_RETURN(config.is_object(), kInvalidInput, "{}: expected a JSON object, got {} ({})",
                         json_label(where), json_type_name(config), where);
  MambaConfig c;
  HF2PTE_ASSIGN_OR_RETURN(c.hidden_size, get_int_or(config, "hidden_size", 768, where));
  HF2PTE_RETURN_IF_ERROR(must_be_positive("hidden_size", c.hidden_size, where));
  HF2PTE_ASSIGN_OR_RETURN(c.state_size, get_int_or(config, "state_size", 16, where));
  HF2PTE_RETURN_IF_ERROR(must_be_positive("state_size", c.state_size, where));
  HF2PTE_ASSIGN_OR_RETURN(c.num_hidden_layers, get_int_or(config, "num_hidden_layers", 32, where));
  HF2PTE_RETURN_IF_ERROR(must_be_positive("num_hidden_layers", c.num_hidden_layers, where));
  HF2PTE_RETURN_IF_ERROR(layer_count_in_range("num_hidden_layers", c.num_hidden_layers, where));
  HF2PTE_ASSIGN_OR_RETURN(int64_t expand, get_int_or(config, "expand", 2, where));
  HF2PTE_RETURN_IF_ERROR(must_be_positive("expand", expand, where));
  HF2PTE_ASSIGN_OR_RETURN(c.intermediate_size, get_int_or(config, "intermediate_size", expand * c.hidden_size, where));
  HF2PTE_RETURN_IF_ERROR(must_be_positive("intermediate_size", c.intermediate_size, where));
  HF2PTE_ASSIGN_OR_RETURN(c.conv_kernel, get_int_or(config, "conv_kernel", 4, where));
  HF2PTE_RETURN_IF_ERROR(must_be_positive("conv_kernel", c.conv_kernel, where));
  HF2PTE_CHECK_OR_RETURN(c.conv_kernel <= 64, kInvalidInput, "{}: field 'conv_kernel' too large; expected <= 64, got {} ({})",
                         json_label(where), c.conv_kernel, where);
  auto rank = config.find("time_step_rank");
  if (rank == config.end() || (rank->is_string() && rank->get<std::string>() == "auto")) {
    c.time_step_rank = (c.hidden_size + 15) / 16;  // MambaConfig: math.ceil(hidden_size / 16)
  } else {
    HF2PTE_ASSIGN_OR_RETURN(c.time_step_rank, get_int_or(config, "time_step_rank", 0, where));
    HF2PTE_RETURN_IF_ERROR(must_be_positive("time_step_rank", c.time_step_rank, where));
  }
  HF2PTE_ASSIGN_OR_RETURN(c.vocab_size, get_int_or(config, "vocab_size", 50280, where));
  HF2PTE_RETURN_IF_ERROR(must_be_positive("vocab_size", c.vocab_size, where));
  HF2PTE_ASSIGN_OR_RETURN(c.layer_norm_epsilon, get_double_or(config, "layer_norm_epsilon", 1e-5, where));
  HF2PTE_RETURN_IF_ERROR(must_be_positive_finite("layer_norm_epsilon", c.layer_norm_epsilon, where));
  HF2PTE_ASSIGN_OR_RETURN(c.use_bias, get_bool_or(config, "use_bias", false, where));
  HF2PTE_ASSIGN_OR_RETURN(c.use_conv_bias, get_bool_or(config, "use_conv_bias", true, where));
  HF2PTE_ASSIGN_OR_RETURN(c.residual_in_fp32, get_bool_or(config, "residual_in_fp32", true, where));
  HF2PTE_ASSIGN_OR_RETURN(c.tie_word_embeddings, get_bool_or(config, "tie_word_embeddings", true, where));
  HF2PTE_ASSIGN_OR_RETURN(c.hidden_act, get_string_or(config, "hidden_act", "silu", where));
  HF2PTE_CHECK_OR_RETURN(c.hidden_act == "silu", kNotSupported,
                         "{}: activation '{}' is not supported for mamba; expected silu ({})", json_label(where),
                         c.hidden_act, where);
  HF2PTE_ASSIGN_OR_RETURN(c.bos_token_id, token_id(config, "bos_token_id", 0, where));
  if (config.contains("eos_token_id")) {
    HF2PTE_ASSIGN_OR_RETURN(auto eos, get_optional_int_list(config, "eos_token_id", where));
    c.eos_token_ids = eos.value_or(std::vector<int64_t>{});
  } else {
    c.eos_token_ids = {0};
  }
  HF2PTE_ASSIGN_OR_RETURN(std::optional<std::string> dtype, get_optional_string(config, "torch_dtype", where));
  c.torch_dtype = dtype.value_or("");
  return c;
}

// ---- encoders (bert, roberta, xlm-roberta, distilbert) ----------------------

namespace {

// Class defaults (huggingface/transformers configuration_<type>.py, v4.46.3):
//   BertConfig:        vocab 30522, hidden 768, layers 12, heads 12, intermediate 3072,
//                      hidden_act "gelu", max_position_embeddings 512, type_vocab_size 2,
//                      layer_norm_eps 1e-12, pad_token_id 0, position_embedding_type "absolute".
//   RobertaConfig:     as BertConfig but vocab 50265, pad_token_id 1 (bos 0, eos 2).
//   XLMRobertaConfig:  as RobertaConfig but vocab 30522.
//   DistilBertConfig:  vocab 30522, dim 768, n_layers 6, n_heads 12, hidden_dim 3072,
//                      activation "gelu", max_position_embeddings 512, pad_token_id 0,
//                      sinusoidal_pos_embds False; no token types; every LayerNorm eps 1e-12
//                      (hard-coded in modeling_distilbert, not a config key).
// tie_word_embeddings: PretrainedConfig's True for all four.
struct EncoderDefaults {
  std::string_view model_type;
  int64_t vocab_size;
  int64_t type_vocab_size;  // 0: no token type embeddings
  std::optional<int64_t> pad_token_id;
  bool distilbert_keys;     // dim / n_layers / n_heads / hidden_dim / activation
};

constexpr EncoderDefaults kEncoderDefaults[] = {
    {"bert", 30522, 2, 0, false},
    {"roberta", 50265, 2, 1, false},
    {"xlm-roberta", 30522, 2, 1, false},
    {"distilbert", 30522, 0, 0, true},
};

const EncoderDefaults* find_encoder_defaults(std::string_view model_type) {
  for (const auto& d : kEncoderDefaults) {
    if (d.model_type == model_type) return &d;
  }
  return nullptr;
}

Result<int64_t> positive_or(const json& config, std::string_view key, int64_t fallback, const std::string& where) {
  HF2PTE_ASSIGN_OR_RETURN(int64_t v, get_int_or(config, key, fallback, where));
  HF2PTE_RETURN_IF_ERROR(must_be_positive(key, v, where));
  return v;
}

}  // namespace

bool is_encoder_model_type(std::string_view model_type) { return find_encoder_defaults(model_type) != nullptr; }

Result<EncoderConfig> parse_encoder_config(const json& config, const std::string& where) {
  HF2PTE_CHECK_OR_RETURN(config.is_object(), kInvalidInput, "{}: expected a JSON object, got {} ({})",
                         json_label(where), json_type_name(config), where);
  EncoderConfig c;
  HF2PTE_ASSIGN_OR_RETURN(c.model_type, get_string(config, "model_type", where));
  const EncoderDefaults* d = find_encoder_defaults(c.model_type);
  HF2PTE_CHECK_OR_RETURN(d != nullptr, kNotSupported, "{}: model_type '{}' is not an encoder ({})", json_label(where),
                         c.model_type, where);
  // Keys that select math this builder does not have: refused by name.
  HF2PTE_ASSIGN_OR_RETURN(std::string pos_type, get_string_or(config, "position_embedding_type", "absolute", where));
  HF2PTE_CHECK_OR_RETURN(pos_type == "absolute", kNotSupported,
                         "{}: position_embedding_type '{}' is not supported; expected \"absolute\" ({})",
                         json_label(where), pos_type, where);
  for (const char* key : {"is_decoder", "add_cross_attention"}) {
    HF2PTE_ASSIGN_OR_RETURN(bool on, get_bool_or(config, key, false, where));
    HF2PTE_CHECK_OR_RETURN(!on, kNotSupported, "{}: {} true is not supported; hf2pte exports encoders only ({})",
                           json_label(where), key, where);
  }
  const bool distil = d->distilbert_keys;
  HF2PTE_ASSIGN_OR_RETURN(c.hidden_size, positive_or(config, distil ? "dim" : "hidden_size", 768, where));
  HF2PTE_ASSIGN_OR_RETURN(c.num_hidden_layers, positive_or(config, distil ? "n_layers" : "num_hidden_layers", distil ? 6 : 12, where));
  HF2PTE_RETURN_IF_ERROR(layer_count_in_range(distil ? "n_layers" : "num_hidden_layers", c.num_hidden_layers, where));
  HF2PTE_ASSIGN_OR_RETURN(c.num_attention_heads, positive_or(config, distil ? "n_heads" : "num_attention_heads", 12, where));
  HF2PTE_ASSIGN_OR_RETURN(c.intermediate_size, positive_or(config, distil ? "hidden_dim" : "intermediate_size", 3072, where));
  HF2PTE_ASSIGN_OR_RETURN(c.vocab_size, positive_or(config, "vocab_size", d->vocab_size, where));
  HF2PTE_ASSIGN_OR_RETURN(c.max_position_embeddings, positive_or(config, "max_position_embeddings", 512, where));
  HF2PTE_ASSIGN_OR_RETURN(c.hidden_act, get_string_or(config, distil ? "activation" : "hidden_act", "gelu", where));
  HF2PTE_CHECK_OR_RETURN(c.hidden_size % c.num_attention_heads == 0, kInvalidInput,
                         "{}: hidden size must be a multiple of the number of attention heads; expected a multiple of "
                         "{}, got {} ({})",
                         json_label(where), c.num_attention_heads, c.hidden_size, where);
  if (distil) {
    c.type_vocab_size = 0;
    c.layer_norm_eps = 1e-12;
  } else {
    HF2PTE_ASSIGN_OR_RETURN(c.type_vocab_size, positive_or(config, "type_vocab_size", d->type_vocab_size, where));
    HF2PTE_ASSIGN_OR_RETURN(c.layer_norm_eps, get_double_or(config, "layer_norm_eps", 1e-12, where));
    HF2PTE_RETURN_IF_ERROR(must_be_positive_finite("layer_norm_eps", c.layer_norm_eps, where));
  }
  HF2PTE_ASSIGN_OR_RETURN(c.pad_token_id, token_id(config, "pad_token_id", d->pad_token_id, where));
  HF2PTE_ASSIGN_OR_RETURN(c.tie_word_embeddings, get_bool_or(config, "tie_word_embeddings", true, where));
  if (auto a = config.find("architectures"); a != config.end() && a->is_array()) {
    for (const auto& name : *a) {
      if (name.is_string()) c.architectures.push_back(name.get<std::string>());
    }
  }
  HF2PTE_ASSIGN_OR_RETURN(std::optional<std::string> dtype, get_optional_string(config, "torch_dtype", where));
  if (!dtype) {
    HF2PTE_ASSIGN_OR_RETURN(dtype, get_optional_string(config, "dtype", where));
  }
  c.torch_dtype = dtype.value_or("");
  return c;
}

}  // namespace hf2pte
