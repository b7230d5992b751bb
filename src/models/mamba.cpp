// Mamba's layer (HF MambaMixer, the slow path), per layer i:
//   h = rms(x);  [xs | z] = in_proj(h)
//   xs = silu(causal depthwise conv1d(xs))       (kernel K, state: last K-1 inputs)
//   [dt_r | B | C] = x_proj(xs);  dt = softplus(dt_proj(dt_r))
//   h_t = exp(dt_t A) h_{t-1} + dt_t B_t xs_t,   A = -exp(A_log)   (state [D, N])
//   y_t = C_t . h_t + D xs_t;  x += out_proj(y * silu(z))
// The recurrence h_t = a_t h_{t-1} + b_t runs as a Hillis-Steele scan over the
// call's S tokens: ceil(log2(max_seq_len)) rounds of (a, b) <- (a a', a b' + b)
// with (a', b') the pair `off` tokens earlier (identity (1, 0) before the
// start), so prefill and decode are one static graph of upstream ops. Each
// layer keeps two mutable buffers instead of a KV cache: the conv inputs
// [K-1, D] and the SSM state [1, D, N]; a call whose first cache_position is 0
// starts from zeros, any other continues from them (docs/decisions.md, "Mamba").
#include "models/mamba.h"

#include <fmt/format.h>

#include "checkpoint/config.h"
#include "models/blocks.h"

namespace hf2pte::models {

namespace {

using graph::IntList;
using graph::OptTensorList;
using graph::TensorType;

ValueId i64_constant(Graph& g, std::vector<int64_t> values, std::vector<int64_t> shape, const std::string& name) {
  return g.add_constant(name, graph::ConstantData::from_bytes(ScalarType::kLong, std::move(shape), to_bytes(values), name));
}

ValueId fill(Graph& g, ScalarType dtype, double value, std::vector<int64_t> shape, const std::string& name) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return g.add_constant(name, graph::ConstantData::from_values(dtype, std::move(shape),
                                                               std::vector<double>(static_cast<size_t>(n), value), name));
}

struct MambaLayer {
  NormWeights norm;
  LinearWeights in_x, in_z, x_dt, x_b, x_c, dt_proj, out_proj;
  std::vector<ValueId> conv_taps;  ///< K vectors [D]: conv1d.weight[:, 0, k]
  std::optional<ValueId> conv_bias;
  ValueId a = -1, d_skip = -1;  ///< A = -exp(A_log) [D, N]; D [D]
};

/// `b32` loads the discretisation's projections (x_proj, dt_proj) in f32 at
/// every model dtype: small matrices ((R + 2N) x D, D x R) whose 16-bit
/// rounding exp(dt A) amplifies (docs/decisions.md, "Half-precision programs").
Result<MambaLayer> load_layer(BlockBuilder& b, BlockBuilder& b32, const MambaConfig& c, int64_t i) {
  const auto p = fmt::format("backbone.layers.{}.", i);
  const int64_t H = c.hidden_size, D = c.intermediate_size, N = c.state_size, R = c.time_step_rank, K = c.conv_kernel;
  MambaLayer w;
  HF2PTE_ASSIGN_OR_RETURN(w.norm, b.norm_weights(p + "norm.weight", H, NormKind::kRms));
  // in_proj rows [x (D) | gate z (D)].
  HF2PTE_ASSIGN_OR_RETURN(auto in, b.split_rows(p + "mixer.in_proj.weight", {2 * D, H}, {D, D}));
  w.in_x.weight = in[0], w.in_z.weight = in[1];
  if (c.use_bias) {
    HF2PTE_ASSIGN_OR_RETURN(auto bias, b.split_rows(p + "mixer.in_proj.bias", {2 * D}, {D, D}));
    w.in_x.bias = bias[0], w.in_z.bias = bias[1];
  }
  for (int64_t k = 0; k < K; ++k) {
    HF2PTE_ASSIGN_OR_RETURN(ValueId tap, b.weight_view(p + "mixer.conv1d.weight", {D, 1, K},
                                                       WeightView{.row_width = K, .cols = {k}, .sizes = {D}},
                                                       fmt::format("tap{}", k)));
    w.conv_taps.push_back(tap);
  }
  if (c.use_conv_bias) {
    HF2PTE_ASSIGN_OR_RETURN(ValueId cb, b.weight(p + "mixer.conv1d.bias", {D}));
    w.conv_bias = cb;
  }
  // x_proj rows [dt_r (R) | B (N) | C (N)].
  HF2PTE_ASSIGN_OR_RETURN(auto xp, b32.split_rows(p + "mixer.x_proj.weight", {R + 2 * N, D}, {R, N, N}));
  w.x_dt.weight = xp[0], w.x_b.weight = xp[1], w.x_c.weight = xp[2];
  HF2PTE_ASSIGN_OR_RETURN(w.dt_proj, b32.linear_weights(p + "mixer.dt_proj", D, R, true));
  // A = -exp(A_log), folded while streaming (HF computes it every call, in
  // f32 at every model dtype: the scan runs in f32).
  HF2PTE_ASSIGN_OR_RETURN(w.a, b.weight_view(p + "mixer.A_log", {D, N},
                                             WeightView{.map = graph::ConstantRecipe::Map::kNegExp,
                                                        .dtype = ScalarType::kFloat},
                                             "neg_exp"));
  HF2PTE_ASSIGN_OR_RETURN(w.d_skip, b.weight(p + "mixer.D", {D}));
  HF2PTE_ASSIGN_OR_RETURN(w.out_proj, b.linear_weights(p + "mixer.out_proj", H, D, c.use_bias));
  return w;
}

/// Values shared by every layer of one call.
struct ScanInputs {
  SymInt S;
  bool stateful = true;             ///< false: --no-kv-cache, every call starts from zeros
  ValueId keep = -1;                ///< bool [1, 1]: cache_position[0] > 0 (continue from the state)
  std::vector<ValueId> shift_rows;  ///< per round: i64 [S], row of cat([identity], x) holding token t - off
  ValueId zero = -1;                ///< f32 0-d (the SSM state)
  ValueId zero_t = -1;              ///< 0-d in the model's dtype (the conv state)
  ValueId one_row = -1, zero_row = -1;  ///< [1, D, N] identity of the scan (a = 1, b = 0)
  ValueId all_state_rows = -1;      ///< i64 [K-1]: 0..K-2 (conv state rows)
  ValueId first_row = -1;           ///< i64 [1]: 0 (the SSM state's one row)
};

/// softplus(v) = log1p(exp(v)), and v itself above 20 (torch's threshold).
Result<ValueId> softplus(BlockBuilder& b, ValueId v, const std::string& name) {
  ValueId twenty = b.scalar(ScalarType::kFloat, 20.0, name + ".threshold");
  HF2PTE_ASSIGN_OR_RETURN(ValueId big, b.op(OpId::GtTensorOut, {v, twenty}, name + ".linear_part"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId e, b.op(OpId::ExpOut, {v}, name + ".exp"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId l, b.op(OpId::Log1pOut, {e}, name + ".log1p"));
  return b.op(OpId::WhereSelfOut, {big, v, l}, name);
}

/// The causal depthwise conv over [state | xs], updating the conv state.
Result<ValueId> causal_conv(BlockBuilder& b, const MambaConfig& c, const MambaLayer& w, const ScanInputs& in,
                            ValueId xs, const std::string& p) {
  Graph& g = b.graph();
  const int64_t D = c.intermediate_size, K = c.conv_kernel;
  const SymInt& S = in.S;
  ValueId prev = -1;
  ValueId state = -1;
  if (in.stateful) {
    state = g.add_buffer(p + ".conv_state", TensorType{b.dtype(), {K - 1, D}, {}});
    HF2PTE_ASSIGN_OR_RETURN(prev, b.op(OpId::WhereSelfOut, {in.keep, state, in.zero_t}, p + ".conv_prev"));
  } else {
    prev = fill(g, b.dtype(), 0.0, {K - 1, D}, p + ".conv_zeros");
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId padded, b.op(OpId::CatOut, {graph::TensorList{prev, xs}, int64_t{0}}, p + ".conv_input"));
  std::optional<ValueId> acc;
  for (int64_t k = 0; k < K; ++k) {
    HF2PTE_ASSIGN_OR_RETURN(ValueId rows, b.op(OpId::SliceCopyTensorOut, {padded, int64_t{0}, SymInt(k), S + SymInt(k)}, fmt::format("{}.conv_rows{}", p, k)));
    HF2PTE_ASSIGN_OR_RETURN(ValueId t, b.op(OpId::MulOut, {rows, w.conv_taps[size_t(k)]}, fmt::format("{}.conv_tap{}", p, k)));
    if (acc) {
      HF2PTE_ASSIGN_OR_RETURN(t, b.op(OpId::AddOut, {*acc, t}, fmt::format("{}.conv_sum{}", p, k)));
    }
    acc = t;
  }
  if (w.conv_bias) {
    HF2PTE_ASSIGN_OR_RETURN(acc, b.op(OpId::AddOut, {*acc, *w.conv_bias}, p + ".conv"));
  }
  if (in.stateful) {  // the last K-1 inputs become the state
    HF2PTE_ASSIGN_OR_RETURN(ValueId last, b.op(OpId::SliceCopyTensorOut, {padded, int64_t{0}, S, S + SymInt(K - 1)}, p + ".conv_last"));
    HF2PTE_RETURN_IF_ERROR(g.add_node(OpId::IndexPut_, {state, OptTensorList{in.all_state_rows}, last}, p + ".conv_state_update").status());
  }
  return *acc;
}

Result<ValueId> mixer(BlockBuilder& b, const MambaConfig& c, const MambaLayer& w, const ScanInputs& in, ValueId h,
                      const std::string& p) {
  Graph& g = b.graph();
  const int64_t D = c.intermediate_size, N = c.state_size;
  const SymInt& S = in.S;
  HF2PTE_ASSIGN_OR_RETURN(ValueId xs, b.linear(h, w.in_x, p + ".in_proj_x"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId z, b.linear(h, w.in_z, p + ".in_proj_z"));
  HF2PTE_ASSIGN_OR_RETURN(xs, causal_conv(b, c, w, in, xs, p));
  HF2PTE_ASSIGN_OR_RETURN(xs, b.activation(xs, "silu", p + ".conv_act"));

  // The discretisation and the selective scan run in f32 at every model dtype
  // (HF's A is f32 and promotes dt, B and x; we also keep x_proj and dt_proj in
  // f32, whose rounding exp(dt A) would amplify); a 16-bit model casts x here
  // and the scan's states back for the readout (HF: ssm_state.to(dtype) @ C).
  const ScalarType act = b.dtype();
  HF2PTE_ASSIGN_OR_RETURN(ValueId xs32, b.cast(xs, ScalarType::kFloat, p + ".x_f32"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId dt, b.linear(xs32, w.x_dt, p + ".x_proj_dt"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId bm, b.linear(xs32, w.x_b, p + ".x_proj_b"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId cm, b.linear(xs32, w.x_c, p + ".x_proj_c"));
  HF2PTE_ASSIGN_OR_RETURN(dt, b.linear(dt, w.dt_proj, p + ".dt_proj"));
  HF2PTE_ASSIGN_OR_RETURN(dt, softplus(b, dt, p + ".dt"));

  // Discretised per token: a = exp(dt A) and b = dt B xs, both [S, D, N].
  HF2PTE_ASSIGN_OR_RETURN(ValueId dt3, b.op(OpId::ViewCopyOut, {dt, IntList{S, D, 1}}, p + ".dt3"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId a, b.op(OpId::MulOut, {dt3, w.a}, p + ".dt_a"));
  HF2PTE_ASSIGN_OR_RETURN(a, b.op(OpId::ExpOut, {a}, p + ".decay"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId xs3, b.op(OpId::ViewCopyOut, {xs32, IntList{S, D, 1}}, p + ".xs3"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId dtx, b.op(OpId::MulOut, {dt3, xs3}, p + ".dt_x"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId b3, b.op(OpId::ViewCopyOut, {bm, IntList{S, 1, N}}, p + ".b3"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId u, b.op(OpId::MulOut, {dtx, b3}, p + ".input"));

  // The scan: after round r, (a_t, u_t) compose the 2^(r+1) steps ending at t.
  for (size_t r = 0; r < in.shift_rows.size(); ++r) {
    const auto q = fmt::format("{}.scan{}", p, r);
    HF2PTE_ASSIGN_OR_RETURN(ValueId a_pad, b.op(OpId::CatOut, {graph::TensorList{in.one_row, a}, int64_t{0}}, q + ".a_padded"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId a_prev, b.op(OpId::IndexSelectOut, {a_pad, int64_t{0}, in.shift_rows[r]}, q + ".a_earlier"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId u_pad, b.op(OpId::CatOut, {graph::TensorList{in.zero_row, u}, int64_t{0}}, q + ".u_padded"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId u_prev, b.op(OpId::IndexSelectOut, {u_pad, int64_t{0}, in.shift_rows[r]}, q + ".u_earlier"));
    HF2PTE_ASSIGN_OR_RETURN(u_prev, b.op(OpId::MulOut, {a, u_prev}, q + ".u_carried"));
    HF2PTE_ASSIGN_OR_RETURN(u, b.op(OpId::AddOut, {u_prev, u}, q + ".u"));
    HF2PTE_ASSIGN_OR_RETURN(a, b.op(OpId::MulOut, {a, a_prev}, q + ".a"));
  }
  // h_t = a_t h_0 + u_t, h_0 the state carried in (zeros on a new sequence).
  ValueId hs = u;
  ValueId state = -1;
  if (in.stateful) {
    state = g.add_buffer(p + ".ssm_state", TensorType{ScalarType::kFloat, {1, D, N}, {}});
    HF2PTE_ASSIGN_OR_RETURN(ValueId h0, b.op(OpId::WhereSelfOut, {in.keep, state, in.zero}, p + ".ssm_prev"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId carried, b.op(OpId::MulOut, {a, h0}, p + ".ssm_carried"));
    HF2PTE_ASSIGN_OR_RETURN(hs, b.op(OpId::AddOut, {carried, u}, p + ".ssm"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId last, b.op(OpId::SliceCopyTensorOut, {hs, int64_t{0}, S - SymInt(1), S}, p + ".ssm_last"));
    HF2PTE_RETURN_IF_ERROR(g.add_node(OpId::IndexPut_, {state, OptTensorList{in.first_row}, last}, p + ".ssm_state_update").status());
  }
  // y_t = h_t C_t: per token a [D, N] x [N, 1] product.
  HF2PTE_ASSIGN_OR_RETURN(ValueId c3, b.op(OpId::ViewCopyOut, {cm, IntList{S, N, 1}}, p + ".c3"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId y, b.op(OpId::BmmOut, {hs, c3}, p + ".readout"));
  HF2PTE_ASSIGN_OR_RETURN(y, b.op(OpId::ViewCopyOut, {y, IntList{S, D}}, p + ".y"));
  HF2PTE_ASSIGN_OR_RETURN(y, b.cast(y, act, p + ".y_cast"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId skip, b.op(OpId::MulOut, {xs, w.d_skip}, p + ".skip"));
  HF2PTE_ASSIGN_OR_RETURN(y, b.op(OpId::AddOut, {y, skip}, p + ".y_skip"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId gate, b.activation(z, "silu", p + ".gate"));
  HF2PTE_ASSIGN_OR_RETURN(y, b.op(OpId::MulOut, {y, gate}, p + ".gated"));
  return b.linear(y, w.out_proj, p + ".out_proj");
}

/// Per round r (off = 2^r): row max(t + 1 - off, 0) of cat([identity], x) is
/// token t - off, or the identity before the start.
Result<std::vector<ValueId>> shift_rows(BlockBuilder& b, const SymInt& S, int64_t max_seq_len) {
  Graph& g = b.graph();
  std::vector<int64_t> all(static_cast<size_t>(max_seq_len));
  for (int64_t t = 0; t < max_seq_len; ++t) all[size_t(t)] = t;
  ValueId table = i64_constant(g, all, {max_seq_len}, "scan.token_table");
  HF2PTE_ASSIGN_OR_RETURN(ValueId t, b.op(OpId::SliceCopyTensorOut, {table, int64_t{0}, SymInt(0), S}, "scan.tokens"));
  ValueId zero = b.scalar(ScalarType::kLong, 0, "scan.zero_row");
  std::vector<ValueId> rows;
  for (int64_t off = 1, r = 0; off < max_seq_len; off *= 2, ++r) {
    const auto q = fmt::format("scan.round{}", r);
    HF2PTE_ASSIGN_OR_RETURN(ValueId v, b.op(OpId::AddScalarOut, {t, int64_t{1 - off}}, q + ".shifted"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId in_range, b.op(OpId::GeTensorOut, {v, zero}, q + ".in_range"));
    HF2PTE_ASSIGN_OR_RETURN(v, b.op(OpId::WhereSelfOut, {in_range, v, zero}, q + ".rows"));
    rows.push_back(v);
  }
  return rows;
}

}  // namespace

Result<BuiltModel> build_mamba(const ArchTraits& arch, Checkpoint& ckpt, const BuildOptions& opt) {
  HF2PTE_ASSIGN_OR_RETURN(MambaConfig c, parse_mamba_config(ckpt.config(), ckpt.config_path()));
  HF2PTE_CHECK_OR_RETURN(c.conv_kernel >= 2, kNotSupported, "config.json: conv_kernel {} is not supported; expected >= 2",
                         c.conv_kernel);
  HF2PTE_CHECK_OR_RETURN(!opt.attend_written_only.value_or(false), kInvalidArgument,
                         "--attention-span written does not apply to mamba: it has no attention");
  HF2PTE_CHECK_OR_RETURN(!opt.custom_sdpa, kInvalidArgument, "--use-custom-sdpa does not apply to mamba: it has no attention");
  BuiltModel out;
  out.model_type = std::string(arch.model_type);
  out.architecture = std::string(arch.architecture);
  const int64_t max_seq_len = opt.max_seq_len.value_or(2048);  // no position limit; the generate default
  HF2PTE_CHECK_OR_RETURN(max_seq_len >= 1, kInvalidArgument, "--max-seq-len must be at least 1; got {}", max_seq_len);
  out.max_seq_len = max_seq_len;
  const int64_t H = c.hidden_size, V = c.vocab_size, D = c.intermediate_size, N = c.state_size, K = c.conv_kernel;

  Graph g("forward");
  BlockBuilder b(g, ckpt, opt.dtype);
  ScanInputs in;
  in.S = g.add_dim("seq", 1, max_seq_len);
  in.stateful = opt.kv_cache;
  ValueId input_ids = g.add_input("input_ids", TensorType{ScalarType::kLong, {1, in.S}, {}});
  if (in.stateful) {
    ValueId cache_position = g.add_input("cache_position", TensorType{ScalarType::kLong, {in.S}, {}});
    HF2PTE_ASSIGN_OR_RETURN(ValueId first, b.op(OpId::SliceCopyTensorOut, {cache_position, int64_t{0}, SymInt(0), SymInt(1)}, "state.first_position"));
    ValueId zero_pos = b.scalar(ScalarType::kLong, 0, "state.zero_position");
    HF2PTE_ASSIGN_OR_RETURN(ValueId keep, b.op(OpId::GtTensorOut, {first, zero_pos}, "state.continues"));
    HF2PTE_ASSIGN_OR_RETURN(in.keep, b.op(OpId::ViewCopyOut, {keep, IntList{1, 1}}, "state.keep"));
    std::vector<int64_t> state_rows(static_cast<size_t>(K - 1));
    for (int64_t k = 0; k < K - 1; ++k) state_rows[size_t(k)] = k;
    in.all_state_rows = i64_constant(g, state_rows, {K - 1}, "state.conv_rows");
    in.first_row = i64_constant(g, {0}, {1}, "state.ssm_row");
  }
  in.zero = b.scalar(ScalarType::kFloat, 0.0, "state.zero");
  in.zero_t = b.scalar(opt.dtype, 0.0, "state.zero_t");
  in.one_row = fill(g, ScalarType::kFloat, 1.0, {1, D, N}, "scan.identity_a");
  in.zero_row = fill(g, ScalarType::kFloat, 0.0, {1, D, N}, "scan.identity_b");
  HF2PTE_ASSIGN_OR_RETURN(in.shift_rows, shift_rows(b, in.S, max_seq_len));

  // The original mamba_ssm checkpoints say "embedding", HF's "embeddings".
  std::string embed_name(arch.names.embed);
  if (!b.has(embed_name) && b.has("backbone.embedding.weight")) embed_name = "backbone.embedding.weight";
  HF2PTE_ASSIGN_OR_RETURN(ValueId embed, b.weight(embed_name, {V, H}));
  HF2PTE_ASSIGN_OR_RETURN(ValueId ids, b.op(OpId::ViewCopyOut, {input_ids, IntList{in.S}}, "ids"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId x, b.op(OpId::EmbeddingOut, {embed, ids}, "embed"));
  const NormOptions no{NormKind::kRms, c.layer_norm_epsilon};
  // residual_in_fp32 (MambaBlock): the residual stream is f32 and each norm
  // reads it cast to the model's dtype; the sum of an f32 residual and a
  // 16-bit mixer output is f32 (type promotion), so the mixer output is cast up.
  const ScalarType stream = c.residual_in_fp32 ? ScalarType::kFloat : opt.dtype;
  BlockBuilder b32(g, ckpt, ScalarType::kFloat);
  HF2PTE_ASSIGN_OR_RETURN(x, b.cast(x, stream, "residual_stream"));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const auto p = fmt::format("layers.{}", i);
    HF2PTE_ASSIGN_OR_RETURN(MambaLayer w, load_layer(b, b32, c, i));
    HF2PTE_ASSIGN_OR_RETURN(ValueId h, b.cast(x, opt.dtype, p + ".norm_in"));
    HF2PTE_ASSIGN_OR_RETURN(h, b.norm(h, w.norm, no, p + ".norm"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId m, mixer(b, c, w, in, h, p + ".mixer"));
    HF2PTE_ASSIGN_OR_RETURN(m, b.cast(m, stream, p + ".mixer_out"));
    HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::AddOut, {x, m}, p + ".residual"));
  }
  SymInt logit_rows = in.S;  // --logits last: one row on (decoder.cpp does the same)
  if (opt.last_logits) {
    HF2PTE_ASSIGN_OR_RETURN(x, b.last_position(x, in.S));
    logit_rows = SymInt(1);
    out.last_logits_only = true;
  }
  HF2PTE_ASSIGN_OR_RETURN(NormWeights final_norm, b.norm_weights(std::string(arch.names.final_norm), H, NormKind::kRms));
  HF2PTE_ASSIGN_OR_RETURN(x, b.cast(x, opt.dtype, "final_norm_in"));
  HF2PTE_ASSIGN_OR_RETURN(x, b.norm(x, final_norm, no, "final_norm"));
  LinearWeights head;
  if (c.tie_word_embeddings && !b.has("lm_head.weight")) {
    head.weight = embed;
  } else {
    HF2PTE_ASSIGN_OR_RETURN(head, b.linear_weights("lm_head", V, H, false));
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId logits, b.linear(x, head, "lm_head"));
  HF2PTE_ASSIGN_OR_RETURN(logits, b.cast(logits, ScalarType::kFloat, "logits_f32"));  // llm-contract.md
  HF2PTE_ASSIGN_OR_RETURN(logits, b.op(OpId::ViewCopyOut, {logits, IntList{1, logit_rows, V}}, "logits"));
  g.set_outputs({logits});
  HF2PTE_RETURN_IF_ERROR(ckpt.check_all_consumed());

  out.program.methods.push_back(std::move(g));
  set_llm_metadata(LlmMetadata{max_seq_len, V, c.num_hidden_layers, c.bos_token_id, c.eos_token_ids}, opt, &out);
  // The cache is a recurrent state: a call must continue exactly where the last
  // one ended (or start at 0); a runner must not rewind into it.
  out.program.constant_methods["use_recurrent_state"] = true;
  out.recurrent_state = true;
  return out;
}

}  // namespace hf2pte::models
