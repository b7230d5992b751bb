// The shared decoder-only transformer (Llama family): embeddings, N blocks of
// pre-norm attention + gated MLP with a static KV cache, final norm, LM head.
// Architectures differ only through ArchTraits and the typed config.
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "checkpoint/config.h"
#include "models/arch.h"
#include "models/blocks.h"
#include "models/model_builder.h"

namespace hf2pte::models {

namespace {

using graph::IntList;
using graph::None;
using graph::OptTensorList;
using graph::TensorType;

std::string layer_name(std::string_view tmpl, int64_t layer) { return fmt::format(fmt::runtime(tmpl), layer); }

template <typename T>
std::vector<uint8_t> to_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

/// cos/sin tables [max_seq_len, head_dim] of rotate_half RoPE, in double then rounded.
std::pair<graph::ConstantData, graph::ConstantData> rope_tables(int64_t max_seq_len, int64_t head_dim, double theta) {
  std::vector<float> cos_t(size_t(max_seq_len * head_dim)), sin_t(cos_t.size());
  int64_t half = head_dim / 2;
  for (int64_t p = 0; p < max_seq_len; ++p) {
    for (int64_t j = 0; j < head_dim; ++j) {
      double inv_freq = std::pow(theta, -double(2 * (j % half)) / double(head_dim));
      double angle = double(p) * inv_freq;
      cos_t[size_t(p * head_dim + j)] = float(std::cos(angle));
      sin_t[size_t(p * head_dim + j)] = float(std::sin(angle));
    }
  }
  auto origin = fmt::format("rope theta={} dim={}", theta, head_dim);
  return {graph::ConstantData::from_bytes(ScalarType::kFloat, {max_seq_len, head_dim}, to_bytes(cos_t), origin + " cos"),
          graph::ConstantData::from_bytes(ScalarType::kFloat, {max_seq_len, head_dim}, to_bytes(sin_t), origin + " sin")};
}

struct LayerWeights {
  ValueId attn_norm, ffn_norm;
  LinearWeights q, k, v, o, gate, up, down;
};

Result<LayerWeights> load_layer(BlockBuilder& b, const ArchTraits& arch, const LlamaFamilyConfig& c, int64_t i) {
  const auto& n = arch.names;
  const int64_t H = c.hidden_size, hd = c.head_dim, qd = c.num_attention_heads * hd,
                kvd = c.num_key_value_heads * hd, I = c.intermediate_size;
  const bool qkv_bias = arch.qkv_bias_always || c.attention_bias;
  LayerWeights w;
  HF2PTE_ASSIGN_OR_RETURN(w.attn_norm, b.weight(layer_name(n.attn_norm, i), {H}));
  HF2PTE_ASSIGN_OR_RETURN(w.ffn_norm, b.weight(layer_name(n.ffn_norm, i), {H}));
  if (!n.qkv.empty()) {
    // Fused [q; k; v] rows become three constants: no runtime split needed.
    auto prefix = layer_name(n.qkv, i);
    HF2PTE_ASSIGN_OR_RETURN(auto parts, b.split_rows(prefix + ".weight", {qd + 2 * kvd, H}, {qd, kvd, kvd}));
    w.q.weight = parts[0], w.k.weight = parts[1], w.v.weight = parts[2];
    if (qkv_bias) {
      HF2PTE_ASSIGN_OR_RETURN(auto bias, b.split_rows(prefix + ".bias", {qd + 2 * kvd}, {qd, kvd, kvd}));
      w.q.bias = bias[0], w.k.bias = bias[1], w.v.bias = bias[2];
    }
  } else {
    HF2PTE_ASSIGN_OR_RETURN(w.q, b.linear_weights(layer_name(n.q, i), qd, H, qkv_bias));
    HF2PTE_ASSIGN_OR_RETURN(w.k, b.linear_weights(layer_name(n.k, i), kvd, H, qkv_bias));
    HF2PTE_ASSIGN_OR_RETURN(w.v, b.linear_weights(layer_name(n.v, i), kvd, H, qkv_bias));
  }
  HF2PTE_ASSIGN_OR_RETURN(w.o, b.linear_weights(layer_name(n.o, i), H, qd, c.attention_bias));
  if (!n.gate_up.empty()) {
    HF2PTE_ASSIGN_OR_RETURN(auto parts, b.split_rows(layer_name(n.gate_up, i) + ".weight", {2 * I, H}, {I, I}));
    w.gate.weight = parts[0], w.up.weight = parts[1];
  } else {
    HF2PTE_ASSIGN_OR_RETURN(w.gate, b.linear_weights(layer_name(n.gate, i), I, H, c.mlp_bias));
    HF2PTE_ASSIGN_OR_RETURN(w.up, b.linear_weights(layer_name(n.up, i), I, H, c.mlp_bias));
  }
  HF2PTE_ASSIGN_OR_RETURN(w.down, b.linear_weights(layer_name(n.down, i), H, I, c.mlp_bias));
  return w;
}

/// Values shared by every layer: positions-derived tables and the mask.
struct Shared {
  SymInt S;
  ValueId cache_position, cos, sin, mask;
  int64_t max_seq_len;
};

Result<ValueId> decoder_layer(BlockBuilder& b, const LlamaFamilyConfig& c, const LayerWeights& w, const Shared& sh,
                              ValueId x, int64_t i) {
  Graph& g = b.graph();
  const auto p = fmt::format("layers.{}", i);
  const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim;
  const SymInt& S = sh.S;

  // Attention: h = x + o_proj(sdpa(rope(q), cache(rope(k)), cache(v))).
  HF2PTE_ASSIGN_OR_RETURN(ValueId h, b.rms_norm(x, w.attn_norm, c.rms_norm_eps, p + ".attn_norm"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId q, b.linear(h, w.q, p + ".attn.q_proj"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId k, b.linear(h, w.k, p + ".attn.k_proj"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId v, b.linear(h, w.v, p + ".attn.v_proj"));
  HF2PTE_ASSIGN_OR_RETURN(q, b.op(OpId::ViewCopyOut, {q, IntList{S, nh, hd}}, p + ".attn.q_heads"));
  HF2PTE_ASSIGN_OR_RETURN(k, b.op(OpId::ViewCopyOut, {k, IntList{S, nkv, hd}}, p + ".attn.k_heads"));
  HF2PTE_ASSIGN_OR_RETURN(v, b.op(OpId::ViewCopyOut, {v, IntList{S, nkv, hd}}, p + ".attn.v_heads"));
  HF2PTE_ASSIGN_OR_RETURN(q, b.rope(q, sh.cos, sh.sin, p + ".attn.q_rope"));
  HF2PTE_ASSIGN_OR_RETURN(k, b.rope(k, sh.cos, sh.sin, p + ".attn.k_rope"));
  IntList heads_first{1, 0, 2};
  HF2PTE_ASSIGN_OR_RETURN(q, b.op(OpId::PermuteCopyOut, {q, heads_first}, p + ".attn.q_t"));
  HF2PTE_ASSIGN_OR_RETURN(k, b.op(OpId::PermuteCopyOut, {k, heads_first}, p + ".attn.k_t"));
  HF2PTE_ASSIGN_OR_RETURN(v, b.op(OpId::PermuteCopyOut, {v, heads_first}, p + ".attn.v_t"));

  // Static KV cache [kv_heads, max_seq_len, head_dim]: rows at cache_position are overwritten in place.
  TensorType cache_type{b.dtype(), {nkv, sh.max_seq_len, hd}, {}};
  ValueId k_cache = g.add_buffer(p + ".attn.k_cache", cache_type);
  ValueId v_cache = g.add_buffer(p + ".attn.v_cache", cache_type);
  OptTensorList at_positions{std::nullopt, sh.cache_position};
  HF2PTE_RETURN_IF_ERROR(g.add_node(OpId::IndexPut_, {k_cache, at_positions, k}, p + ".attn.k_update").status());
  HF2PTE_RETURN_IF_ERROR(g.add_node(OpId::IndexPut_, {v_cache, at_positions, v}, p + ".attn.v_update").status());

  double scale = 1.0 / std::sqrt(double(hd));
  HF2PTE_ASSIGN_OR_RETURN(ValueId attn, b.op(OpId::ScaledDotProductAttention,
                                             {q, k_cache, v_cache, sh.mask, 0.0, false, scale, nh != nkv}, p + ".attn.sdpa"));
  HF2PTE_ASSIGN_OR_RETURN(attn, b.op(OpId::PermuteCopyOut, {attn, heads_first}, p + ".attn.out_t"));
  HF2PTE_ASSIGN_OR_RETURN(attn, b.op(OpId::ViewCopyOut, {attn, IntList{S, nh * hd}}, p + ".attn.merge"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId o, b.linear(attn, w.o, p + ".attn.o_proj"));
  HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::AddOut, {x, o}, p + ".attn_residual"));

  // MLP: x + down(silu(gate(h)) * up(h)).
  HF2PTE_ASSIGN_OR_RETURN(h, b.rms_norm(x, w.ffn_norm, c.rms_norm_eps, p + ".ffn_norm"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId gate, b.linear(h, w.gate, p + ".mlp.gate_proj"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId up, b.linear(h, w.up, p + ".mlp.up_proj"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId act, b.op(OpId::Silu, {gate}, p + ".mlp.act"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId prod, b.op(OpId::MulOut, {act, up}, p + ".mlp.gated"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId down, b.linear(prod, w.down, p + ".mlp.down_proj"));
  return b.op(OpId::AddOut, {x, down}, p + ".mlp_residual");
}

Status check_supported(const LlamaFamilyConfig& c, int64_t max_seq_len) {
  if (!c.rope_scaling.is_null()) {
    return make_error(ErrorCode::kNotSupported, "config.json: rope_scaling {} is not supported yet", c.rope_scaling.dump());
  }
  if (c.hidden_act != "silu") {
    return make_error(ErrorCode::kNotSupported, "config.json: hidden_act '{}' is not supported for this architecture yet; expected silu", c.hidden_act);
  }
  if (c.head_dim % 2 != 0) {
    return make_error(ErrorCode::kInvalidInput, "config.json: head_dim must be even for rotary embeddings; got {}", c.head_dim);
  }
  if (c.sliding_window && *c.sliding_window < max_seq_len) {
    return make_error(ErrorCode::kNotSupported,
                      "sliding_window {} is smaller than the maximum sequence length {}; pass --max-seq-len {} or less",
                      *c.sliding_window, max_seq_len, *c.sliding_window);
  }
  return Status::ok();
}

}  // namespace

Result<BuiltModel> build_causal_lm(const ArchTraits& arch, const LlamaFamilyConfig& c, Checkpoint& ckpt,
                                   const BuildOptions& opt) {
  BuiltModel out;
  out.model_type = std::string(arch.model_type);
  out.architecture = std::string(arch.architecture);
  int64_t max_seq_len = opt.max_seq_len.value_or(std::min<int64_t>(c.max_position_embeddings, 2048));
  if (!opt.max_seq_len && c.sliding_window && *c.sliding_window < max_seq_len) {
    // Positions never reach the window, so the window has no effect; say so.
    out.warnings.push_back(fmt::format("max sequence length lowered from {} to sliding_window {}", max_seq_len, *c.sliding_window));
    max_seq_len = *c.sliding_window;
  }
  HF2PTE_CHECK_OR_RETURN(max_seq_len >= 1, kInvalidArgument, "--max-seq-len must be at least 1; got {}", max_seq_len);
  HF2PTE_RETURN_IF_ERROR(check_supported(c, max_seq_len));
  out.max_seq_len = max_seq_len;

  Graph g("forward");
  BlockBuilder b(g, ckpt, opt.dtype);
  Shared sh;
  sh.max_seq_len = max_seq_len;
  sh.S = g.add_dim("seq", 1, max_seq_len);
  ValueId input_ids = g.add_input("input_ids", TensorType{ScalarType::kLong, {1, sh.S}, {}});
  sh.cache_position = g.add_input("cache_position", TensorType{ScalarType::kLong, {sh.S}, {}});

  const int64_t H = c.hidden_size, V = c.vocab_size, hd = c.head_dim;
  HF2PTE_ASSIGN_OR_RETURN(ValueId embed, b.weight(std::string(arch.names.embed), {V, H}));
  HF2PTE_ASSIGN_OR_RETURN(ValueId ids, b.op(OpId::ViewCopyOut, {input_ids, IntList{sh.S}}, "ids"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId x, b.op(OpId::EmbeddingOut, {embed, ids}, "embed"));

  auto [cos_c, sin_c] = rope_tables(max_seq_len, hd, c.rope_theta);
  ValueId cos_table = g.add_constant("rope.cos_table", std::move(cos_c));
  ValueId sin_table = g.add_constant("rope.sin_table", std::move(sin_c));
  HF2PTE_ASSIGN_OR_RETURN(ValueId cos, b.op(OpId::IndexSelectOut, {cos_table, int64_t{0}, sh.cache_position}, "rope.cos_rows"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId sin, b.op(OpId::IndexSelectOut, {sin_table, int64_t{0}, sh.cache_position}, "rope.sin_rows"));
  HF2PTE_ASSIGN_OR_RETURN(sh.cos, b.op(OpId::ViewCopyOut, {cos, IntList{sh.S, 1, hd}}, "rope.cos"));
  HF2PTE_ASSIGN_OR_RETURN(sh.sin, b.op(OpId::ViewCopyOut, {sin, IntList{sh.S, 1, hd}}, "rope.sin"));

  // Causal mask over the whole cache: key j is visible to query i iff j <= cache_position[i].
  std::vector<int64_t> positions(static_cast<size_t>(max_seq_len));
  for (int64_t j = 0; j < max_seq_len; ++j) positions[size_t(j)] = j;
  ValueId key_pos = g.add_constant("mask.key_positions",
                                   graph::ConstantData::from_bytes(ScalarType::kLong, {1, max_seq_len}, to_bytes(positions), "arange(max_seq_len)"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId qpos, b.op(OpId::ViewCopyOut, {sh.cache_position, IntList{sh.S, 1}}, "mask.query_positions"));
  HF2PTE_ASSIGN_OR_RETURN(sh.mask, b.op(OpId::LeTensorOut, {key_pos, qpos}, "mask"));

  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    HF2PTE_ASSIGN_OR_RETURN(LayerWeights w, load_layer(b, arch, c, i));
    HF2PTE_ASSIGN_OR_RETURN(x, decoder_layer(b, c, w, sh, x, i));
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId final_norm, b.weight(std::string(arch.names.final_norm), {H}));
  HF2PTE_ASSIGN_OR_RETURN(x, b.rms_norm(x, final_norm, c.rms_norm_eps, "final_norm"));
  LinearWeights head;
  if (c.tie_word_embeddings && !ckpt.has(arch.names.lm_head)) {
    head.weight = embed;  // tied: the embedding matrix is the output projection
  } else {
    HF2PTE_ASSIGN_OR_RETURN(head.weight, b.weight(std::string(arch.names.lm_head), {V, H}));
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId logits, b.linear(x, head, "lm_head"));
  HF2PTE_ASSIGN_OR_RETURN(logits, b.op(OpId::ViewCopyOut, {logits, IntList{1, sh.S, V}}, "logits"));
  g.set_outputs({logits});

  // Derived buffers some checkpoints carry (never weights).
  for (const auto& name : ckpt.tensor_names()) {
    for (auto suffix : arch.ignored_suffixes) {
      if (!suffix.empty() && name.ends_with(suffix)) ckpt.mark_ignored(name);
    }
  }
  HF2PTE_RETURN_IF_ERROR(ckpt.check_all_consumed());

  out.program.methods.push_back(std::move(g));
  auto& m = out.program.constant_methods;
  m["get_max_seq_len"] = max_seq_len;
  m["get_max_context_len"] = max_seq_len;
  m["get_vocab_size"] = V;
  if (c.bos_token_id) m["get_bos_id"] = *c.bos_token_id;
  if (!c.eos_token_ids.empty()) m["get_eos_ids"] = c.eos_token_ids;
  m["use_kv_cache"] = true;
  m["use_sdpa_with_kv_cache"] = false;
  m["enable_dynamic_shape"] = true;
  m["get_n_layers"] = c.num_hidden_layers;
  m["get_n_kv_heads"] = c.num_key_value_heads;
  m["get_head_dim"] = c.head_dim;
  m["get_model_type"] = out.model_type;
  m["get_architecture"] = out.architecture;
  m["get_exporter_version"] = opt.exporter_version;
  return out;
}

Result<BuiltModel> build_model(Checkpoint& ckpt, const BuildOptions& options) {
  const auto& cfg = ckpt.config();
  std::string where = ckpt.config_path();
  if (!cfg.is_object() || !cfg.contains("model_type") || !cfg["model_type"].is_string()) {
    return make_error(ErrorCode::kInvalidInput, "config.json: missing required field 'model_type' ({})", where);
  }
  std::string model_type = cfg["model_type"].get<std::string>();
  const ArchTraits* arch = find_architecture(model_type);
  if (arch == nullptr) {
    return make_error(ErrorCode::kNotSupported, "unsupported model_type '{}'; supported: {} ({})", model_type,
                      supported_model_types(), where);
  }
  HF2PTE_ASSIGN_OR_RETURN(LlamaFamilyConfig c, parse_llama_family_config(cfg, where));
  return build_causal_lm(*arch, c, ckpt, options);
}

}  // namespace hf2pte::models
