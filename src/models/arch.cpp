#include "models/arch.h"

#include <array>

namespace hf2pte::models {

namespace {

constexpr TensorNames kPhi3Names = [] {
  TensorNames n;
  n.qkv = "model.layers.{}.self_attn.qkv_proj";
  n.gate_up = "model.layers.{}.mlp.gate_up_proj";
  return n;
}();

// Qwen3, Gemma 3: per-head q/k RMSNorm after the projections.
constexpr TensorNames kQkNormNames = [] {
  TensorNames n;
  n.q_norm = "model.layers.{}.self_attn.q_norm.weight";
  n.k_norm = "model.layers.{}.self_attn.k_norm.weight";
  return n;
}();

// Gemma 2: four norms per layer ("sandwich" norms around attention and MLP).
constexpr TensorNames kGemma2Names = [] {
  TensorNames n;
  n.post_attn_norm = "model.layers.{}.post_attention_layernorm.weight";
  n.ffn_norm = "model.layers.{}.pre_feedforward_layernorm.weight";
  n.post_ffn_norm = "model.layers.{}.post_feedforward_layernorm.weight";
  return n;
}();

constexpr TensorNames kGemma3Names = [] {
  TensorNames n = kGemma2Names;
  n.q_norm = kQkNormNames.q_norm;
  n.k_norm = kQkNormNames.k_norm;
  return n;
}();

// OLMo 2: no pre-norms; norms on the attention / MLP outputs; full-width q/k norm.
constexpr TensorNames kOlmo2Names = [] {
  TensorNames n = kQkNormNames;
  n.attn_norm = "";
  n.ffn_norm = "";
  n.post_attn_norm = "model.layers.{}.post_attention_layernorm.weight";
  n.post_ffn_norm = "model.layers.{}.post_feedforward_layernorm.weight";
  return n;
}();

// Phi (Phi-2): one LayerNorm feeding attention and a plain fc1/fc2 MLP in parallel.
constexpr TensorNames kPhiNames = [] {
  TensorNames n;
  n.o = "model.layers.{}.self_attn.dense";
  n.ffn_norm = "";
  n.gate = "";
  n.up = "model.layers.{}.mlp.fc1";
  n.down = "model.layers.{}.mlp.fc2";
  n.final_norm = "model.final_layernorm.weight";
  return n;
}();

constexpr TensorNames kGptNeoXNames = [] {
  TensorNames n;
  n.embed = "gpt_neox.embed_in.weight";
  n.attn_norm = "gpt_neox.layers.{}.input_layernorm.weight";
  n.qkv = "gpt_neox.layers.{}.attention.query_key_value";
  n.o = "gpt_neox.layers.{}.attention.dense";
  n.ffn_norm = "gpt_neox.layers.{}.post_attention_layernorm.weight";
  n.gate = "";
  n.up = "gpt_neox.layers.{}.mlp.dense_h_to_4h";
  n.down = "gpt_neox.layers.{}.mlp.dense_4h_to_h";
  n.final_norm = "gpt_neox.final_layer_norm.weight";
  n.lm_head = "embed_out";
  return n;
}();

// GPT-2: learned positions, Conv1D weights, fused c_attn [q | k | v] columns, plain MLP.
constexpr TensorNames kGpt2Names = [] {
  TensorNames n;
  n.embed = "transformer.wte.weight";
  n.pos_embed = "transformer.wpe.weight";
  n.attn_norm = "transformer.h.{}.ln_1.weight";
  n.qkv = "transformer.h.{}.attn.c_attn";
  n.o = "transformer.h.{}.attn.c_proj";
  n.ffn_norm = "transformer.h.{}.ln_2.weight";
  n.gate = "";
  n.up = "transformer.h.{}.mlp.c_fc";
  n.down = "transformer.h.{}.mlp.c_proj";
  n.final_norm = "transformer.ln_f.weight";
  return n;
}();

constexpr TensorNames kMixtralNames = [] {
  TensorNames n;
  n.gate = "", n.up = "", n.down = "";
  n.router = "model.layers.{}.block_sparse_moe.gate.weight";
  n.expert_gate = "model.layers.{0}.block_sparse_moe.experts.{1}.w1";
  n.expert_up = "model.layers.{0}.block_sparse_moe.experts.{1}.w3";
  n.expert_down = "model.layers.{0}.block_sparse_moe.experts.{1}.w2";
  return n;
}();

constexpr TensorNames kQwen3MoeNames = [] {
  TensorNames n = kQkNormNames;
  n.gate = "", n.up = "", n.down = "";
  n.router = "model.layers.{}.mlp.gate.weight";
  n.expert_gate = "model.layers.{0}.mlp.experts.{1}.gate_proj";
  n.expert_up = "model.layers.{0}.mlp.experts.{1}.up_proj";
  n.expert_down = "model.layers.{0}.mlp.experts.{1}.down_proj";
  return n;
}();

// Qwen2-MoE: Qwen3-MoE's expert names (no q/k norm) plus a shared expert behind a sigmoid gate.
constexpr TensorNames kQwen2MoeNames = [] {
  TensorNames n = kQwen3MoeNames;
  n.q_norm = "", n.k_norm = "";
  n.shared_gate = "model.layers.{}.mlp.shared_expert.gate_proj";
  n.shared_up = "model.layers.{}.mlp.shared_expert.up_proj";
  n.shared_down = "model.layers.{}.mlp.shared_expert.down_proj";
  n.shared_expert_gate = "model.layers.{}.mlp.shared_expert_gate.weight";
  return n;
}();

// Starcoder2: Llama names with a plain c_fc / c_proj MLP.
constexpr TensorNames kStarcoder2Names = [] {
  TensorNames n;
  n.gate = "";
  n.up = "model.layers.{}.mlp.c_fc";
  n.down = "model.layers.{}.mlp.c_proj";
  return n;
}();

// gpt-oss: attention sinks, a router with a bias, the experts fused in two
// [in, out] tensors per layer (gate/up interleaved).
constexpr TensorNames kGptOssNames = [] {
  TensorNames n;
  n.gate = "", n.up = "", n.down = "";
  n.sinks = "model.layers.{}.self_attn.sinks";
  n.router = "model.layers.{}.mlp.router.weight";
  n.router_bias = "model.layers.{}.mlp.router.bias";
  n.fused_expert_gate_up = "model.layers.{}.mlp.experts.gate_up_proj";
  n.fused_expert_down = "model.layers.{}.mlp.experts.down_proj";
  return n;
}();

// DeepSeek-V3: latent attention; dense MLP below first_k_dense_replace (the
// default gate/up/down names), routed + shared experts above.
constexpr TensorNames kDeepseekV3Names = [] {
  TensorNames n;
  n.q = "model.layers.{}.self_attn.q_proj";  // without q LoRA (V2-Lite)
  n.q_a = "model.layers.{}.self_attn.q_a_proj";
  n.q_a_norm = "model.layers.{}.self_attn.q_a_layernorm.weight";
  n.q_b = "model.layers.{}.self_attn.q_b_proj";
  n.kv_a = "model.layers.{}.self_attn.kv_a_proj_with_mqa";
  n.kv_a_norm = "model.layers.{}.self_attn.kv_a_layernorm.weight";
  n.kv_b = "model.layers.{}.self_attn.kv_b_proj";
  n.k = "", n.v = "";
  n.router = "model.layers.{}.mlp.gate.weight";
  n.router_correction_bias = "model.layers.{}.mlp.gate.e_score_correction_bias";
  n.expert_gate = "model.layers.{0}.mlp.experts.{1}.gate_proj";
  n.expert_up = "model.layers.{0}.mlp.experts.{1}.up_proj";
  n.expert_down = "model.layers.{0}.mlp.experts.{1}.down_proj";
  n.shared_gate = "model.layers.{}.mlp.shared_experts.gate_proj";
  n.shared_up = "model.layers.{}.mlp.shared_experts.up_proj";
  n.shared_down = "model.layers.{}.mlp.shared_experts.down_proj";
  return n;
}();

// Mamba: only the embedding, the final norm and the head follow these
// templates; the layers' names are in mamba.cpp.
constexpr TensorNames kMambaNames = [] {
  TensorNames n;
  n.embed = "backbone.embeddings.weight";
  n.final_norm = "backbone.norm_f.weight";
  return n;
}();

constexpr BiasTraits kNoBias{};
constexpr BiasTraits kQkvBias{.qkv = true};
constexpr BiasTraits kPhiBias{.qkv = true, .o = true, .mlp = true, .lm_head = true};
constexpr BiasTraits kNeoXBias{.mlp = true};  // qkv / dense biases follow attention_bias

// Families checked by properties instead of a reference fixture (tests/families_test.cpp).
constexpr ArchTraits property_tested(ArchTraits a) {
  a.status = ArchStatus::kProperty;
  return a;
}

constexpr ArchTraits row(std::string_view type, std::string_view cls, TensorNames names, BiasTraits bias = kNoBias,
                         NormKind norm = NormKind::kRms) {
  ArchTraits a;
  a.model_type = type;
  a.architecture = cls;
  a.names = names;
  a.bias = bias;
  a.norm = norm;
  return a;
}

constexpr std::array kArchitectures = {
    row("llama", "LlamaForCausalLM", {}),
    row("mistral", "MistralForCausalLM", {}),
    row("qwen2", "Qwen2ForCausalLM", {}, kQkvBias),
    row("phi3", "Phi3ForCausalLM", kPhi3Names),
    row("qwen3", "Qwen3ForCausalLM", kQkNormNames),
    [] { auto a = row("gemma", "GemmaForCausalLM", {}, kNoBias, NormKind::kRmsOnePlus); a.scale_embeddings = true; return a; }(),
    [] { auto a = row("gemma2", "Gemma2ForCausalLM", kGemma2Names, kNoBias, NormKind::kRmsOnePlus); a.scale_embeddings = true; return a; }(),
    [] { auto a = row("gemma3_text", "Gemma3ForCausalLM", kGemma3Names, kNoBias, NormKind::kRmsOnePlus); a.scale_embeddings = true; return a; }(),
    [] { auto a = row("olmo2", "Olmo2ForCausalLM", kOlmo2Names); a.qk_norm = QkNormScope::kFullWidth; return a; }(),
    [] { auto a = row("phi", "PhiForCausalLM", kPhiNames, kPhiBias, NormKind::kLayerNorm); a.parallel_residual = true; return a; }(),
    [] {
      auto a = row("gpt_neox", "GPTNeoXForCausalLM", kGptNeoXNames, kNeoXBias, NormKind::kLayerNorm);
      a.parallel_residual = true;
      a.qkv_per_head = true;
      // Older GPT-NeoX checkpoints carry the causal mask buffers.
      a.ignored_suffixes[1] = ".attention.bias";
      a.ignored_suffixes[2] = ".attention.masked_bias";
      return a;
    }(),
    [] {
      auto a = row("gpt2", "GPT2LMHeadModel", kGpt2Names, kPhiBias, NormKind::kLayerNorm);
      a.bias.lm_head = false;
      a.conv1d_weights = true;
      a.optional_prefix = "transformer.";
      // Causal-mask buffers of older uploads (h.N.attn.bias, h.N.attn.masked_bias).
      a.ignored_suffixes[1] = ".attn.bias";
      a.ignored_suffixes[2] = ".attn.masked_bias";
      return a;
    }(),
    row("mixtral", "MixtralForCausalLM", kMixtralNames),
    row("qwen3_moe", "Qwen3MoeForCausalLM", kQwen3MoeNames),
    [] { auto a = row("gpt_oss", "GptOssForCausalLM", kGptOssNames); a.clamped_swiglu = true; return a; }(),
    [] { auto a = row("deepseek_v3", "DeepseekV3ForCausalLM", kDeepseekV3Names); a.router = RouterKind::kSigmoidGrouped; return a; }(),
    [] { auto a = row("mamba", "MambaForCausalLM", kMambaNames); a.mixer = MixerKind::kSelectiveScan; return a; }(),
    property_tested(row("granite", "GraniteForCausalLM", {})),
    property_tested(row("smollm3", "SmolLM3ForCausalLM", {})),
    property_tested(row("stablelm", "StableLmForCausalLM", {}, kNoBias, NormKind::kLayerNorm)),
    property_tested(row("qwen2_moe", "Qwen2MoeForCausalLM", kQwen2MoeNames, kQkvBias)),
    property_tested(row("starcoder2", "Starcoder2ForCausalLM", kStarcoder2Names, kNoBias, NormKind::kLayerNorm)),
};

}  // namespace

std::span<const ArchTraits> all_architectures() { return kArchitectures; }

std::string_view arch_status_name(ArchStatus status) {
  return status == ArchStatus::kReference ? "verified against reference fixture" : "property-tested";
}

const ArchTraits* find_architecture(std::string_view model_type) {
  for (const auto& a : kArchitectures) {
    if (a.model_type == model_type) return &a;
  }
  return nullptr;
}

std::string supported_model_types() {
  std::string s;
  for (const auto& a : kArchitectures) s += (s.empty() ? "" : ", ") + std::string(a.model_type);
  return s;
}

}  // namespace hf2pte::models
