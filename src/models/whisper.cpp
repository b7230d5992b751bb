// Whisper (WhisperForConditionalGeneration) in the method layout of
// optimum-executorch and ExecuTorch's ASR runner:
//   encoder(input_features f32[1, n_mels, frames]) -> encoder_hidden_states [1, frames / 2, d_model]
//   text_decoder(decoder_input_ids i64[1, S], encoder_hidden_states, cache_position i64[S]) -> logits [1, S, V]
// Encoder: conv1 (k 3, pad 1) + GELU, conv2 (k 3, stride 2, pad 1) + GELU,
// + the stored sinusoidal positions, pre-LN layers, final LayerNorm. The
// 1-D convolutions are 2-D ones over a height of 1. Decoder: token + learned
// positions, pre-LN layers of causal self-attention over a static KV cache
// (mutable buffers), cross-attention over the encoder states, MLP; final
// LayerNorm; logits through the tied embedding. k_proj has no bias.
#include "models/whisper.h"

#include <cmath>

#include <fmt/format.h>

#include "checkpoint/checkpoint.h"
#include "checkpoint/json_fields.h"
#include "models/blocks.h"

namespace hf2pte::models {

namespace {

using graph::IntList;
using graph::OptTensorList;
using graph::TensorType;

// WhisperConfig (transformers 4.46.3) defaults for keys a config.json may omit.
struct WhisperConfig {
  int64_t d_model = 384, encoder_layers = 4, decoder_layers = 4, encoder_heads = 6, decoder_heads = 6;
  int64_t encoder_ffn = 1536, decoder_ffn = 1536, num_mel_bins = 80, max_source_positions = 1500;
  int64_t max_target_positions = 448, vocab_size = 51865, decoder_start_token_id = 50257;
  std::string activation = "gelu";
  bool scale_embedding = false, tie = true;
  std::optional<int64_t> bos, eos, pad;
};

Result<WhisperConfig> parse_whisper_config(const nlohmann::json& j, const std::string& where) {
  WhisperConfig c;
  const std::pair<const char*, int64_t*> ints[] = {
      {"d_model", &c.d_model}, {"encoder_layers", &c.encoder_layers}, {"decoder_layers", &c.decoder_layers},
      {"encoder_attention_heads", &c.encoder_heads}, {"decoder_attention_heads", &c.decoder_heads},
      {"encoder_ffn_dim", &c.encoder_ffn}, {"decoder_ffn_dim", &c.decoder_ffn}, {"num_mel_bins", &c.num_mel_bins},
      {"max_source_positions", &c.max_source_positions}, {"max_target_positions", &c.max_target_positions},
      {"vocab_size", &c.vocab_size}, {"decoder_start_token_id", &c.decoder_start_token_id}};
  for (auto [key, field] : ints) {
    HF2PTE_ASSIGN_OR_RETURN(*field, get_int_or(j, key, *field, where));
    HF2PTE_CHECK_OR_RETURN(*field > 0 && *field <= (int64_t(1) << 20), kInvalidInput,
                           "{}: field '{}' out of range; expected 1..{}, got {} ({})", json_label(where), key,
                           int64_t(1) << 20, *field, where);
  }
  HF2PTE_CHECK_OR_RETURN(c.encoder_layers <= 4096 && c.decoder_layers <= 4096, kInvalidInput,
                         "{}: too many layers; expected <= 4096 ({})", json_label(where), where);
  HF2PTE_CHECK_OR_RETURN(c.d_model % c.encoder_heads == 0 && c.d_model % c.decoder_heads == 0, kInvalidInput,
                         "{}: d_model {} must be a multiple of the attention heads ({})", json_label(where), c.d_model, where);
  HF2PTE_CHECK_OR_RETURN(c.decoder_start_token_id < c.vocab_size, kInvalidInput,
                         "{}: decoder_start_token_id {} is outside the vocabulary of {} ({})", json_label(where),
                         c.decoder_start_token_id, c.vocab_size, where);
  HF2PTE_ASSIGN_OR_RETURN(c.activation, get_string_or(j, "activation_function", c.activation, where));
  HF2PTE_ASSIGN_OR_RETURN(c.scale_embedding, get_bool_or(j, "scale_embedding", false, where));
  HF2PTE_ASSIGN_OR_RETURN(c.tie, get_bool_or(j, "tie_word_embeddings", true, where));
  for (auto [key, field] : {std::pair{"bos_token_id", &c.bos}, std::pair{"eos_token_id", &c.eos}, std::pair{"pad_token_id", &c.pad}}) {
    HF2PTE_ASSIGN_OR_RETURN(*field, get_optional_int(j, key, where));
  }
  return c;
}

struct AttentionWeights {
  NormWeights norm;
  LinearWeights q, k, v, o;
};

struct LayerWeights {
  AttentionWeights self, cross;  ///< cross: decoder layers only
  NormWeights ffn_norm;
  LinearWeights fc1, fc2;
};

Result<AttentionWeights> load_attention(BlockBuilder& b, const std::string& p, const std::string& norm, int64_t D) {
  AttentionWeights w;
  HF2PTE_ASSIGN_OR_RETURN(w.norm, b.norm_weights(p + norm + ".weight", D, NormKind::kLayerNorm));
  const std::string a = p + (norm == "self_attn_layer_norm" ? "self_attn" : "encoder_attn");
  HF2PTE_ASSIGN_OR_RETURN(w.q, b.linear_weights(a + ".q_proj", D, D, true));
  HF2PTE_ASSIGN_OR_RETURN(w.k, b.linear_weights(a + ".k_proj", D, D, false));  // Whisper's k_proj has no bias
  HF2PTE_ASSIGN_OR_RETURN(w.v, b.linear_weights(a + ".v_proj", D, D, true));
  HF2PTE_ASSIGN_OR_RETURN(w.o, b.linear_weights(a + ".out_proj", D, D, true));
  return w;
}

Result<LayerWeights> load_layer(BlockBuilder& b, const std::string& p, int64_t D, int64_t ffn, bool cross) {
  LayerWeights w;
  HF2PTE_ASSIGN_OR_RETURN(w.self, load_attention(b, p, "self_attn_layer_norm", D));
  if (cross) {
    HF2PTE_ASSIGN_OR_RETURN(w.cross, load_attention(b, p, "encoder_attn_layer_norm", D));
  }
  HF2PTE_ASSIGN_OR_RETURN(w.ffn_norm, b.norm_weights(p + "final_layer_norm.weight", D, NormKind::kLayerNorm));
  HF2PTE_ASSIGN_OR_RETURN(w.fc1, b.linear_weights(p + "fc1", ffn, D, true));
  HF2PTE_ASSIGN_OR_RETURN(w.fc2, b.linear_weights(p + "fc2", D, ffn, true));
  return w;
}

/// x += fc2(act(fc1(LN(x)))).
Result<ValueId> mlp(BlockBuilder& b, const WhisperConfig& c, const LayerWeights& w, ValueId x, const std::string& p) {
  HF2PTE_ASSIGN_OR_RETURN(ValueId h, b.norm(x, w.ffn_norm, NormOptions{NormKind::kLayerNorm, 1e-5}, p + ".final_layer_norm"));
  HF2PTE_ASSIGN_OR_RETURN(h, b.linear(h, w.fc1, p + ".fc1"));
  HF2PTE_ASSIGN_OR_RETURN(h, b.activation(h, c.activation, p + ".act"));
  HF2PTE_ASSIGN_OR_RETURN(h, b.linear(h, w.fc2, p + ".fc2"));
  return b.op(OpId::AddOut, {x, h}, p + ".mlp_residual");
}

/// The encoder's x += out_proj(attention(LN(x))), every frame seeing every frame.
Result<ValueId> self_attention(BlockBuilder& b, const AttentionWeights& w, int64_t heads, ValueId x, const std::string& p) {
  const int64_t D = b.graph().type(x).sizes[1].constant_value(), hd = D / heads;
  HF2PTE_ASSIGN_OR_RETURN(ValueId h, b.norm(x, w.norm, NormOptions{NormKind::kLayerNorm, 1e-5}, p + ".norm"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId q, b.heads_of(h, w.q, heads, hd, p + ".q"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId k, b.heads_of(h, w.k, heads, hd, p + ".k"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId v, b.heads_of(h, w.v, heads, hd, p + ".v"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId a, b.op(OpId::ScaledDotProductAttention,
                                          {q, k, v, graph::None{}, 0.0, false, 1.0 / std::sqrt(double(hd)), false},
                                          p + ".sdpa"));
  HF2PTE_ASSIGN_OR_RETURN(a, b.merge_heads(a, p));
  HF2PTE_ASSIGN_OR_RETURN(a, b.linear(a, w.o, p + ".out_proj"));
  return b.op(OpId::AddOut, {x, a}, p + ".residual");
}

/// x += out_proj(attention(LN(x), K/V buffers [heads, T, head_dim])), the
/// buffers' rows `rows` first overwritten with the projections of `new_states`.
Result<ValueId> cross_attention(BlockBuilder& b, const AttentionWeights& w, int64_t heads, ValueId x, ValueId new_states,
                                ValueId rows, int64_t T, const std::string& p) {
  Graph& g = b.graph();
  const int64_t D = g.type(x).sizes[1].constant_value(), hd = D / heads;
  HF2PTE_ASSIGN_OR_RETURN(ValueId k, b.heads_of(new_states, w.k, heads, hd, p + ".k"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId v, b.heads_of(new_states, w.v, heads, hd, p + ".v"));
  TensorType type{b.dtype(), {heads, T, hd}, {}};
  ValueId kc = g.add_buffer(p + ".k_cache", type), vc = g.add_buffer(p + ".v_cache", type);
  OptTensorList at{std::nullopt, rows};
  HF2PTE_RETURN_IF_ERROR(g.add_node(OpId::IndexPut_, {kc, at, k}, p + ".k_update").status());
  HF2PTE_RETURN_IF_ERROR(g.add_node(OpId::IndexPut_, {vc, at, v}, p + ".v_update").status());
  HF2PTE_ASSIGN_OR_RETURN(ValueId h, b.norm(x, w.norm, NormOptions{NormKind::kLayerNorm, 1e-5}, p + ".norm"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId q, b.heads_of(h, w.q, heads, hd, p + ".q"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId a, b.op(OpId::ScaledDotProductAttention,
                                          {q, kc, vc, graph::None{}, 0.0, false, 1.0 / std::sqrt(double(hd)), false}, p + ".sdpa"));
  HF2PTE_ASSIGN_OR_RETURN(a, b.merge_heads(a, p));
  HF2PTE_ASSIGN_OR_RETURN(a, b.linear(a, w.o, p + ".out_proj"));
  return b.op(OpId::AddOut, {x, a}, p + ".residual");
}

/// A conv1d (weight [O, C, K], stride, padding K / 2) as a 2-D convolution over height 1, then the activation.
Result<ValueId> conv1d(BlockBuilder& b, const WhisperConfig& c, ValueId x, const std::string& name, int64_t O, int64_t C,
                       int64_t stride, const std::string& label) {
  constexpr int64_t K = 3;
  HF2PTE_ASSIGN_OR_RETURN(ValueId w, b.weight_view(name + ".weight", {O, C, K}, WeightView{.sizes = {O, C, 1, K}}, "as_2d"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId bias, b.weight(name + ".bias", {O}));
  HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::ConvolutionOut, {x, w, bias, IntList{1, stride}, IntList{0, K / 2}, IntList{1, 1}, false,
                                                         IntList{0, 0}, int64_t{1}},
                                  label));
  return b.activation(x, c.activation, label + ".act");
}

Status build_encoder_method(BlockBuilder& b, const WhisperConfig& c) {
  Graph& g = b.graph();
  const int64_t D = c.d_model, T = c.max_source_positions, F = 2 * T, M = c.num_mel_bins;
  ValueId x = g.add_input("input_features", TensorType{ScalarType::kFloat, {1, M, F}, {}});
  HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::ViewCopyOut, {x, IntList{1, M, 1, F}}, "features_2d"));
  // 16-bit programs keep f32 inputs and outputs and cast at the edges.
  HF2PTE_ASSIGN_OR_RETURN(x, b.cast(x, b.dtype(), "features_cast"));
  HF2PTE_ASSIGN_OR_RETURN(x, conv1d(b, c, x, "model.encoder.conv1", D, M, 1, "conv1"));
  HF2PTE_ASSIGN_OR_RETURN(x, conv1d(b, c, x, "model.encoder.conv2", D, D, 2, "conv2"));
  HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::ViewCopyOut, {x, IntList{D, T}}, "frames"));
  HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::PermuteCopyOut, {x, IntList{1, 0}}, "frame_rows"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId pos, b.weight("model.encoder.embed_positions.weight", {T, D}));
  HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::AddOut, {x, pos}, "embed"));
  for (int64_t i = 0; i < c.encoder_layers; ++i) {
    const auto p = fmt::format("layers.{}", i);
    HF2PTE_ASSIGN_OR_RETURN(LayerWeights w, load_layer(b, fmt::format("model.encoder.layers.{}.", i), D, c.encoder_ffn, false));
    HF2PTE_ASSIGN_OR_RETURN(x, self_attention(b, w.self, c.encoder_heads, x, p + ".self_attn"));
    HF2PTE_ASSIGN_OR_RETURN(x, mlp(b, c, w, x, p));
  }
  HF2PTE_ASSIGN_OR_RETURN(NormWeights ln, b.norm_weights("model.encoder.layer_norm.weight", D, NormKind::kLayerNorm));
  HF2PTE_ASSIGN_OR_RETURN(x, b.norm(x, ln, NormOptions{NormKind::kLayerNorm, 1e-5}, "encoder_norm"));
  HF2PTE_ASSIGN_OR_RETURN(x, b.cast(x, ScalarType::kFloat, "encoder_states_f32"));
  HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::ViewCopyOut, {x, IntList{1, T, D}}, "encoder_hidden_states"));
  g.set_outputs({x});
  return Status::ok();
}

Status build_decoder_method(BlockBuilder& b, const WhisperConfig& c, int64_t max_len) {
  Graph& g = b.graph();
  const int64_t D = c.d_model, T = c.max_source_positions, V = c.vocab_size, heads = c.decoder_heads, hd = D / heads;
  const SymInt S = g.add_dim("seq", 1, max_len);
  ValueId ids = g.add_input("decoder_input_ids", TensorType{ScalarType::kLong, {1, S}, {}});
  ValueId enc = g.add_input("encoder_hidden_states", TensorType{ScalarType::kFloat, {1, T, D}, {}});
  ValueId pos = g.add_input("cache_position", TensorType{ScalarType::kLong, {S}, {}});
  HF2PTE_ASSIGN_OR_RETURN(ValueId embed, b.weight("model.decoder.embed_tokens.weight", {V, D}));
  HF2PTE_ASSIGN_OR_RETURN(ValueId flat, b.op(OpId::ViewCopyOut, {ids, IntList{S}}, "ids"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId x, b.op(OpId::EmbeddingOut, {embed, flat}, "embed"));
  if (c.scale_embedding) {
    HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::MulScalarOut, {x, std::sqrt(double(D))}, "embed_scaled"));
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId table, b.weight("model.decoder.embed_positions.weight", {c.max_target_positions, D}));
  HF2PTE_ASSIGN_OR_RETURN(ValueId p_rows, b.op(OpId::IndexSelectOut, {table, int64_t{0}, pos}, "positions"));
  HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::AddOut, {x, p_rows}, "embed_with_pos"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId states, b.op(OpId::ViewCopyOut, {enc, IntList{T, D}}, "encoder_states"));
  HF2PTE_ASSIGN_OR_RETURN(states, b.cast(states, b.dtype(), "encoder_states_cast"));
  // Cross-attention K/V once per utterance: the call whose first cache_position
  // is 0 projects all T encoder rows into per-layer buffers; later calls select
  // zero rows (a data-dependent count from nonzero), so their projections do
  // no work and the buffers keep the utterance's K/V.
  HF2PTE_ASSIGN_OR_RETURN(ValueId first, b.op(OpId::SliceCopyTensorOut, {pos, int64_t{0}, SymInt(0), SymInt(1)}, "cross.first_position"));
  ValueId zero_pos = b.scalar(ScalarType::kLong, 0, "cross.zero");
  HF2PTE_ASSIGN_OR_RETURN(ValueId starts, b.op(OpId::EqTensorOut, {first, zero_pos}, "cross.new_utterance"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId wanted, b.op(OpId::ExpandCopyOut, {starts, IntList{T}}, "cross.rows_wanted"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId nz, b.op(OpId::NonzeroOut, {wanted}, "cross.rows"));
  const SymInt n_rows = g.type(nz).sizes[0];
  HF2PTE_ASSIGN_OR_RETURN(ValueId rows, b.op(OpId::ViewCopyOut, {nz, IntList{n_rows}}, "cross.row_ids"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId new_states, b.op(OpId::IndexSelectOut, {states, int64_t{0}, rows}, "cross.new_states"));
  // Causal mask over the cache: key j visible to query i iff j <= pos_i.
  std::vector<int64_t> keys(static_cast<size_t>(max_len));
  for (int64_t j = 0; j < max_len; ++j) keys[size_t(j)] = j;
  ValueId key_pos = g.add_constant("mask.key_positions", graph::ConstantData::from_bytes(ScalarType::kLong, {1, max_len},
                                                                                        to_bytes(keys), "arange(max_seq_len)"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId qpos, b.op(OpId::ViewCopyOut, {pos, IntList{S, 1}}, "mask.query_positions"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId mask, b.op(OpId::LeTensorOut, {key_pos, qpos}, "mask"));
  for (int64_t i = 0; i < c.decoder_layers; ++i) {
    const auto p = fmt::format("layers.{}", i);
    HF2PTE_ASSIGN_OR_RETURN(LayerWeights w, load_layer(b, fmt::format("model.decoder.layers.{}.", i), D, c.decoder_ffn, true));
    // Self-attention over the static cache [heads, max_len, head_dim], rows at cache_position overwritten.
    const NormOptions ln{NormKind::kLayerNorm, 1e-5};
    HF2PTE_ASSIGN_OR_RETURN(ValueId h, b.norm(x, w.self.norm, ln, p + ".self_attn.norm"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId q, b.heads_of(h, w.self.q, heads, hd, p + ".self_attn.q"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId k, b.heads_of(h, w.self.k, heads, hd, p + ".self_attn.k"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId v, b.heads_of(h, w.self.v, heads, hd, p + ".self_attn.v"));
    TensorType cache_type{b.dtype(), {heads, max_len, hd}, {}};
    ValueId kc = g.add_buffer(p + ".self_attn.k_cache", cache_type);
    ValueId vc = g.add_buffer(p + ".self_attn.v_cache", cache_type);
    OptTensorList at{std::nullopt, pos};
    HF2PTE_RETURN_IF_ERROR(g.add_node(OpId::IndexPut_, {kc, at, k}, p + ".self_attn.k_update").status());
    HF2PTE_RETURN_IF_ERROR(g.add_node(OpId::IndexPut_, {vc, at, v}, p + ".self_attn.v_update").status());
    HF2PTE_ASSIGN_OR_RETURN(ValueId a, b.op(OpId::ScaledDotProductAttention,
                                            {q, kc, vc, mask, 0.0, false, 1.0 / std::sqrt(double(hd)), false},
                                            p + ".self_attn.sdpa"));
    HF2PTE_ASSIGN_OR_RETURN(a, b.merge_heads(a, p + ".self_attn"));
    HF2PTE_ASSIGN_OR_RETURN(a, b.linear(a, w.self.o, p + ".self_attn.out_proj"));
    HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::AddOut, {x, a}, p + ".self_attn.residual"));
    HF2PTE_ASSIGN_OR_RETURN(x, cross_attention(b, w.cross, heads, x, new_states, rows, T, p + ".encoder_attn"));
    HF2PTE_ASSIGN_OR_RETURN(x, mlp(b, c, w, x, p));
  }
  HF2PTE_ASSIGN_OR_RETURN(NormWeights ln, b.norm_weights("model.decoder.layer_norm.weight", D, NormKind::kLayerNorm));
  HF2PTE_ASSIGN_OR_RETURN(x, b.norm(x, ln, NormOptions{NormKind::kLayerNorm, 1e-5}, "decoder_norm"));
  LinearWeights head{embed, std::nullopt};  // proj_out is tied to the token embedding
  if (!c.tie) {
    HF2PTE_ASSIGN_OR_RETURN(head, b.linear_weights("proj_out", V, D, false));
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId logits, b.linear(x, head, "proj_out"));
  HF2PTE_ASSIGN_OR_RETURN(logits, b.cast(logits, ScalarType::kFloat, "logits_f32"));
  HF2PTE_ASSIGN_OR_RETURN(logits, b.op(OpId::ViewCopyOut, {logits, IntList{1, S, V}}, "logits"));
  g.set_outputs({logits});
  return Status::ok();
}

}  // namespace

bool is_whisper_checkpoint(const Checkpoint& ckpt) {
  const auto& cfg = ckpt.config();
  auto it = cfg.find("model_type");
  return it != cfg.end() && it->is_string() && it->get<std::string>() == "whisper";
}

Result<BuiltModel> build_whisper(Checkpoint& ckpt, const BuildOptions& opt) {
  const std::string where = ckpt.config_path();
  HF2PTE_ASSIGN_OR_RETURN(WhisperConfig c, parse_whisper_config(ckpt.config(), where));
  HF2PTE_CHECK_OR_RETURN(c.activation == "gelu", kNotSupported,
                         "{}: activation_function '{}' is not supported for whisper; expected gelu ({})", json_label(where),
                         c.activation, where);
  HF2PTE_CHECK_OR_RETURN(opt.kv_cache && !opt.attend_written_only.value_or(false), kNotSupported,
                         "whisper programs have a static KV cache; --no-kv-cache and --attention-span written do not apply");
  const int64_t max_len = opt.max_seq_len.value_or(c.max_target_positions);
  HF2PTE_CHECK_OR_RETURN(max_len >= 1 && max_len <= c.max_target_positions, kInvalidArgument,
                         "--max-seq-len {} is outside the learned decoder positions; expected 1..{}", max_len,
                         c.max_target_positions);
  BuiltModel out;
  out.model_type = "whisper";
  out.architecture = "WhisperForConditionalGeneration";
  out.max_seq_len = max_len;
  Graph enc("encoder"), dec("text_decoder");
  BlockBuilder be(enc, ckpt, opt.dtype), bd(dec, ckpt, opt.dtype);
  HF2PTE_RETURN_IF_ERROR(build_encoder_method(be, c));
  HF2PTE_RETURN_IF_ERROR(build_decoder_method(bd, c, max_len));
  HF2PTE_RETURN_IF_ERROR(ckpt.check_all_consumed());
  out.program.methods.push_back(std::move(enc));
  out.program.methods.push_back(std::move(dec));
  set_llm_metadata(LlmMetadata{max_len, c.vocab_size, c.decoder_layers, c.bos, c.eos ? std::vector<int64_t>{*c.eos}
                                                                                      : std::vector<int64_t>{}},
                   opt, &out);
  auto& m = out.program.constant_methods;
  m["is_encoder_decoder"] = true;
  m["decoder_start_token_id"] = c.decoder_start_token_id;
  m["get_num_mel_bins"] = c.num_mel_bins;
  m["get_n_frames"] = 2 * c.max_source_positions;
  m["get_encoder_seq_len"] = c.max_source_positions;
  // The feature extractor's and the generation settings, so `transcribe` needs only the .pte.
  for (auto [file, method] : {std::pair{"preprocessor_config.json", "get_preprocessor_config"},
                              std::pair{"generation_config.json", "get_generation_config"}}) {
    if (auto j = read_json_object_file(ckpt.dir() + "/" + file); j.is_ok()) m[method] = j->dump();
  }
  return out;
}

}  // namespace hf2pte::models
