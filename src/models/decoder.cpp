// The shared decoder-only transformer: embeddings (RoPE or learned positions),
// N blocks of attention over a static KV cache (full or sliding window), or
// over the call's own tokens without a cache (--no-kv-cache), plus a
// gated, plain or mixture-of-experts MLP, arranged pre-norm, sandwich,
// post-norm or parallel; final norm, LM head, optional soft-capping.
// Architectures differ only through their ArchTraits row and the typed config;
// nothing here branches on model_type.
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "checkpoint/config.h"
#include "models/arch.h"
#include "models/blocks.h"
#include "models/latent_attention.h"
#include "models/mamba.h"
#include "models/model_builder.h"
#include "models/rope.h"

namespace hf2pte::models {

namespace {

using graph::IntList;
using graph::None;
using graph::OptTensorList;
using graph::TensorType;

struct LayerWeights {
  std::optional<NormWeights> attn_norm, ffn_norm, post_attn_norm, post_ffn_norm, q_norm, k_norm;
  LinearWeights q, k, v, o;
  std::optional<LinearWeights> qkv;  ///< per-head fused q/k/v (GPT-NeoX), split at runtime
  GatedMlpWeights mlp;               ///< plain MLPs leave gate.weight at -1
  std::optional<MoeWeights> moe;
  std::optional<ValueId> sinks;      ///< gpt-oss attention sinks [heads]
  std::optional<LatentAttentionWeights> mla;  ///< DeepSeek-V3; replaces q/k/v
};

/// Per-layer norm, when the architecture's template names one.
Result<std::optional<NormWeights>> optional_norm(BlockBuilder& b, std::string_view tmpl, int64_t layer, int64_t size,
                                                 NormKind kind) {
  if (tmpl.empty()) return std::optional<NormWeights>{};
  HF2PTE_ASSIGN_OR_RETURN(NormWeights w, b.norm_weights(layer_name(tmpl, layer), size, kind));
  return std::optional<NormWeights>{w};
}

/// gpt-oss's fused experts: gate_up [E, H, 2I] and down [E, I, H], stored
/// [in, out], gate j in column 2j and up j in 2j + 1. Each expert becomes three
/// [out, in] linears with biases, cut from the fused tensors while streaming.
Result<GatedMlpWeights> load_fused_expert(BlockBuilder& b, const ArchTraits& arch, int64_t i, int64_t e, int64_t E,
                                          int64_t H, int64_t I) {
  const auto gate_up = layer_name(arch.names.fused_expert_gate_up, i);
  const auto down = layer_name(arch.names.fused_expert_down, i);
  std::vector<int64_t> even(static_cast<size_t>(I)), odd(static_cast<size_t>(I));
  for (int64_t j = 0; j < I; ++j) even[size_t(j)] = 2 * j, odd[size_t(j)] = 2 * j + 1;
  auto label = [&](const char* what) { return fmt::format("{}.{}", e, what); };
  GatedMlpWeights x;
  // Expert e's [H, 2I] block is rows [e*H, (e+1)*H) of the [E*H, 2I] view; picked columns, transposed.
  WeightView w{.row_width = 2 * I, .row_begin = e * H, .row_end = (e + 1) * H, .transpose = true};
  w.cols = even;
  HF2PTE_ASSIGN_OR_RETURN(x.gate.weight, b.weight_view(gate_up, {E, H, 2 * I}, w, label("gate")));
  w.cols = odd;
  HF2PTE_ASSIGN_OR_RETURN(x.up.weight, b.weight_view(gate_up, {E, H, 2 * I}, w, label("up")));
  WeightView wb{.row_begin = e, .row_end = e + 1, .sizes = {I}};
  wb.cols = even;
  HF2PTE_ASSIGN_OR_RETURN(ValueId gb, b.weight_view(gate_up + "_bias", {E, 2 * I}, wb, label("gate")));
  wb.cols = odd;
  HF2PTE_ASSIGN_OR_RETURN(ValueId ub, b.weight_view(gate_up + "_bias", {E, 2 * I}, wb, label("up")));
  x.gate.bias = gb, x.up.bias = ub;
  WeightView wd{.row_width = H, .row_begin = e * I, .row_end = (e + 1) * I, .transpose = true};
  HF2PTE_ASSIGN_OR_RETURN(x.down.weight, b.weight_view(down, {E, I, H}, wd, label("down")));
  HF2PTE_ASSIGN_OR_RETURN(ValueId db, b.weight_view(down + "_bias", {E, H}, WeightView{.row_begin = e, .row_end = e + 1, .sizes = {H}},
                                                    label("down")));
  x.down.bias = db;
  return x;
}

Result<GatedMlpWeights> load_gated_mlp(BlockBuilder& b, std::string_view gate, std::string_view up,
                                       std::string_view down, int64_t i, int64_t width, int64_t H) {
  GatedMlpWeights s;
  HF2PTE_ASSIGN_OR_RETURN(s.gate, b.linear_weights(layer_name(gate, i), width, H, false));
  HF2PTE_ASSIGN_OR_RETURN(s.up, b.linear_weights(layer_name(up, i), width, H, false));
  HF2PTE_ASSIGN_OR_RETURN(s.down, b.linear_weights(layer_name(down, i), H, width, false));
  return s;
}

Result<MoeWeights> load_moe(BlockBuilder& b, const ArchTraits& arch, const LlamaFamilyConfig& c, int64_t i) {
  const auto& n = arch.names;
  const int64_t H = c.hidden_size, E = c.num_experts;
  // Mixtral's experts are intermediate_size wide; Qwen3-MoE has its own key.
  const int64_t I = c.moe_intermediate_size > 0 ? c.moe_intermediate_size : c.intermediate_size;
  MoeWeights m;
  // The router stays f32 in 16-bit models (BlockBuilder::moe).
  HF2PTE_ASSIGN_OR_RETURN(m.router, b.weight(layer_name(n.router, i), {E, H}, ScalarType::kFloat));
  if (!n.router_bias.empty()) {
    HF2PTE_ASSIGN_OR_RETURN(ValueId rb, b.weight(layer_name(n.router_bias, i), {E}, ScalarType::kFloat));
    m.router_bias = rb;
  }
  if (!n.router_correction_bias.empty()) {
    HF2PTE_ASSIGN_OR_RETURN(ValueId cb, b.weight(layer_name(n.router_correction_bias, i), {E}, ScalarType::kFloat));
    m.correction_bias = cb;
  }
  if (!n.fused_expert_gate_up.empty()) {
    // The published gpt-oss uploads pack the experts as MXFP4 (*_blocks, *_scales).
    const auto packed = layer_name(n.fused_expert_gate_up, i) + "_blocks";
    HF2PTE_CHECK_OR_RETURN(!b.has(packed), kNotSupported,
                           "{}: MXFP4-packed experts are not supported yet; export the unquantized (bf16) checkpoint "
                           "(transformers: Mxfp4Config(dequantize=True), then save_pretrained)",
                           packed);
  }
  for (int64_t e = 0; e < E; ++e) {
    if (!n.fused_expert_gate_up.empty()) {
      HF2PTE_ASSIGN_OR_RETURN(GatedMlpWeights x, load_fused_expert(b, arch, i, e, E, H, I));
      m.experts.push_back(x);
      continue;
    }
    auto name = [&](std::string_view tmpl) { return fmt::format(fmt::runtime(tmpl), i, e); };
    GatedMlpWeights x;
    HF2PTE_ASSIGN_OR_RETURN(x.gate, b.linear_weights(name(n.expert_gate), I, H, false));
    HF2PTE_ASSIGN_OR_RETURN(x.up, b.linear_weights(name(n.expert_up), I, H, false));
    HF2PTE_ASSIGN_OR_RETURN(x.down, b.linear_weights(name(n.expert_down), H, I, false));
    m.experts.push_back(x);
  }
  // Qwen2-MoE: its own width and a sigmoid gate; DeepSeek: n_shared_experts experts' width, no gate.
  const int64_t SI = c.shared_expert_intermediate_size > 0 ? c.shared_expert_intermediate_size : I * c.n_shared_experts;
  if (!n.shared_gate.empty() && SI > 0) {
    HF2PTE_ASSIGN_OR_RETURN(m.shared, load_gated_mlp(b, n.shared_gate, n.shared_up, n.shared_down, i, SI, H));
    if (!n.shared_expert_gate.empty()) {
      HF2PTE_ASSIGN_OR_RETURN(ValueId g, b.weight(layer_name(n.shared_expert_gate, i), {1, H}));
      m.shared_gate = g;
    }
  }
  return m;
}

/// Layers below first_k_dense_replace are dense in a MoE model (DeepSeek-V3).
bool is_moe_layer(const ArchTraits& arch, const LlamaFamilyConfig& c, int64_t i) {
  return !arch.names.router.empty() && i >= c.first_k_dense_replace;
}

Result<LayerWeights> load_layer(BlockBuilder& b, const ArchTraits& arch, const LlamaFamilyConfig& c, int64_t i) {
  const auto& n = arch.names;
  const int64_t H = c.hidden_size, hd = c.head_dim, qd = c.num_attention_heads * hd,
                kvd = c.num_key_value_heads * hd, I = c.intermediate_size;
  const bool qkv_bias = arch.bias.qkv || c.attention_bias || c.qkv_bias;
  const bool o_bias = arch.bias.o || c.attention_bias;
  const bool mlp_bias = arch.bias.mlp || c.mlp_bias;
  const NormKind nk = arch.norm;
  LayerWeights w;
  HF2PTE_ASSIGN_OR_RETURN(w.attn_norm, optional_norm(b, n.attn_norm, i, H, nk));
  HF2PTE_ASSIGN_OR_RETURN(w.post_attn_norm, optional_norm(b, n.post_attn_norm, i, H, nk));
  HF2PTE_ASSIGN_OR_RETURN(w.ffn_norm, optional_norm(b, n.ffn_norm, i, H, nk));
  HF2PTE_ASSIGN_OR_RETURN(w.post_ffn_norm, optional_norm(b, n.post_ffn_norm, i, H, nk));
  if (c.mla) {
    // DeepSeek: latent attention replaces q/k/v; o_proj reads heads * v_head_dim.
    HF2PTE_ASSIGN_OR_RETURN(LatentAttentionWeights mla, load_latent_attention(b, arch, c, i));
    w.mla = std::move(mla);
    HF2PTE_ASSIGN_OR_RETURN(w.o, b.linear_weights(layer_name(n.o, i), H, c.num_attention_heads * c.mla->v_head_dim, o_bias));
  }
  const bool full_width = arch.qk_norm == QkNormScope::kFullWidth;
  HF2PTE_ASSIGN_OR_RETURN(w.q_norm, optional_norm(b, n.q_norm, i, full_width ? qd : hd, nk));
  HF2PTE_ASSIGN_OR_RETURN(w.k_norm, optional_norm(b, n.k_norm, i, full_width ? kvd : hd, nk));
  if (c.mla) {
    // loaded above
  } else if (!n.qkv.empty() && (arch.qkv_per_head || arch.conv1d_weights)) {
    // Kept as one linear and sliced at runtime: per-head rows cannot be split by
    // row ranges, and Conv1D's [in, out] blocks are columns.
    HF2PTE_ASSIGN_OR_RETURN(LinearWeights f, b.linear_weights(layer_name(n.qkv, i), qd + 2 * kvd, H, qkv_bias));
    w.qkv = f;
  } else if (!n.qkv.empty()) {
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
  if (!c.mla) {
    HF2PTE_ASSIGN_OR_RETURN(w.o, b.linear_weights(layer_name(n.o, i), H, qd, o_bias));
  }
  if (!n.sinks.empty()) {
    HF2PTE_ASSIGN_OR_RETURN(ValueId sinks, b.weight(layer_name(n.sinks, i), {c.num_attention_heads}));
    w.sinks = sinks;
  }
  if (is_moe_layer(arch, c, i)) {
    HF2PTE_ASSIGN_OR_RETURN(MoeWeights m, load_moe(b, arch, c, i));
    w.moe = std::move(m);
  } else if (!n.gate_up.empty()) {
    HF2PTE_ASSIGN_OR_RETURN(auto parts, b.split_rows(layer_name(n.gate_up, i) + ".weight", {2 * I, H}, {I, I}));
    w.mlp.gate.weight = parts[0], w.mlp.up.weight = parts[1];
  } else {
    if (!n.gate.empty()) {
      HF2PTE_ASSIGN_OR_RETURN(w.mlp.gate, b.linear_weights(layer_name(n.gate, i), I, H, mlp_bias));
    }
    HF2PTE_ASSIGN_OR_RETURN(w.mlp.up, b.linear_weights(layer_name(n.up, i), I, H, mlp_bias));
  }
  if (!w.moe) {
    HF2PTE_ASSIGN_OR_RETURN(w.mlp.down, b.linear_weights(layer_name(n.down, i), H, I, mlp_bias));
  }
  return w;
}

/// Values shared by every layer.
struct Shared {
  SymInt S;
  /// The input, or without a KV cache the derived positions 0..S-1.
  ValueId cache_position;
  int64_t max_seq_len;
  /// false: attention covers the S keys of this call (no cache, no mutable buffers).
  bool kv_cache = true;
  /// --attention-span written: the written cache width (written_end below); every
  /// layer attends over cache positions [0, end) only. Unset: all max_seq_len.
  std::optional<SymInt> end;
  /// --use-custom-sdpa: the call's first position (end - S), for llama::update_cache
  /// and llama::custom_sdpa. Unset: index_put_ caches and the decomposed attention.
  std::optional<SymInt> start_pos;
};

/// What differs between full and sliding layers: the mask and (Gemma 3) the RoPE theta.
struct LayerInputs {
  ValueId cos = -1, sin = -1;  ///< -1: no RoPE
  ValueId mask = -1;
};

/// --use-custom-sdpa: q [S, heads, hd] and k, v [S, kv_heads, hd] (after RoPE)
/// viewed as [1, S, H, hd]; upstream's llama::update_cache writes k and v into
/// [1, max_seq_len, kv_heads, hd] caches at start_pos, and llama::custom_sdpa
/// attends each query to the cache rows [0, start_pos + s] in place: no
/// transposes, no mask, no read of unwritten rows.
Result<ValueId> custom_sdpa_attention(BlockBuilder& b, const LlamaFamilyConfig& c, const LayerWeights& w,
                                      const Shared& sh, ValueId q, ValueId k, ValueId v, double scale,
                                      const std::string& p) {
  Graph& g = b.graph();
  const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim;
  HF2PTE_CHECK_OR_RETURN(!c.attn_logit_softcapping && !w.sinks, kNotSupported,
                         "--use-custom-sdpa: llama::custom_sdpa has no {} ({}); export without the flag",
                         c.attn_logit_softcapping ? "attention logit softcapping" : "attention sinks", p);
  const SymInt& S = sh.S;
  HF2PTE_ASSIGN_OR_RETURN(q, b.op(OpId::ViewCopyOut, {q, IntList{1, S, nh, hd}}, p + ".attn.q_bshd"));
  HF2PTE_ASSIGN_OR_RETURN(k, b.op(OpId::ViewCopyOut, {k, IntList{1, S, nkv, hd}}, p + ".attn.k_bshd"));
  HF2PTE_ASSIGN_OR_RETURN(v, b.op(OpId::ViewCopyOut, {v, IntList{1, S, nkv, hd}}, p + ".attn.v_bshd"));
  TensorType cache_type{b.dtype(), {1, sh.max_seq_len, nkv, hd}, {}};
  ValueId k_cache = g.add_buffer(p + ".attn.k_cache", cache_type);
  ValueId v_cache = g.add_buffer(p + ".attn.v_cache", cache_type);
  HF2PTE_RETURN_IF_ERROR(b.op(OpId::LlamaUpdateCacheOut, {k, k_cache, *sh.start_pos}, p + ".attn.k_update").status());
  HF2PTE_RETURN_IF_ERROR(b.op(OpId::LlamaUpdateCacheOut, {v, v_cache, *sh.start_pos}, p + ".attn.v_update").status());
  HF2PTE_ASSIGN_OR_RETURN(ValueId attn, b.op(OpId::LlamaCustomSdpaOut,
                                             {q, k_cache, v_cache, *sh.start_pos, None{}, 0.0, true, scale},
                                             p + ".attn.custom_sdpa"));
  HF2PTE_ASSIGN_OR_RETURN(attn, b.op(OpId::ViewCopyOut, {attn, IntList{S, nh * hd}}, p + ".attn.merge"));
  return b.linear(attn, w.o, p + ".attn.o_proj");
}

Result<ValueId> attention_block(BlockBuilder& b, const ArchTraits& arch, const LlamaFamilyConfig& c,
                                const LayerWeights& w, const Shared& sh, const LayerInputs& in, ValueId h,
                                const std::string& p) {
  if (w.mla) {
    HF2PTE_CHECK_OR_RETURN(!sh.start_pos, kNotSupported,
                           "--use-custom-sdpa: {} has latent attention (compressed KV), which llama::custom_sdpa cannot "
                           "read; export without the flag", arch.model_type);
    LatentAttentionInputs li{sh.S, sh.cache_position, sh.max_seq_len, sh.kv_cache, sh.end, in.cos, in.sin, in.mask};
    return latent_attention(b, c, *w.mla, w.o, li, h, p);
  }
  Graph& g = b.graph();
  const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim;
  const SymInt& S = sh.S;
  const NormOptions no{arch.norm, c.rms_norm_eps};
  ValueId q, k, v;
  if (w.qkv && arch.qkv_per_head) {
    // GPT-NeoX rows are [q_h | k_h | v_h] per head: view [S, heads, 3*hd] and slice.
    HF2PTE_ASSIGN_OR_RETURN(ValueId qkv, b.linear(h, *w.qkv, p + ".attn.qkv_proj"));
    HF2PTE_ASSIGN_OR_RETURN(qkv, b.op(OpId::ViewCopyOut, {qkv, IntList{S, nh, 3 * hd}}, p + ".attn.qkv_heads"));
    HF2PTE_ASSIGN_OR_RETURN(q, b.op(OpId::SliceCopyTensorOut, {qkv, int64_t{-1}, SymInt(0), SymInt(hd)}, p + ".attn.q_heads"));
    HF2PTE_ASSIGN_OR_RETURN(k, b.op(OpId::SliceCopyTensorOut, {qkv, int64_t{-1}, SymInt(hd), SymInt(2 * hd)}, p + ".attn.k_heads"));
    HF2PTE_ASSIGN_OR_RETURN(v, b.op(OpId::SliceCopyTensorOut, {qkv, int64_t{-1}, SymInt(2 * hd), SymInt(3 * hd)}, p + ".attn.v_heads"));
  } else {
    if (w.qkv) {
      // [q | k | v] blocks along the output (GPT-2's c_attn).
      const int64_t qd = nh * hd, kvd = nkv * hd;
      HF2PTE_ASSIGN_OR_RETURN(ValueId qkv, b.linear(h, *w.qkv, p + ".attn.qkv_proj"));
      HF2PTE_ASSIGN_OR_RETURN(q, b.op(OpId::SliceCopyTensorOut, {qkv, int64_t{-1}, SymInt(0), SymInt(qd)}, p + ".attn.q_proj"));
      HF2PTE_ASSIGN_OR_RETURN(k, b.op(OpId::SliceCopyTensorOut, {qkv, int64_t{-1}, SymInt(qd), SymInt(qd + kvd)}, p + ".attn.k_proj"));
      HF2PTE_ASSIGN_OR_RETURN(v, b.op(OpId::SliceCopyTensorOut, {qkv, int64_t{-1}, SymInt(qd + kvd), SymInt(qd + 2 * kvd)}, p + ".attn.v_proj"));
    } else {
      HF2PTE_ASSIGN_OR_RETURN(q, b.linear(h, w.q, p + ".attn.q_proj"));
      HF2PTE_ASSIGN_OR_RETURN(k, b.linear(h, w.k, p + ".attn.k_proj"));
      HF2PTE_ASSIGN_OR_RETURN(v, b.linear(h, w.v, p + ".attn.v_proj"));
    }
    if (arch.qk_norm == QkNormScope::kFullWidth && w.q_norm) {
      // OLMo 2 normalises the whole projection, before the split into heads.
      HF2PTE_ASSIGN_OR_RETURN(q, b.norm(q, *w.q_norm, no, p + ".attn.q_norm"));
      HF2PTE_ASSIGN_OR_RETURN(k, b.norm(k, *w.k_norm, no, p + ".attn.k_norm"));
    }
    HF2PTE_ASSIGN_OR_RETURN(q, b.op(OpId::ViewCopyOut, {q, IntList{S, nh, hd}}, p + ".attn.q_heads"));
    HF2PTE_ASSIGN_OR_RETURN(k, b.op(OpId::ViewCopyOut, {k, IntList{S, nkv, hd}}, p + ".attn.k_heads"));
    HF2PTE_ASSIGN_OR_RETURN(v, b.op(OpId::ViewCopyOut, {v, IntList{S, nkv, hd}}, p + ".attn.v_heads"));
  }
  if (arch.qk_norm == QkNormScope::kPerHead && w.q_norm) {
    HF2PTE_ASSIGN_OR_RETURN(q, b.norm(q, *w.q_norm, no, p + ".attn.q_norm"));
    HF2PTE_ASSIGN_OR_RETURN(k, b.norm(k, *w.k_norm, no, p + ".attn.k_norm"));
  }
  if (in.cos >= 0) {  // no tables: learned absolute positions instead (GPT-2)
    HF2PTE_ASSIGN_OR_RETURN(q, b.rope(q, in.cos, in.sin, p + ".attn.q_rope"));
    HF2PTE_ASSIGN_OR_RETURN(k, b.rope(k, in.cos, in.sin, p + ".attn.k_rope"));
  }
  // Gemma 2/3 scale by query_pre_attn_scalar^-0.5 instead of head_dim^-0.5; Granite by attention_multiplier.
  const double scale = c.attention_multiplier.value_or(1.0 / std::sqrt(c.query_pre_attn_scalar.value_or(double(hd))));
  if (sh.start_pos) return custom_sdpa_attention(b, c, w, sh, q, k, v, scale, p);
  IntList heads_first{1, 0, 2};
  HF2PTE_ASSIGN_OR_RETURN(q, b.op(OpId::PermuteCopyOut, {q, heads_first}, p + ".attn.q_t"));
  HF2PTE_ASSIGN_OR_RETURN(k, b.op(OpId::PermuteCopyOut, {k, heads_first}, p + ".attn.k_t"));
  HF2PTE_ASSIGN_OR_RETURN(v, b.op(OpId::PermuteCopyOut, {v, heads_first}, p + ".attn.v_t"));

  // Without a cache the keys and values are this call's own [kv_heads, S, head_dim].
  ValueId k_cache = k, v_cache = v;
  if (sh.kv_cache) {
    // Static KV cache [kv_heads, max_seq_len, head_dim]: rows at cache_position are overwritten in place.
    TensorType cache_type{b.dtype(), {nkv, sh.max_seq_len, hd}, {}};
    k_cache = g.add_buffer(p + ".attn.k_cache", cache_type);
    v_cache = g.add_buffer(p + ".attn.v_cache", cache_type);
    OptTensorList at_positions{std::nullopt, sh.cache_position};
    HF2PTE_RETURN_IF_ERROR(g.add_node(OpId::IndexPut_, {k_cache, at_positions, k}, p + ".attn.k_update").status());
    HF2PTE_RETURN_IF_ERROR(g.add_node(OpId::IndexPut_, {v_cache, at_positions, v}, p + ".attn.v_update").status());
  }

  if (sh.end) {
    // Only the written prefix: the same rows with the unwritten ones cut off, so
    // q.k^T, the mask fill, softmax and p.v shrink from max_seq_len to `end`.
    const SymInt end = *sh.end;
    HF2PTE_ASSIGN_OR_RETURN(k_cache, b.op(OpId::SliceCopyTensorOut, {k_cache, int64_t{1}, SymInt(0), end}, p + ".attn.k_written"));
    HF2PTE_ASSIGN_OR_RETURN(v_cache, b.op(OpId::SliceCopyTensorOut, {v_cache, int64_t{1}, SymInt(0), end}, p + ".attn.v_written"));
  }
  AttentionOptions ao;
  ao.heads = nh;
  ao.kv_heads = nkv;
  ao.scale = scale;
  ao.softcap = c.attn_logit_softcapping;
  ao.sinks = w.sinks;
  HF2PTE_ASSIGN_OR_RETURN(ValueId attn, b.attention(q, k_cache, v_cache, in.mask, ao, p + ".attn.sdpa"));
  HF2PTE_ASSIGN_OR_RETURN(attn, b.op(OpId::PermuteCopyOut, {attn, heads_first}, p + ".attn.out_t"));
  HF2PTE_ASSIGN_OR_RETURN(attn, b.op(OpId::ViewCopyOut, {attn, IntList{S, nh * hd}}, p + ".attn.merge"));
  return b.linear(attn, w.o, p + ".attn.o_proj");
}

MoeOptions moe_options(const ArchTraits& arch, const LlamaFamilyConfig& c) {
  MoeOptions o;
  o.top_k = c.num_experts_per_tok;
  o.activation = c.hidden_act;
  o.normalize_top_k = c.norm_topk_prob;
  o.router = arch.router;
  o.n_group = c.n_group;
  o.topk_group = c.topk_group;
  o.routed_scaling_factor = c.routed_scaling_factor;
  if (arch.clamped_swiglu) o.swiglu_limit = c.swiglu_limit;
  return o;
}

Result<ValueId> mlp_block(BlockBuilder& b, const ArchTraits& arch, const LlamaFamilyConfig& c, const LayerWeights& w,
                          ValueId h, const std::string& p) {
  if (w.moe) return b.moe(h, *w.moe, moe_options(arch, c), p + ".moe");
  if (w.mlp.gate.weight >= 0) return b.gated_mlp(h, w.mlp, c.hidden_act, p + ".mlp");
  // Plain MLP (Phi fc1/fc2, GPT-NeoX dense_h_to_4h/dense_4h_to_h): down(act(up(x))).
  HF2PTE_ASSIGN_OR_RETURN(ValueId up, b.linear(h, w.mlp.up, p + ".mlp.up_proj"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId a, b.activation(up, c.hidden_act, p + ".mlp.act"));
  return b.linear(a, w.mlp.down, p + ".mlp.down_proj");
}

// One layer; the norms present and parallel_residual give every layout:
//   pre-norm (Llama):   h = x + attn(n1(x));            out = h + mlp(n2(h))
//   sandwich (Gemma 2): h = x + n1'(attn(n1(x)));       out = h + n2'(mlp(n2(h)))
//   post-norm (OLMo 2): h = x + n1'(attn(x));           out = h + n2'(mlp(h))
//   parallel (NeoX):    out = x + attn(n1(x)) + mlp(n2(x)); Phi shares n1 for both.
Result<ValueId> decoder_layer(BlockBuilder& b, const ArchTraits& arch, const LlamaFamilyConfig& c,
                              const LayerWeights& w, const Shared& sh, const LayerInputs& in, ValueId x, int64_t i) {
  const auto p = fmt::format("layers.{}", i);
  const NormOptions no{arch.norm, c.rms_norm_eps};
  ValueId attn_in = x;
  if (w.attn_norm) {
    HF2PTE_ASSIGN_OR_RETURN(attn_in, b.norm(x, *w.attn_norm, no, p + ".attn_norm"));
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId a, attention_block(b, arch, c, w, sh, in, attn_in, p));
  if (w.post_attn_norm) {
    HF2PTE_ASSIGN_OR_RETURN(a, b.norm(a, *w.post_attn_norm, no, p + ".post_attn_norm"));
  }
  if (c.residual_multiplier != 1.0) {  // Granite
    HF2PTE_ASSIGN_OR_RETURN(a, b.op(OpId::MulScalarOut, {a, c.residual_multiplier}, p + ".attn_scaled"));
  }
  ValueId mlp_in = attn_in;
  if (!arch.parallel_residual) {
    HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::AddOut, {x, a}, p + ".attn_residual"));
    mlp_in = x;
  }
  if (w.ffn_norm) {
    HF2PTE_ASSIGN_OR_RETURN(mlp_in, b.norm(x, *w.ffn_norm, no, p + ".ffn_norm"));
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId m, mlp_block(b, arch, c, w, mlp_in, p));
  if (w.post_ffn_norm) {
    HF2PTE_ASSIGN_OR_RETURN(m, b.norm(m, *w.post_ffn_norm, no, p + ".post_ffn_norm"));
  }
  if (c.residual_multiplier != 1.0) {
    HF2PTE_ASSIGN_OR_RETURN(m, b.op(OpId::MulScalarOut, {m, c.residual_multiplier}, p + ".mlp_scaled"));
  }
  if (arch.parallel_residual) {
    HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::AddOut, {x, a}, p + ".attn_residual"));
  }
  return b.op(OpId::AddOut, {x, m}, p + ".mlp_residual");
}

// Config values that change the math but have no implementation here.
Status check_supported(const ArchTraits& arch, const LlamaFamilyConfig& c, int64_t max_seq_len) {
  HF2PTE_CHECK_OR_RETURN(c.scale_attn_weights && !c.scale_attn_by_inverse_layer_idx, kNotSupported,
                         "config.json: scale_attn_weights false / scale_attn_by_inverse_layer_idx true are not "
                         "supported yet");
  if (!arch.names.pos_embed.empty()) {
    // Learned positions exist only up to max_position_embeddings.
    HF2PTE_CHECK_OR_RETURN(max_seq_len <= c.max_position_embeddings, kInvalidArgument,
                           "--max-seq-len {} exceeds the learned position embeddings; expected <= {}", max_seq_len,
                           c.max_position_embeddings);
    return Status::ok();
  }
  if (c.head_dim % 2 != 0) {
    return make_error(ErrorCode::kInvalidInput, "config.json: head_dim must be even for rotary embeddings; got {}", c.head_dim);
  }
  const auto rotary = int64_t(double(c.head_dim) * c.partial_rotary_factor);
  HF2PTE_CHECK_OR_RETURN(rotary >= 2 && rotary % 2 == 0, kInvalidInput,
                         "config.json: rotary dims (head_dim * partial_rotary_factor) must be even and positive; got {}",
                         rotary);
  HF2PTE_CHECK_OR_RETURN(!c.qk_layernorm, kNotSupported, "config.json: qk_layernorm true is not supported yet");
  HF2PTE_CHECK_OR_RETURN(arch.parallel_residual == c.use_parallel_residual, kNotSupported,
                         "config.json: use_parallel_residual {} is not supported yet for {}", c.use_parallel_residual,
                         arch.model_type);
  HF2PTE_CHECK_OR_RETURN(!arch.qkv_per_head || c.num_key_value_heads == c.num_attention_heads, kInvalidInput,
                         "config.json: a per-head fused query_key_value needs num_key_value_heads == "
                         "num_attention_heads; expected {}, got {}",
                         c.num_attention_heads, c.num_key_value_heads);
  if (!arch.names.router.empty()) {
    HF2PTE_CHECK_OR_RETURN(c.num_experts > 0, kInvalidInput, "config.json: {} needs num_experts > 0; got {}",
                           arch.model_type, c.num_experts);
    HF2PTE_CHECK_OR_RETURN(arch.names.shared_gate.empty() || c.shared_expert_intermediate_size > 0 ||
                               c.n_shared_experts > 0,
                           kInvalidInput, "config.json: {} needs shared_expert_intermediate_size > 0; got {}",
                           arch.model_type, c.shared_expert_intermediate_size);
    HF2PTE_CHECK_OR_RETURN(!arch.clamped_swiglu || c.swiglu_limit, kInvalidInput,
                           "config.json: {} needs swiglu_limit", arch.model_type);
    HF2PTE_CHECK_OR_RETURN(c.num_experts_per_tok <= c.topk_group * (c.num_experts / c.n_group), kInvalidInput,
                           "config.json: num_experts_per_tok {} exceeds the experts of topk_group {} groups ({} each)",
                           c.num_experts_per_tok, c.topk_group, c.num_experts / c.n_group);
    HF2PTE_CHECK_OR_RETURN(c.decoder_sparse_step == 1 && c.mlp_only_layers.empty(), kNotSupported,
                           "config.json: dense layers in a MoE model (decoder_sparse_step {}, mlp_only_layers of {}) "
                           "are not supported yet; expected every layer MoE",
                           c.decoder_sparse_step, c.mlp_only_layers.size());
  }
  return Status::ok();
}


/// RoPE rows for this call's positions: cos/sin [S, 1, rotary_dim].
Result<std::pair<ValueId, ValueId>> rope_rows(BlockBuilder& b, const RopeSpec& spec, const Shared& sh,
                                              const std::string& name) {
  Graph& g = b.graph();
  HF2PTE_ASSIGN_OR_RETURN(RopeTables t, rope_tables(spec, sh.max_seq_len, b.dtype()));
  ValueId cos_table = g.add_constant(name + ".cos_table", std::move(t.cos));
  ValueId sin_table = g.add_constant(name + ".sin_table", std::move(t.sin));
  HF2PTE_ASSIGN_OR_RETURN(ValueId cos, b.op(OpId::IndexSelectOut, {cos_table, int64_t{0}, sh.cache_position}, name + ".cos_rows"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId sin, b.op(OpId::IndexSelectOut, {sin_table, int64_t{0}, sh.cache_position}, name + ".sin_rows"));
  HF2PTE_ASSIGN_OR_RETURN(cos, b.op(OpId::ViewCopyOut, {cos, IntList{sh.S, 1, spec.rotary_dim}}, name + ".cos"));
  HF2PTE_ASSIGN_OR_RETURN(sin, b.op(OpId::ViewCopyOut, {sin, IntList{sh.S, 1, spec.rotary_dim}}, name + ".sin"));
  return std::pair{cos, sin};
}

/// The masks over the whole cache [S, max_seq_len] (without a cache over the
/// call's keys, [S, S]): causal (key j visible to query i iff j <= pos_i) and,
/// when a window is given, sliding (also j > pos_i - window, i.e.
/// 0 <= pos_i - j < window).
struct Masks {
  ValueId key_pos = -1;  ///< arange(max_seq_len) as i64 [1, max_seq_len]; no cache: [1, S]
  ValueId causal = -1;
  std::optional<ValueId> sliding;
};

/// arange(max_seq_len) as an i64 constant of the given shape.
ValueId arange_constant(Graph& g, int64_t n, std::vector<int64_t> shape, const std::string& name) {
  std::vector<int64_t> positions(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) positions[size_t(j)] = j;
  return g.add_constant(name, graph::ConstantData::from_bytes(ScalarType::kLong, std::move(shape), to_bytes(positions),
                                                              "arange(max_seq_len)"));
}

/// Without a KV cache the S tokens sit at positions 0..S-1: arange(max_seq_len)[:S].
Result<ValueId> prefix_positions(BlockBuilder& b, const Shared& sh) {
  ValueId all = arange_constant(b.graph(), sh.max_seq_len, {sh.max_seq_len}, "positions.table");
  return b.op(OpId::SliceCopyTensorOut, {all, int64_t{0}, SymInt(0), sh.S}, "positions");
}

Result<Masks> build_masks(BlockBuilder& b, const Shared& sh, std::optional<int64_t> window) {
  Graph& g = b.graph();
  ValueId key_pos = -1;
  if (sh.kv_cache) {
    key_pos = arange_constant(g, sh.max_seq_len, {1, sh.max_seq_len}, "mask.key_positions");
  } else {  // the keys are the call's own tokens, at the same positions as the queries
    HF2PTE_ASSIGN_OR_RETURN(key_pos, b.op(OpId::ViewCopyOut, {sh.cache_position, IntList{1, sh.S}}, "mask.key_positions"));
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId qpos, b.op(OpId::ViewCopyOut, {sh.cache_position, IntList{sh.S, 1}}, "mask.query_positions"));
  Masks m;
  m.key_pos = key_pos;
  HF2PTE_ASSIGN_OR_RETURN(m.causal, b.op(OpId::LeTensorOut, {key_pos, qpos}, "mask"));
  if (window) {
    HF2PTE_ASSIGN_OR_RETURN(ValueId first, b.op(OpId::AddScalarOut, {qpos, int64_t{1 - *window}}, "mask.window_first"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId in_window, b.op(OpId::LeTensorOut, {first, key_pos}, "mask.in_window"));
    // where(a, b, false) == a && b, with ops every portable kernel library has.
    ValueId no = b.scalar(ScalarType::kBool, 0, "mask.false");
    HF2PTE_ASSIGN_OR_RETURN(ValueId sliding, b.op(OpId::WhereSelfOut, {m.causal, in_window, no}, "mask.sliding"));
    m.sliding = sliding;
  }
  return m;
}

/// The written width of the cache for --attention-span written: end =
/// max(cache_position) + 1, i.e. the number of keys the last query may see,
/// as a data-dependent size bounded by max_seq_len. It is counted with nonzero
/// over arange(max_seq_len) <= max(cache_position) (one [1, max_seq_len] row per
/// call), which clamps positions past the cache to max_seq_len and needs no
/// runtime assert; see docs/decisions.md for why not _local_scalar_dense.
Result<SymInt> written_end(BlockBuilder& b, const Shared& sh, ValueId key_pos) {
  HF2PTE_ASSIGN_OR_RETURN(ValueId last, b.op(OpId::AmaxOut, {sh.cache_position, IntList{0}, true}, "span.last_position"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId written, b.op(OpId::LeTensorOut, {key_pos, last}, "span.written"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId rows, b.op(OpId::NonzeroOut, {written}, "span.written_positions"));
  return b.graph().type(rows).sizes[0];
}

/// The masks cut to the written width [S, end], once per call for every layer.
Status narrow_masks(BlockBuilder& b, const SymInt& end, Masks* m) {
  HF2PTE_ASSIGN_OR_RETURN(m->causal, b.op(OpId::SliceCopyTensorOut, {m->causal, int64_t{1}, SymInt(0), end}, "mask.written"));
  if (m->sliding) {
    HF2PTE_ASSIGN_OR_RETURN(ValueId s, b.op(OpId::SliceCopyTensorOut, {*m->sliding, int64_t{1}, SymInt(0), end}, "mask.sliding_written"));
    m->sliding = s;
  }
  return Status::ok();
}

}  // namespace

Result<BuiltModel> build_causal_lm(const ArchTraits& arch, const LlamaFamilyConfig& c, Checkpoint& ckpt,
                                   const BuildOptions& opt) {
  BuiltModel out;
  out.model_type = std::string(arch.model_type);
  out.architecture = std::string(arch.architecture);
  const int64_t max_seq_len = opt.max_seq_len.value_or(std::min<int64_t>(c.max_position_embeddings, 2048));
  HF2PTE_CHECK_OR_RETURN(max_seq_len >= 1, kInvalidArgument, "--max-seq-len must be at least 1; got {}", max_seq_len);
  HF2PTE_RETURN_IF_ERROR(check_supported(arch, c, max_seq_len));
  HF2PTE_CHECK_OR_RETURN(opt.kv_cache || !opt.attend_written_only.value_or(false), kInvalidArgument,
                         "--attention-span written needs the KV cache; without it every call attends over its own tokens");
  // The default span: written wherever the attention reads a static KV cache
  // (custom_sdpa reads only the written rows itself).
  out.attends_written_only = opt.attend_written_only.value_or(opt.kv_cache && !opt.custom_sdpa);
  out.max_seq_len = max_seq_len;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) out.routed_experts |= is_moe_layer(arch, c, i);

  Graph g("forward");
  BlockBuilder b(g, ckpt, opt.dtype, WeightLayout{arch.conv1d_weights, arch.optional_prefix});
  Shared sh;
  sh.max_seq_len = max_seq_len;
  sh.kv_cache = opt.kv_cache;
  sh.S = g.add_dim("seq", 1, max_seq_len);
  ValueId input_ids = g.add_input("input_ids", TensorType{ScalarType::kLong, {1, sh.S}, {}});
  if (sh.kv_cache) {
    sh.cache_position = g.add_input("cache_position", TensorType{ScalarType::kLong, {sh.S}, {}});
  } else {
    HF2PTE_ASSIGN_OR_RETURN(sh.cache_position, prefix_positions(b, sh));
  }

  const int64_t H = c.hidden_size, V = c.vocab_size, hd = c.head_dim;
  HF2PTE_ASSIGN_OR_RETURN(ValueId embed, b.weight(std::string(arch.names.embed), {V, H}));
  HF2PTE_ASSIGN_OR_RETURN(ValueId ids, b.op(OpId::ViewCopyOut, {input_ids, IntList{sh.S}}, "ids"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId x, b.op(OpId::EmbeddingOut, {embed, ids}, "embed"));
  if (arch.scale_embeddings) {
    // Gemma: x * sqrt(hidden), the factor rounded to the activation dtype first as HF does.
    HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::MulScalarOut, {x, round_to(b.dtype(), std::sqrt(double(H)))}, "embed_scaled"));
  }
  if (c.embedding_multiplier != 1.0) {  // Granite
    HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::MulScalarOut, {x, c.embedding_multiplier}, "embed_multiplied"));
  }

  // RoPE: every layer uses rope_theta with rope_scaling, except Gemma 3's
  // sliding layers (rope_local_base_freq, unscaled). GPT-2 adds learned positions instead.
  std::pair<ValueId, ValueId> global_rows{-1, -1};
  if (!arch.names.pos_embed.empty()) {
    HF2PTE_ASSIGN_OR_RETURN(ValueId wpe, b.weight(std::string(arch.names.pos_embed), {c.max_position_embeddings, H}));
    HF2PTE_ASSIGN_OR_RETURN(ValueId pos, b.op(OpId::IndexSelectOut, {wpe, int64_t{0}, sh.cache_position}, "pos_embed"));
    HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::AddOut, {x, pos}, "embed_with_pos"));
  } else {
    RopeSpec global{int64_t(double(hd) * c.partial_rotary_factor), c.rope_theta, c.rope_scaling, c.max_position_embeddings,
                    c.original_max_position_embeddings};
    HF2PTE_ASSIGN_OR_RETURN(global_rows, rope_rows(b, global, sh, "rope"));
  }
  auto local_rows = global_rows;
  if (c.rope_local_base_freq && global_rows.first >= 0) {
    RopeSpec local{int64_t(double(hd) * c.partial_rotary_factor), *c.rope_local_base_freq, nlohmann::json(),
                   c.max_position_embeddings, std::nullopt};
    HF2PTE_ASSIGN_OR_RETURN(local_rows, rope_rows(b, local, sh, "rope_local"));
  }
  bool any_sliding = false;
  for (AttentionKind k : c.layer_types) any_sliding = any_sliding || k == AttentionKind::kSliding;
  HF2PTE_ASSIGN_OR_RETURN(Masks masks, build_masks(b, sh, any_sliding ? c.sliding_window : std::nullopt));
  if (out.attends_written_only) {
    HF2PTE_ASSIGN_OR_RETURN(SymInt end, written_end(b, sh, masks.key_pos));
    sh.end = end;
    HF2PTE_RETURN_IF_ERROR(narrow_masks(b, end, &masks));
  }
  if (opt.custom_sdpa) {
    HF2PTE_CHECK_OR_RETURN(sh.kv_cache && !out.attends_written_only, kInvalidArgument,
                           "--use-custom-sdpa needs the KV cache and the default --attention-span full (custom_sdpa "
                           "reads only the written positions itself)");
    HF2PTE_CHECK_OR_RETURN(!any_sliding, kNotSupported,
                           "--use-custom-sdpa: {} has sliding-window layers, which llama::custom_sdpa cannot mask; "
                           "export without the flag", arch.model_type);
    // The first position of the call: positions are consecutive (the LLM
    // contract), so it is the written end minus S, a size bounded by the cache.
    HF2PTE_ASSIGN_OR_RETURN(SymInt end, written_end(b, sh, masks.key_pos));
    sh.start_pos = end - sh.S;
  }

  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const bool sliding = c.layer_types[size_t(i)] == AttentionKind::kSliding;
    const auto& rows = sliding ? local_rows : global_rows;
    LayerInputs in{rows.first, rows.second, sliding ? *masks.sliding : masks.causal};
    if (!c.rope_layers.empty() && !c.rope_layers[size_t(i)]) in.cos = in.sin = -1;  // NoPE layer (SmolLM3)
    HF2PTE_ASSIGN_OR_RETURN(LayerWeights w, load_layer(b, arch, c, i));
    HF2PTE_ASSIGN_OR_RETURN(x, decoder_layer(b, arch, c, w, sh, in, x, i));
  }
  // --logits last: only the call's last position goes on (norm and lm_head
  // are per position), so the head runs on one row however long the prompt.
  SymInt logit_rows = sh.S;
  if (opt.last_logits) {
    HF2PTE_ASSIGN_OR_RETURN(x, b.last_position(x, sh.S));
    logit_rows = SymInt(1);
    out.last_logits_only = true;
  }
  HF2PTE_ASSIGN_OR_RETURN(NormWeights final_norm, b.norm_weights(std::string(arch.names.final_norm), H, arch.norm));
  HF2PTE_ASSIGN_OR_RETURN(x, b.norm(x, final_norm, NormOptions{arch.norm, c.rms_norm_eps}, "final_norm"));
  LinearWeights head;
  const std::string lm_head(arch.names.lm_head);
  if (c.tie_word_embeddings && !b.has(lm_head + ".weight")) {
    head.weight = embed;  // tied: the embedding matrix is the output projection
  } else {
    HF2PTE_ASSIGN_OR_RETURN(head, b.linear_weights(lm_head, V, H, arch.bias.lm_head));
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId logits, b.linear(x, head, "lm_head"));
  if (c.logits_scaling != 1.0) {  // Granite divides the logits
    HF2PTE_ASSIGN_OR_RETURN(logits, b.op(OpId::MulScalarOut, {logits, 1.0 / c.logits_scaling}, "logits_scaled"));
  }
  if (c.final_logit_softcapping) {
    HF2PTE_ASSIGN_OR_RETURN(logits, b.softcap(logits, *c.final_logit_softcapping, "final_softcap"));
  }
  // The logits are f32 whatever the model's dtype (llm-contract.md), so that
  // runners and samplers read one type; a 16-bit head is cast once.
  if (g.type(logits).dtype != ScalarType::kFloat) {
    HF2PTE_ASSIGN_OR_RETURN(logits, b.op(OpId::ToCopy, {logits, ScalarType::kFloat}, "logits_f32"));
  }
  HF2PTE_ASSIGN_OR_RETURN(logits, b.op(OpId::ViewCopyOut, {logits, IntList{1, logit_rows, V}}, "logits"));
  g.set_outputs({logits});

  // Derived buffers some checkpoints carry (never weights).
  for (const auto& name : ckpt.tensor_names()) {
    for (auto suffix : arch.ignored_suffixes) {
      if (!suffix.empty() && name.ends_with(suffix)) ckpt.mark_ignored(name);
    }
  }
  HF2PTE_RETURN_IF_ERROR(ckpt.check_all_consumed());

  out.program.methods.push_back(std::move(g));
  set_llm_metadata(LlmMetadata{max_seq_len, V, c.num_hidden_layers, c.bos_token_id, c.eos_token_ids}, opt, &out);
  out.program.constant_methods["get_n_kv_heads"] = c.num_key_value_heads;
  out.program.constant_methods["get_head_dim"] = c.head_dim;
  return out;
}

void set_llm_metadata(const LlmMetadata& md, const BuildOptions& opt, BuiltModel* out) {
  auto& m = out->program.constant_methods;
  m["get_max_seq_len"] = md.max_seq_len;
  m["get_max_context_len"] = md.max_seq_len;
  m["get_vocab_size"] = md.vocab_size;
  if (md.bos_id) m["get_bos_id"] = *md.bos_id;
  if (!md.eos_ids.empty()) m["get_eos_ids"] = md.eos_ids;
  m["use_kv_cache"] = opt.kv_cache;
  m["use_sdpa_with_kv_cache"] = opt.custom_sdpa;
  m["enable_dynamic_shape"] = true;
  m["get_n_layers"] = md.n_layers;
  m["get_model_type"] = out->model_type;
  m["get_architecture"] = out->architecture;
  m["get_exporter_version"] = opt.exporter_version;
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
  if (arch->mixer == MixerKind::kSelectiveScan) return build_mamba(*arch, ckpt, options);
  HF2PTE_ASSIGN_OR_RETURN(LlamaFamilyConfig c, parse_llama_family_config(cfg, where));
  return build_causal_lm(*arch, c, ckpt, options);
}

}  // namespace hf2pte::models
