// The shared post-LayerNorm encoder (BERT, RoBERTa, XLM-R, DistilBERT):
// embeddings (word + token type 0 + absolute position) -> LayerNorm, N layers of
// x = LN(x + attn(x)), x = LN(x + down(act(up(x)))) with padded keys masked by an
// additive (1 - mask) * finfo(float32).min, then optionally the MLM head
// dense -> act -> LN -> tied decoder. Families differ only by their row below.
#include "models/encoder.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "checkpoint/config.h"
#include "models/blocks.h"

namespace hf2pte::models {

namespace {

using graph::IntList;
using graph::TensorType;

constexpr EncoderNames kBertNames{
    .word_embed = "bert.embeddings.word_embeddings.weight",
    .pos_embed = "bert.embeddings.position_embeddings.weight",
    .type_embed = "bert.embeddings.token_type_embeddings.weight",
    .embed_norm = "bert.embeddings.LayerNorm.weight",
    .q = "bert.encoder.layer.{}.attention.self.query",
    .k = "bert.encoder.layer.{}.attention.self.key",
    .v = "bert.encoder.layer.{}.attention.self.value",
    .o = "bert.encoder.layer.{}.attention.output.dense",
    .attn_norm = "bert.encoder.layer.{}.attention.output.LayerNorm.weight",
    .up = "bert.encoder.layer.{}.intermediate.dense",
    .down = "bert.encoder.layer.{}.output.dense",
    .ffn_norm = "bert.encoder.layer.{}.output.LayerNorm.weight",
    .head_dense = "cls.predictions.transform.dense",
    .head_norm = "cls.predictions.transform.LayerNorm.weight",
    .head_decoder = "cls.predictions.decoder",
    .head_bias = "cls.predictions.bias",
    .head_bias_alias = "cls.predictions.decoder.bias",
};

constexpr EncoderNames kRobertaNames{
    .word_embed = "roberta.embeddings.word_embeddings.weight",
    .pos_embed = "roberta.embeddings.position_embeddings.weight",
    .type_embed = "roberta.embeddings.token_type_embeddings.weight",
    .embed_norm = "roberta.embeddings.LayerNorm.weight",
    .q = "roberta.encoder.layer.{}.attention.self.query",
    .k = "roberta.encoder.layer.{}.attention.self.key",
    .v = "roberta.encoder.layer.{}.attention.self.value",
    .o = "roberta.encoder.layer.{}.attention.output.dense",
    .attn_norm = "roberta.encoder.layer.{}.attention.output.LayerNorm.weight",
    .up = "roberta.encoder.layer.{}.intermediate.dense",
    .down = "roberta.encoder.layer.{}.output.dense",
    .ffn_norm = "roberta.encoder.layer.{}.output.LayerNorm.weight",
    .head_dense = "lm_head.dense",
    .head_norm = "lm_head.layer_norm.weight",
    .head_decoder = "lm_head.decoder",
    .head_bias = "lm_head.bias",
    .head_bias_alias = "lm_head.decoder.bias",
};

constexpr EncoderNames kDistilBertNames{
    .word_embed = "distilbert.embeddings.word_embeddings.weight",
    .pos_embed = "distilbert.embeddings.position_embeddings.weight",
    .type_embed = "",
    .embed_norm = "distilbert.embeddings.LayerNorm.weight",
    .q = "distilbert.transformer.layer.{}.attention.q_lin",
    .k = "distilbert.transformer.layer.{}.attention.k_lin",
    .v = "distilbert.transformer.layer.{}.attention.v_lin",
    .o = "distilbert.transformer.layer.{}.attention.out_lin",
    .attn_norm = "distilbert.transformer.layer.{}.sa_layer_norm.weight",
    .up = "distilbert.transformer.layer.{}.ffn.lin1",
    .down = "distilbert.transformer.layer.{}.ffn.lin2",
    .ffn_norm = "distilbert.transformer.layer.{}.output_layer_norm.weight",
    .head_dense = "vocab_transform",
    .head_norm = "vocab_layer_norm.weight",
    .head_decoder = "vocab_projector",
    .head_bias = "vocab_projector.bias",
    .head_bias_alias = "",
};

constexpr std::array kEncoders = {
    EncoderTraits{"bert", "BertModel", "BertForMaskedLM", "bert.", kBertNames, PositionIds::kArange, ""},
    EncoderTraits{"roberta", "RobertaModel", "RobertaForMaskedLM", "roberta.", kRobertaNames,
                  PositionIds::kAfterPadding, "gelu"},
    EncoderTraits{"xlm-roberta", "XLMRobertaModel", "XLMRobertaForMaskedLM", "roberta.", kRobertaNames,
                  PositionIds::kAfterPadding, "gelu"},
    EncoderTraits{"distilbert", "DistilBertModel", "DistilBertForMaskedLM", "distilbert.", kDistilBertNames,
                  PositionIds::kArange, ""},
};

// Tensors a checkpoint of these families may carry that no output uses: the
// pooler (BertModel's pooler_output), BertForPreTraining's next-sentence head,
// and the position_ids / token_type_ids buffers older versions saved. Matched
// after the optional prefix is stripped.
constexpr std::string_view kIgnorable[] = {"pooler.", "cls.seq_relationship.", "embeddings.position_ids",
                                           "embeddings.token_type_ids"};

struct LayerWeights {
  LinearWeights q, k, v, o, up, down;
  NormWeights attn_norm, ffn_norm;
};

Result<LayerWeights> load_layer(BlockBuilder& b, const EncoderNames& n, const EncoderConfig& c, int64_t i) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  LayerWeights w;
  HF2PTE_ASSIGN_OR_RETURN(w.q, b.linear_weights(layer_name(n.q, i), H, H, true));
  HF2PTE_ASSIGN_OR_RETURN(w.k, b.linear_weights(layer_name(n.k, i), H, H, true));
  HF2PTE_ASSIGN_OR_RETURN(w.v, b.linear_weights(layer_name(n.v, i), H, H, true));
  HF2PTE_ASSIGN_OR_RETURN(w.o, b.linear_weights(layer_name(n.o, i), H, H, true));
  HF2PTE_ASSIGN_OR_RETURN(w.attn_norm, b.norm_weights(layer_name(n.attn_norm, i), H, NormKind::kLayerNorm));
  HF2PTE_ASSIGN_OR_RETURN(w.up, b.linear_weights(layer_name(n.up, i), I, H, true));
  HF2PTE_ASSIGN_OR_RETURN(w.down, b.linear_weights(layer_name(n.down, i), H, I, true));
  HF2PTE_ASSIGN_OR_RETURN(w.ffn_norm, b.norm_weights(layer_name(n.ffn_norm, i), H, NormKind::kLayerNorm));
  return w;
}

// x = LN(x + o(attn(x))); x = LN(x + down(act(up(x)))) on x [S, hidden].
Result<ValueId> encoder_layer(BlockBuilder& b, const EncoderConfig& c, const LayerWeights& w, const SymInt& S,
                              ValueId mask, ValueId x, int64_t i) {
  const auto p = fmt::format("layers.{}", i);
  const int64_t nh = c.num_attention_heads, hd = c.hidden_size / c.num_attention_heads;
  const NormOptions ln{NormKind::kLayerNorm, c.layer_norm_eps};
  HF2PTE_ASSIGN_OR_RETURN(ValueId q, b.heads_of(x, w.q, nh, hd, p + ".attn.q"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId k, b.heads_of(x, w.k, nh, hd, p + ".attn.k"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId v, b.heads_of(x, w.v, nh, hd, p + ".attn.v"));
  const double scale = 1.0 / std::sqrt(double(hd));
  HF2PTE_ASSIGN_OR_RETURN(ValueId a, b.op(OpId::ScaledDotProductAttention, {q, k, v, mask, 0.0, false, scale, false},
                                          p + ".attn.sdpa"));
  HF2PTE_ASSIGN_OR_RETURN(a, b.merge_heads(a, p + ".attn"));
  HF2PTE_ASSIGN_OR_RETURN(a, b.linear(a, w.o, p + ".attn.o_proj"));
  HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::AddOut, {x, a}, p + ".attn_residual"));
  HF2PTE_ASSIGN_OR_RETURN(x, b.norm(x, w.attn_norm, ln, p + ".attn_norm"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId m, b.linear(x, w.up, p + ".mlp.up_proj"));
  HF2PTE_ASSIGN_OR_RETURN(m, b.activation(m, c.hidden_act, p + ".mlp.act"));
  HF2PTE_ASSIGN_OR_RETURN(m, b.linear(m, w.down, p + ".mlp.down_proj"));
  HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::AddOut, {x, m}, p + ".mlp_residual"));
  return b.norm(x, w.ffn_norm, ln, p + ".ffn_norm");
}

/// The most negative finite value of a float dtype (torch.finfo(dtype).min).
double finfo_min(ScalarType t) {
  switch (t) {
    case ScalarType::kHalf: return -65504.0;
    case ScalarType::kBFloat16: return -3.3895313892515355e38;  // (2 - 2^-7) * 2^127
    default: return -double(std::numeric_limits<float>::max());
  }
}

/// Additive attention mask [1, S] in the model's dtype: 0 where attention_mask
/// is 1, finfo(dtype).min where it is 0 (HF's (1 - mask) * min; any value <= 0
/// counts as padding).
Result<ValueId> additive_mask(BlockBuilder& b, ValueId attention_mask) {
  ValueId zero_i = b.scalar(ScalarType::kLong, 0, "mask.zero");
  HF2PTE_ASSIGN_OR_RETURN(ValueId padded, b.op(OpId::LeTensorOut, {attention_mask, zero_i}, "mask.padded"));
  ValueId lowest = b.scalar(b.dtype(), finfo_min(b.dtype()), "mask.finfo_min");
  ValueId zero_f = b.scalar(b.dtype(), 0.0, "mask.zero_f");
  return b.op(OpId::WhereSelfOut, {padded, lowest, zero_f}, "mask");
}

/// RoBERTa's position embeddings [S, hidden] for ids [S] (HF
/// create_position_ids_from_input_ids): with r_j = [id_j != padding_idx],
/// pos_i = padding_idx + r_i * sum_{j <= i} r_j. No kernel here casts float to
/// int, so the cumulative sum is a lower-triangular matmul and the lookup a
/// one-hot matmul; both are exact in float32 (integers < 2^24, one non-zero term per row).
/// The count stays f32 at every model dtype (bf16 holds integers exactly only to
/// 256); the one-hot rows are built in the table's dtype, where 0 and 1 are exact.
Result<ValueId> positions_after_padding(BlockBuilder& b, ValueId ids, ValueId table, const SymInt& S,
                                        int64_t max_seq_len, int64_t rows, int64_t pad) {
  Graph& g = b.graph();
  ValueId pad_id = b.scalar(ScalarType::kLong, double(pad), "pos.padding_idx");
  ValueId no = b.scalar(ScalarType::kBool, 0, "pos.false");
  ValueId one = b.scalar(ScalarType::kFloat, 1.0, "pos.one");
  ValueId zero = b.scalar(ScalarType::kFloat, 0.0, "pos.zero");
  HF2PTE_ASSIGN_OR_RETURN(ValueId le, b.op(OpId::LeTensorOut, {ids, pad_id}, "pos.id_le_pad"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId ge, b.op(OpId::LeTensorOut, {pad_id, ids}, "pos.id_ge_pad"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId is_pad, b.op(OpId::WhereSelfOut, {le, ge, no}, "pos.is_pad"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId real, b.op(OpId::WhereSelfOut, {is_pad, zero, one}, "pos.real"));
  HF2PTE_ASSIGN_OR_RETURN(real, b.op(OpId::ViewCopyOut, {real, IntList{S, 1}}, "pos.real_col"));

  std::vector<int64_t> idx(static_cast<size_t>(max_seq_len));
  for (int64_t j = 0; j < max_seq_len; ++j) idx[size_t(j)] = j;
  ValueId arange = g.add_constant("pos.arange", graph::ConstantData::from_bytes(ScalarType::kLong, {max_seq_len},
                                                                                 to_bytes(idx), "arange(max_seq_len)"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId ar, b.op(OpId::SliceCopyTensorOut, {arange, int64_t{0}, SymInt(0), S}, "pos.arange_s"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId col, b.op(OpId::ViewCopyOut, {ar, IntList{S, 1}}, "pos.i"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId row, b.op(OpId::ViewCopyOut, {ar, IntList{1, S}}, "pos.j"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId tri, b.op(OpId::LeTensorOut, {row, col}, "pos.j_le_i"));
  HF2PTE_ASSIGN_OR_RETURN(tri, b.op(OpId::WhereSelfOut, {tri, one, zero}, "pos.lower_triangle"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId count, b.op(OpId::MmOut, {tri, real}, "pos.cumsum"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId pos, b.op(OpId::MulOut, {count, real}, "pos.count_if_real"));
  HF2PTE_ASSIGN_OR_RETURN(pos, b.op(OpId::AddScalarOut, {pos, double(pad)}, "pos.ids"));

  std::vector<float> cols(static_cast<size_t>(rows));
  for (int64_t j = 0; j < rows; ++j) cols[size_t(j)] = float(j);
  ValueId table_rows = g.add_constant("pos.table_rows", graph::ConstantData::from_bytes(ScalarType::kFloat, {1, rows},
                                                                                         to_bytes(cols), "arange(positions)"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId a, b.op(OpId::LeTensorOut, {table_rows, pos}, "pos.row_le_id"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId c, b.op(OpId::LeTensorOut, {pos, table_rows}, "pos.id_le_row"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId hit, b.op(OpId::WhereSelfOut, {a, c, no}, "pos.hit"));
  ValueId one_t = b.scalar(g.type(table).dtype, 1.0, "pos.one_t");
  ValueId zero_t = b.scalar(g.type(table).dtype, 0.0, "pos.zero_t");
  HF2PTE_ASSIGN_OR_RETURN(ValueId onehot, b.op(OpId::WhereSelfOut, {hit, one_t, zero_t}, "pos.one_hot"));
  return b.op(OpId::MmOut, {onehot, table}, "pos_embed");
}

/// Whether the program gets the MLM head: required when config.json's
/// architectures names the *ForMaskedLM class (or BertForPreTraining), else
/// present when its first tensor is.
bool wants_head(const EncoderTraits& t, const EncoderConfig& c, const Checkpoint& ckpt) {
  for (const auto& a : c.architectures) {
    if (a == t.mlm_class || a == "BertForPreTraining") return true;
  }
  return ckpt.has(std::string(t.names.head_dense) + ".weight");
}

}  // namespace

std::span<const EncoderTraits> all_encoder_architectures() { return kEncoders; }

const EncoderTraits* find_encoder_architecture(std::string_view model_type) {
  for (const auto& e : kEncoders) {
    if (e.model_type == model_type) return &e;
  }
  return nullptr;
}

bool is_encoder_checkpoint(const Checkpoint& ckpt) {
  const auto& cfg = ckpt.config();
  auto it = cfg.find("model_type");
  return it != cfg.end() && it->is_string() && find_encoder_architecture(it->get<std::string>()) != nullptr;
}

Result<BuiltModel> build_encoder(Checkpoint& ckpt, const BuildOptions& opt) {
  const std::string where = ckpt.config_path();
  HF2PTE_ASSIGN_OR_RETURN(EncoderConfig c, parse_encoder_config(ckpt.config(), where));
  const EncoderTraits* t = find_encoder_architecture(c.model_type);
  HF2PTE_CHECK_OR_RETURN(t != nullptr, kNotSupported, "unsupported encoder model_type '{}' ({})", c.model_type, where);
  const EncoderNames& n = t->names;
  const int64_t H = c.hidden_size, V = c.vocab_size, P = c.max_position_embeddings;

  // Positions run 0..S-1, or (RoBERTa) up to padding_idx + S: the table bounds S.
  int64_t first_position = 0;
  if (t->positions == PositionIds::kAfterPadding) {
    HF2PTE_CHECK_OR_RETURN(c.pad_token_id && *c.pad_token_id >= 0 && *c.pad_token_id < P - 1, kInvalidInput,
                           "config.json: {} needs pad_token_id in [0, {}) (position ids start after it); got {} ({})",
                           c.model_type, P - 1, c.pad_token_id ? std::to_string(*c.pad_token_id) : "null", where);
    first_position = *c.pad_token_id + 1;
  }
  const int64_t limit = P - first_position;
  const int64_t max_seq_len = opt.max_seq_len.value_or(limit);
  HF2PTE_CHECK_OR_RETURN(max_seq_len >= 1 && max_seq_len <= limit, kInvalidArgument,
                         "--max-seq-len {} is outside what the position embeddings cover; expected 1..{}", max_seq_len,
                         limit);

  BuiltModel out;
  out.model_type = c.model_type;
  out.max_seq_len = max_seq_len;
  const bool head = wants_head(*t, c, ckpt);
  out.architecture = std::string(head ? t->mlm_class : t->base_class);

  Graph g("forward");
  BlockBuilder b(g, ckpt, opt.dtype, WeightLayout{false, t->prefix});
  const SymInt S = g.add_dim("seq", 1, max_seq_len);
  ValueId input_ids = g.add_input("input_ids", TensorType{ScalarType::kLong, {1, S}, {}});
  ValueId attention_mask = g.add_input("attention_mask", TensorType{ScalarType::kLong, {1, S}, {}});

  // Embeddings: word + token type 0 + position, then LayerNorm.
  HF2PTE_ASSIGN_OR_RETURN(ValueId word, b.weight(std::string(n.word_embed), {V, H}));
  HF2PTE_ASSIGN_OR_RETURN(ValueId ids, b.op(OpId::ViewCopyOut, {input_ids, IntList{S}}, "ids"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId x, b.op(OpId::EmbeddingOut, {word, ids}, "embed"));
  if (!n.type_embed.empty()) {
    HF2PTE_ASSIGN_OR_RETURN(ValueId types, b.weight(std::string(n.type_embed), {c.type_vocab_size, H}));
    HF2PTE_ASSIGN_OR_RETURN(ValueId type0, b.op(OpId::SliceCopyTensorOut, {types, int64_t{0}, SymInt(0), SymInt(1)}, "token_type_0"));
    HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::AddOut, {x, type0}, "embed_with_type"));
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId table, b.weight(std::string(n.pos_embed), {P, H}));
  ValueId pos;
  if (t->positions == PositionIds::kAfterPadding) {
    HF2PTE_ASSIGN_OR_RETURN(pos, positions_after_padding(b, ids, table, S, max_seq_len, P, *c.pad_token_id));
  } else {
    HF2PTE_ASSIGN_OR_RETURN(pos, b.op(OpId::SliceCopyTensorOut, {table, int64_t{0}, SymInt(0), S}, "pos_rows"));
    // The slice's size is min(S, rows) symbolically; S <= rows, so it is [S, hidden].
    HF2PTE_ASSIGN_OR_RETURN(pos, b.op(OpId::ViewCopyOut, {pos, IntList{S, H}}, "pos_embed"));
  }
  HF2PTE_ASSIGN_OR_RETURN(x, b.op(OpId::AddOut, {x, pos}, "embed_with_pos"));
  const NormOptions ln{NormKind::kLayerNorm, c.layer_norm_eps};
  HF2PTE_ASSIGN_OR_RETURN(NormWeights embed_norm, b.norm_weights(std::string(n.embed_norm), H, NormKind::kLayerNorm));
  HF2PTE_ASSIGN_OR_RETURN(x, b.norm(x, embed_norm, ln, "embed_norm"));

  HF2PTE_ASSIGN_OR_RETURN(ValueId mask, additive_mask(b, attention_mask));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    HF2PTE_ASSIGN_OR_RETURN(LayerWeights w, load_layer(b, n, c, i));
    HF2PTE_ASSIGN_OR_RETURN(x, encoder_layer(b, c, w, S, mask, x, i));
  }
  HF2PTE_ASSIGN_OR_RETURN(ValueId hidden_x, b.cast(x, ScalarType::kFloat, "last_hidden_state_f32"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId hidden, b.op(OpId::ViewCopyOut, {hidden_x, IntList{1, S, H}}, "last_hidden_state"));

  std::vector<ValueId> outputs;
  if (head) {
    HF2PTE_ASSIGN_OR_RETURN(LinearWeights dense, b.linear_weights(std::string(n.head_dense), H, H, true));
    HF2PTE_ASSIGN_OR_RETURN(NormWeights norm, b.norm_weights(std::string(n.head_norm), H, NormKind::kLayerNorm));
    LinearWeights decoder;
    const std::string decoder_weight = std::string(n.head_decoder) + ".weight";
    if (c.tie_word_embeddings) {
      decoder.weight = word;  // HF ties the decoder to the word embeddings, overwriting any stored copy
      ckpt.mark_ignored(decoder_weight);
    } else {
      HF2PTE_ASSIGN_OR_RETURN(decoder.weight, b.weight(decoder_weight, {V, H}));
    }
    HF2PTE_ASSIGN_OR_RETURN(ValueId bias, b.weight(std::string(n.head_bias), {V}));
    decoder.bias = bias;
    if (!n.head_bias_alias.empty()) ckpt.mark_ignored(n.head_bias_alias);  // the same parameter, saved twice
    HF2PTE_ASSIGN_OR_RETURN(ValueId h, b.linear(x, dense, "head.dense"));
    HF2PTE_ASSIGN_OR_RETURN(h, b.activation(h, t->head_act.empty() ? std::string_view(c.hidden_act) : t->head_act, "head.act"));
    HF2PTE_ASSIGN_OR_RETURN(h, b.norm(h, norm, ln, "head.norm"));
    HF2PTE_ASSIGN_OR_RETURN(h, b.linear(h, decoder, "head.decoder"));
    HF2PTE_ASSIGN_OR_RETURN(h, b.cast(h, ScalarType::kFloat, "logits_f32"));
    HF2PTE_ASSIGN_OR_RETURN(ValueId logits, b.op(OpId::ViewCopyOut, {h, IntList{1, S, V}}, "logits"));
    outputs.push_back(logits);
  }
  outputs.push_back(hidden);
  g.set_outputs(outputs);

  const std::string_view prefix = t->prefix;
  size_t ignored = ckpt.mark_ignored_if([&](std::string_view name) {
    if (name.starts_with(prefix)) name.remove_prefix(prefix.size());
    for (auto p : kIgnorable) {
      if (name.starts_with(p)) return true;
    }
    return false;
  });
  if (ignored > 0) {
    out.warnings.push_back(fmt::format("ignored {} checkpoint tensors no output uses (pooler, next-sentence head, "
                                       "position/token-type id buffers)",
                                       ignored));
  }
  HF2PTE_RETURN_IF_ERROR(ckpt.check_all_consumed());

  out.program.methods.push_back(std::move(g));
  auto& m = out.program.constant_methods;
  m["is_encoder"] = true;
  m["get_output_names"] = std::string(head ? "logits,last_hidden_state" : "last_hidden_state");
  m["get_max_seq_len"] = max_seq_len;
  m["get_vocab_size"] = V;
  m["get_hidden_size"] = H;
  m["get_n_layers"] = c.num_hidden_layers;
  if (c.pad_token_id) m["get_pad_id"] = *c.pad_token_id;
  m["use_kv_cache"] = false;
  m["enable_dynamic_shape"] = true;
  m["get_model_type"] = out.model_type;
  m["get_architecture"] = out.architecture;
  m["get_exporter_version"] = opt.exporter_version;
  return out;
}

}  // namespace hf2pte::models
