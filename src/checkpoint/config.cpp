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
// Note that tie_word_embeddings defaults to False for all four: the True of
// PretrainedConfig applies only to classes that do not pass their own value
// (Gemma, GPT-2, BERT), which is why those omit the key when tied.
// num_key_value_heads follows the classes too: an absent key is 8 for mistral
// and 32 for qwen2 (what transformers loads), an explicit null means
// num_attention_heads for all.
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
};

constexpr double kDefaultRopeTheta = 10000.0;  // all four classes
constexpr int64_t kQwen2DefaultMaxWindowLayers = 28;

const Defaults kDefaults[] = {
    {"llama", std::nullopt, 2048, 1e-6, 1, 2, std::nullopt, SlidingRule::kNever, std::nullopt, std::nullopt},
    {"mistral", 8, 4096 * 32, 1e-6, 1, 2, std::nullopt, SlidingRule::kAllLayers, 4096, std::nullopt},
    {"qwen2", 32, 32768, 1e-6, std::nullopt, std::nullopt, std::nullopt, SlidingRule::kQwen2, 4096, std::nullopt},
    {"phi3", std::nullopt, 4096, 1e-5, 1, 32000, 32000, SlidingRule::kAllLayers, std::nullopt, 4096},
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
Status parse_rope(const json& config, const std::string& where, LlamaFamilyConfig* out) {
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
  HF2PTE_ASSIGN_OR_RETURN(out->rope_theta, get_double_or(config, "rope_theta", kDefaultRopeTheta, where));
  HF2PTE_ASSIGN_OR_RETURN(out->partial_rotary_factor, get_double_or(config, "partial_rotary_factor", 1.0, where));
  out->rope_scaling = json();  // null
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

Status parse_layer_types(const json& config, const Defaults& d, const std::string& where, LlamaFamilyConfig* out) {
  const int64_t layers = out->num_hidden_layers;
  out->layer_types.assign(size_t(layers), AttentionKind::kFull);
  switch (d.sliding_rule) {
    case SlidingRule::kNever:
      out->sliding_window.reset();
      return Status::ok();
    case SlidingRule::kAllLayers: {
      if (config.contains("sliding_window")) {
        HF2PTE_ASSIGN_OR_RETURN(out->sliding_window, get_optional_int(config, "sliding_window", where));
      } else {
        out->sliding_window = d.sliding_window;
      }
      if (out->sliding_window) out->layer_types.assign(size_t(layers), AttentionKind::kSliding);
      break;
    }
    case SlidingRule::kQwen2: {
      HF2PTE_ASSIGN_OR_RETURN(bool use, get_bool_or(config, "use_sliding_window", false, where));
      if (config.contains("sliding_window")) {
        HF2PTE_ASSIGN_OR_RETURN(out->sliding_window, get_optional_int(config, "sliding_window", where));
      } else {
        out->sliding_window = d.sliding_window;
      }
      // Qwen2Config: sliding_window = sliding_window if use_sliding_window else None.
      if (!use) out->sliding_window.reset();
      auto explicit_types = config.find("layer_types");
      if (explicit_types != config.end() && !explicit_types->is_null()) {
        // Newer transformers write the per-layer list; it overrides the rule.
        HF2PTE_CHECK_OR_RETURN(explicit_types->is_array(), kInvalidInput,
                               "{}: field 'layer_types' has wrong type; expected array, got {} ({})",
                               json_label(where), json_type_name(*explicit_types), where);
        HF2PTE_CHECK_OR_RETURN(int64_t(explicit_types->size()) == layers, kInvalidInput,
                               "{}: field 'layer_types' has wrong length; expected {} (num_hidden_layers), got {} ({})",
                               json_label(where), layers, explicit_types->size(), where);
        for (size_t i = 0; i < explicit_types->size(); ++i) {
          const json& t = (*explicit_types)[i];
          if (t == "full_attention") {
            out->layer_types[i] = AttentionKind::kFull;
          } else if (t == "sliding_attention") {
            out->layer_types[i] = AttentionKind::kSliding;
          } else {
            return make_error(ErrorCode::kInvalidInput,
                              "{}: bad layer_types[{}]; expected \"full_attention\" or \"sliding_attention\", got {} "
                              "({})",
                              json_label(where), i, t.dump(), where);
          }
        }
      } else if (out->sliding_window) {
        HF2PTE_ASSIGN_OR_RETURN(int64_t first,
                                get_int_or(config, "max_window_layers", kQwen2DefaultMaxWindowLayers, where));
        for (int64_t i = std::max<int64_t>(first, 0); i < layers; ++i) {
          out->layer_types[size_t(i)] = AttentionKind::kSliding;
        }
      }
      bool any_sliding = false;
      for (AttentionKind k : out->layer_types) any_sliding = any_sliding || k == AttentionKind::kSliding;
      HF2PTE_CHECK_OR_RETURN(!any_sliding || out->sliding_window.has_value(), kInvalidInput,
                             "{}: layer_types has sliding_attention layers; expected a sliding_window, got null ({})",
                             json_label(where), where);
      break;
    }
  }
  if (out->sliding_window) {
    HF2PTE_RETURN_IF_ERROR(must_be_positive("sliding_window", *out->sliding_window, where));
  }
  return Status::ok();
}

}  // namespace

bool is_llama_family_model_type(std::string_view model_type) { return find_defaults(model_type) != nullptr; }

std::string_view attention_kind_name(AttentionKind kind) {
  return kind == AttentionKind::kSliding ? "sliding_attention" : "full_attention";
}

Result<LlamaFamilyConfig> parse_llama_family_config(const json& config, const std::string& where) {
  HF2PTE_CHECK_OR_RETURN(config.is_object(), kInvalidInput, "{}: expected a JSON object, got {} ({})",
                         json_label(where), json_type_name(config), where);
  LlamaFamilyConfig c;
  HF2PTE_ASSIGN_OR_RETURN(c.model_type, get_string(config, "model_type", where));
  // Unknown types get LlamaConfig's defaults; the builder rejects them by name.
  const Defaults& d = find_defaults(c.model_type) ? *find_defaults(c.model_type) : kDefaults[0];

  HF2PTE_ASSIGN_OR_RETURN(c.hidden_size, required_positive(config, "hidden_size", where));
  HF2PTE_ASSIGN_OR_RETURN(c.intermediate_size, required_positive(config, "intermediate_size", where));
  HF2PTE_ASSIGN_OR_RETURN(c.num_hidden_layers, required_positive(config, "num_hidden_layers", where));
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
  HF2PTE_ASSIGN_OR_RETURN(std::optional<int64_t> head_dim, get_optional_int(config, "head_dim", where));
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
  HF2PTE_ASSIGN_OR_RETURN(c.rms_norm_eps, get_double_or(config, "rms_norm_eps", d.rms_norm_eps, where));
  HF2PTE_RETURN_IF_ERROR(must_be_positive_finite("rms_norm_eps", c.rms_norm_eps, where));
  HF2PTE_ASSIGN_OR_RETURN(c.tie_word_embeddings, get_bool_or(config, "tie_word_embeddings", false, where));
  HF2PTE_ASSIGN_OR_RETURN(c.attention_bias, get_bool_or(config, "attention_bias", false, where));
  HF2PTE_ASSIGN_OR_RETURN(c.mlp_bias, get_bool_or(config, "mlp_bias", false, where));
  HF2PTE_ASSIGN_OR_RETURN(c.hidden_act, get_string_or(config, "hidden_act", "silu", where));

  HF2PTE_RETURN_IF_ERROR(parse_rope(config, where, &c));
  HF2PTE_RETURN_IF_ERROR(parse_layer_types(config, d, where, &c));

  HF2PTE_ASSIGN_OR_RETURN(c.bos_token_id, token_id(config, "bos_token_id", d.bos_token_id, where));
  HF2PTE_ASSIGN_OR_RETURN(c.pad_token_id, token_id(config, "pad_token_id", d.pad_token_id, where));
  if (config.contains("eos_token_id")) {
    HF2PTE_ASSIGN_OR_RETURN(auto eos, get_optional_int_list(config, "eos_token_id", where));
    c.eos_token_ids = eos.value_or(std::vector<int64_t>{});
  } else if (d.eos_token_id) {
    c.eos_token_ids = {*d.eos_token_id};
  }

  if (d.original_max_position_embeddings) {
    HF2PTE_ASSIGN_OR_RETURN(int64_t v, get_int_or(config, "original_max_position_embeddings",
                                                  *d.original_max_position_embeddings, where));
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

Result<LlamaFamilyConfig> parse_llama_family_config(const Checkpoint& checkpoint) {
  return parse_llama_family_config(checkpoint.config(), checkpoint.config_path());
}

}  // namespace hf2pte
