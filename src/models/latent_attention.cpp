#include "models/latent_attention.h"

#include <cmath>

#include <fmt/format.h>

namespace hf2pte::models {

namespace {

using graph::IntList;
using graph::OptTensorList;
using graph::TensorType;

/// Per head h, rows h * stride + offset + perm[j] for j in perm.
std::vector<int64_t> head_rows(int64_t heads, int64_t stride, int64_t offset, const std::vector<int64_t>& perm) {
  std::vector<int64_t> rows;
  rows.reserve(size_t(heads) * perm.size());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t j : perm) rows.push_back(h * stride + offset + j);
  }
  return rows;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = i;
  return v;
}

/// The rope dims in rotate_half order. Interleaved pairs (2j, 2j + 1) become
/// (j, j + d/2): evens first, then odds. q_pe and k_pe get the same order, so
/// their dot products (all attention reads) are unchanged, and the shared
/// rotate_half RoPE then rotates exactly the pairs the checkpoint means.
std::vector<int64_t> rope_order(int64_t d, bool interleaved) {
  if (!interleaved) return iota(d);
  std::vector<int64_t> v;
  for (int64_t j = 0; j < d; j += 2) v.push_back(j);
  for (int64_t j = 1; j < d; j += 2) v.push_back(j);
  return v;
}

}  // namespace

Result<LatentAttentionWeights> load_latent_attention(BlockBuilder& b, const ArchTraits& arch,
                                                     const LlamaFamilyConfig& c, int64_t i) {
  const auto& n = arch.names;
  const auto& m = *c.mla;
  const int64_t H = c.hidden_size, heads = c.num_attention_heads, nope = m.qk_nope_head_dim,
                rope = m.qk_rope_head_dim, qk = nope + rope, kvr = m.kv_lora_rank, v = m.v_head_dim;
  LatentAttentionWeights w;
  // q: per head [q_nope | q_pe] rows of q_b_proj (q_lora_rank wide) or q_proj (hidden wide).
  std::string q_name = layer_name(n.q, i) + ".weight";
  int64_t q_in = H;
  if (m.q_lora_rank > 0) {
    HF2PTE_ASSIGN_OR_RETURN(LinearWeights qa, b.linear_weights(layer_name(n.q_a, i), m.q_lora_rank, H, false));
    HF2PTE_ASSIGN_OR_RETURN(NormWeights qn, b.norm_weights(layer_name(n.q_a_norm, i), m.q_lora_rank, arch.norm));
    w.q_a = qa, w.q_a_norm = qn;
    q_name = layer_name(n.q_b, i) + ".weight";
    q_in = m.q_lora_rank;
  }
  const std::vector<int64_t> q_shape{heads * qk, q_in};
  HF2PTE_ASSIGN_OR_RETURN(w.q_nope.weight,
                          b.weight_view(q_name, q_shape, WeightView{.rows = head_rows(heads, qk, 0, iota(nope))}, "nope"));
  HF2PTE_ASSIGN_OR_RETURN(
      w.q_pe.weight,
      b.weight_view(q_name, q_shape, WeightView{.rows = head_rows(heads, qk, nope, rope_order(rope, m.rope_interleave))}, "rope"));
  // kv_a_proj_with_mqa rows [compressed kv (kvr) | k_pe (rope)].
  const std::string kv_a = layer_name(n.kv_a, i) + ".weight";
  const std::vector<int64_t> kv_a_shape{kvr + rope, H};
  HF2PTE_ASSIGN_OR_RETURN(w.kv_latent.weight, b.weight_view(kv_a, kv_a_shape, WeightView{.row_end = kvr}, "latent"));
  HF2PTE_ASSIGN_OR_RETURN(
      w.k_pe.weight, b.weight_view(kv_a, kv_a_shape, WeightView{.rows = head_rows(1, 0, kvr, rope_order(rope, m.rope_interleave))}, "rope"));
  HF2PTE_ASSIGN_OR_RETURN(w.kv_norm, b.norm_weights(layer_name(n.kv_a_norm, i), kvr, arch.norm));
  // kv_b_proj rows per head [k_nope (nope) | v (v)], kv_lora_rank wide.
  const std::string kv_b = layer_name(n.kv_b, i) + ".weight";
  const std::vector<int64_t> kv_b_shape{heads * (nope + v), kvr};
  HF2PTE_ASSIGN_OR_RETURN(w.w_kb, b.weight_view(kv_b, kv_b_shape,
                                                WeightView{.rows = head_rows(heads, nope + v, 0, iota(nope)), .sizes = {heads, nope, kvr}},
                                                "k_nope"));
  HF2PTE_ASSIGN_OR_RETURN(w.w_vb, b.weight_view(kv_b, kv_b_shape,
                                                WeightView{.rows = head_rows(heads, nope + v, nope, iota(v)), .sizes = {heads, v, kvr}},
                                                "v"));
  return w;
}

Result<double> latent_attention_scale(const LlamaFamilyConfig& c) {
  const auto& m = *c.mla;
  double scale = 1.0 / std::sqrt(double(m.qk_nope_head_dim + m.qk_rope_head_dim));
  const auto& rs = c.rope_scaling;
  if (rs.is_object() && rs.value("rope_type", rs.value("type", std::string())) == "yarn") {
    auto all_dim = rs.find("mscale_all_dim");
    auto factor = rs.find("factor");
    if (all_dim != rs.end() && all_dim->is_number() && all_dim->get<double>() != 0 && factor != rs.end() &&
        factor->is_number()) {
      const double f = factor->get<double>();
      const double mscale = f <= 1 ? 1.0 : 0.1 * all_dim->get<double>() * std::log(f) + 1.0;
      scale *= mscale * mscale;
    }
  }
  return scale;
}

Result<ValueId> latent_attention(BlockBuilder& b, const LlamaFamilyConfig& c, const LatentAttentionWeights& w,
                                 const LinearWeights& o_proj, const LatentAttentionInputs& in, ValueId h,
                                 const std::string& p) {
  Graph& g = b.graph();
  const auto& m = *c.mla;
  const int64_t heads = c.num_attention_heads, nope = m.qk_nope_head_dim, rope = m.qk_rope_head_dim,
                kvr = m.kv_lora_rank, v = m.v_head_dim;
  const SymInt& S = in.S;
  const NormOptions no{NormKind::kRms, c.rms_norm_eps};
  IntList heads_first{1, 0, 2};

  // Queries: q_nope absorbed into the latent space, q_pe rotated.
  ValueId cq = h;
  if (w.q_a) {
    HF2PTE_ASSIGN_OR_RETURN(cq, b.linear(h, *w.q_a, p + ".attn.q_a_proj"));
    HF2PTE_ASSIGN_OR_RETURN(cq, b.norm(cq, *w.q_a_norm, no, p + ".attn.q_a_norm"));
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId q_nope, b.linear(cq, w.q_nope, p + ".attn.q_nope"));
  HF2PTE_ASSIGN_OR_RETURN(q_nope, b.op(OpId::ViewCopyOut, {q_nope, IntList{S, heads, nope}}, p + ".attn.q_nope_heads"));
  HF2PTE_ASSIGN_OR_RETURN(q_nope, b.op(OpId::PermuteCopyOut, {q_nope, heads_first}, p + ".attn.q_nope_t"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId q_lat, b.op(OpId::BmmOut, {q_nope, w.w_kb}, p + ".attn.q_absorbed"));  // [heads, S, kvr]
  HF2PTE_ASSIGN_OR_RETURN(ValueId q_pe, b.linear(cq, w.q_pe, p + ".attn.q_pe"));
  HF2PTE_ASSIGN_OR_RETURN(q_pe, b.op(OpId::ViewCopyOut, {q_pe, IntList{S, heads, rope}}, p + ".attn.q_pe_heads"));
  HF2PTE_ASSIGN_OR_RETURN(q_pe, b.rope(q_pe, in.cos, in.sin, p + ".attn.q_rope"));
  HF2PTE_ASSIGN_OR_RETURN(q_pe, b.op(OpId::PermuteCopyOut, {q_pe, heads_first}, p + ".attn.q_pe_t"));  // [heads, S, rope]

  // This call's latent kv and rope key, one "head" shared by all heads.
  HF2PTE_ASSIGN_OR_RETURN(ValueId ckv, b.linear(h, w.kv_latent, p + ".attn.kv_a_proj"));
  HF2PTE_ASSIGN_OR_RETURN(ckv, b.norm(ckv, w.kv_norm, no, p + ".attn.kv_a_norm"));
  HF2PTE_ASSIGN_OR_RETURN(ckv, b.op(OpId::ViewCopyOut, {ckv, IntList{1, S, kvr}}, p + ".attn.latent"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId kpe, b.linear(h, w.k_pe, p + ".attn.k_pe"));
  HF2PTE_ASSIGN_OR_RETURN(kpe, b.op(OpId::ViewCopyOut, {kpe, IntList{S, 1, rope}}, p + ".attn.k_pe_heads"));
  HF2PTE_ASSIGN_OR_RETURN(kpe, b.rope(kpe, in.cos, in.sin, p + ".attn.k_rope"));
  HF2PTE_ASSIGN_OR_RETURN(kpe, b.op(OpId::ViewCopyOut, {kpe, IntList{1, S, rope}}, p + ".attn.k_pe_rows"));

  ValueId latent_cache = ckv, rope_cache = kpe;
  if (in.kv_cache) {
    // The latent cache: [1, max_seq_len, kv_lora_rank] and [1, max_seq_len, qk_rope_head_dim].
    latent_cache = g.add_buffer(p + ".attn.latent_cache", TensorType{b.dtype(), {1, in.max_seq_len, kvr}, {}});
    rope_cache = g.add_buffer(p + ".attn.k_pe_cache", TensorType{b.dtype(), {1, in.max_seq_len, rope}, {}});
    OptTensorList at_positions{std::nullopt, in.cache_position};
    HF2PTE_RETURN_IF_ERROR(g.add_node(OpId::IndexPut_, {latent_cache, at_positions, ckv}, p + ".attn.latent_update").status());
    HF2PTE_RETURN_IF_ERROR(g.add_node(OpId::IndexPut_, {rope_cache, at_positions, kpe}, p + ".attn.k_pe_update").status());
  }
  if (in.end) {
    HF2PTE_ASSIGN_OR_RETURN(latent_cache, b.op(OpId::SliceCopyTensorOut, {latent_cache, int64_t{1}, SymInt(0), *in.end}, p + ".attn.latent_written"));
    HF2PTE_ASSIGN_OR_RETURN(rope_cache, b.op(OpId::SliceCopyTensorOut, {rope_cache, int64_t{1}, SymInt(0), *in.end}, p + ".attn.k_pe_written"));
  }
  const SymInt M = g.type(latent_cache).sizes[1];

  // scores = (q_nope W_kb) . latent + q_pe . k_pe, all heads against one latent row per key.
  HF2PTE_ASSIGN_OR_RETURN(ValueId ql, b.op(OpId::ViewCopyOut, {q_lat, IntList{1, S * heads, kvr}}, p + ".attn.q_latent_rows"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId lt, b.op(OpId::PermuteCopyOut, {latent_cache, IntList{0, 2, 1}}, p + ".attn.latent_t"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId s_nope, b.op(OpId::BmmOut, {ql, lt}, p + ".attn.scores_nope"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId qr, b.op(OpId::ViewCopyOut, {q_pe, IntList{1, S * heads, rope}}, p + ".attn.q_pe_rows"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId rt, b.op(OpId::PermuteCopyOut, {rope_cache, IntList{0, 2, 1}}, p + ".attn.k_pe_t"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId s_rope, b.op(OpId::BmmOut, {qr, rt}, p + ".attn.scores_rope"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId s, b.op(OpId::AddOut, {s_nope, s_rope}, p + ".attn.qk"));
  HF2PTE_ASSIGN_OR_RETURN(double scale, latent_attention_scale(c));
  HF2PTE_ASSIGN_OR_RETURN(s, b.op(OpId::MulScalarOut, {s, scale}, p + ".attn.scores"));
  HF2PTE_ASSIGN_OR_RETURN(s, b.op(OpId::ViewCopyOut, {s, IntList{heads, S, M}}, p + ".attn.scores3"));
  ValueId ninf = b.scalar(g.type(s).dtype, -std::numeric_limits<double>::infinity(), p + ".attn.neg_inf");
  HF2PTE_ASSIGN_OR_RETURN(s, b.op(OpId::WhereSelfOut, {in.mask, s, ninf}, p + ".attn.masked"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId probs, b.op(OpId::SoftmaxOut, {s, int64_t{-1}, false}, p + ".attn.probs"));
  HF2PTE_ASSIGN_OR_RETURN(probs, b.op(OpId::ViewCopyOut, {probs, IntList{1, S * heads, M}}, p + ".attn.probs_rows"));
  // Attention in the latent space, then W_vb per head: [heads, v, kvr] x [heads, kvr, S].
  HF2PTE_ASSIGN_OR_RETURN(ValueId ol, b.op(OpId::BmmOut, {probs, latent_cache}, p + ".attn.out_latent"));
  HF2PTE_ASSIGN_OR_RETURN(ol, b.op(OpId::ViewCopyOut, {ol, IntList{heads, S, kvr}}, p + ".attn.out_latent_heads"));
  HF2PTE_ASSIGN_OR_RETURN(ol, b.op(OpId::PermuteCopyOut, {ol, IntList{0, 2, 1}}, p + ".attn.out_latent_t"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId ov, b.op(OpId::BmmOut, {w.w_vb, ol}, p + ".attn.out_v"));  // [heads, v, S]
  HF2PTE_ASSIGN_OR_RETURN(ov, b.op(OpId::PermuteCopyOut, {ov, IntList{2, 0, 1}}, p + ".attn.out_t"));
  HF2PTE_ASSIGN_OR_RETURN(ov, b.op(OpId::ViewCopyOut, {ov, IntList{S, heads * v}}, p + ".attn.merge"));
  return b.linear(ov, o_proj, p + ".attn.o_proj");
}

}  // namespace hf2pte::models
