// Reusable transformer blocks that emit graph IR: weights come in as structs,
// options as structs (no long positional argument lists). Every value gets a
// debug name "layers.<i>.<what>".
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "graph/constant.h"
#include "graph/graph.h"
#include "models/arch.h"

namespace hf2pte::models {

using graph::Graph;
using graph::SymInt;
using graph::ValueId;

/// Weights of one linear layer: y = x W^T + b.
struct LinearWeights {
  ValueId weight = -1;
  std::optional<ValueId> bias;
};

/// Weights of one norm (the bias only for LayerNorm).
struct NormWeights {
  ValueId weight = -1;
  std::optional<ValueId> bias;
};

struct NormOptions {
  NormKind kind = NormKind::kRms;
  double eps = 1e-6;
};

/// Attention over a static KV cache: q [heads, S, head_dim], caches
/// [kv_heads, max_seq_len, head_dim], mask [S, max_seq_len] (bool, true = visible);
/// without a cache the call's own k/v [kv_heads, S, head_dim] and mask [S, S].
struct AttentionOptions {
  int64_t heads = 0;
  int64_t kv_heads = 0;
  double scale = 1.0;                ///< applied to q.k before soft-capping
  std::optional<double> softcap;     ///< tanh(scores / cap) * cap (Gemma 2)
  /// Per-head sink logits [heads] (gpt-oss): each joins its head's softmax as an
  /// extra column whose probability is then dropped.
  std::optional<ValueId> sinks;
};

/// One expert (or dense) gated MLP: down(act(gate(x)) * up(x)).
struct GatedMlpWeights {
  LinearWeights gate, up, down;
};

/// A mixture-of-experts MLP: router [experts, hidden] plus the experts.
struct MoeWeights {
  ValueId router = -1;
  std::vector<GatedMlpWeights> experts;
  /// Qwen2-MoE: an expert every token uses, scaled by sigmoid(x . shared_gate).
  std::optional<GatedMlpWeights> shared;
  std::optional<ValueId> shared_gate;  ///< [1, hidden]; none: the shared expert is added unscaled (DeepSeek)
  std::optional<ValueId> router_bias;      ///< [experts] (gpt-oss)
  std::optional<ValueId> correction_bias;  ///< [experts], selection only (DeepSeek-V3)
};

struct MoeOptions {
  int64_t top_k = 2;
  std::string activation = "silu";
  /// Renormalise the top-k weights to sum to 1 (Mixtral, norm_topk_prob); false
  /// keeps the softmax over all experts (Qwen2-MoE's default).
  bool normalize_top_k = true;
  RouterKind router = RouterKind::kSoftmaxTopK;
  /// kSigmoidGrouped: experts in n_group groups, topk_group groups eligible, weights scaled.
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double routed_scaling_factor = 1.0;
  /// gpt-oss's clamped SwiGLU experts instead of down(act(gate) * up).
  std::optional<double> swiglu_limit;
};

/// A 2-D view of a checkpoint tensor (graph::ConstantRecipe's fields): rows of
/// row_width elements, a row block, picked rows / columns, transpose, reshape.
struct WeightView {
  int64_t row_width = 0;
  int64_t row_begin = 0;
  int64_t row_end = -1;
  std::vector<int64_t> rows{};
  std::vector<int64_t> cols{};
  bool transpose = false;
  std::vector<int64_t> sizes{};
  graph::ConstantRecipe::Map map = graph::ConstantRecipe::Map::kIdentity;
  std::optional<ScalarType> dtype{};  ///< element type of the constant (default: the model's)
};

/// How a checkpoint stores its weights (see ArchTraits::conv1d_weights, optional_prefix).
struct WeightLayout {
  bool linear_in_out = false;         ///< linear weights are [in, out]
  std::string_view optional_prefix;   ///< names may lack this prefix
};

/// Reads checkpoint tensors into graph constants (checking shape and dtype,
/// marking each consumed) and emits blocks into one graph.
class BlockBuilder {
 public:
  BlockBuilder(Graph& g, Checkpoint& ckpt, ScalarType dtype, WeightLayout layout = {})
      : g_(g), ckpt_(ckpt), dtype_(dtype), layout_(layout) {}

  /// Whether the checkpoint holds `name` (with or without the optional prefix).
  bool has(const std::string& name) const { return ckpt_.has(resolve(name)); }
  /// A checkpoint tensor as a constant in the model's dtype, or in `dtype`
  /// when given (MoE routers stay f32 in 16-bit models).
  Result<ValueId> weight(const std::string& name, const std::vector<int64_t>& shape,
                         std::optional<ScalarType> dtype = std::nullopt);
  /// Several row blocks of one fused tensor (e.g. qkv_proj -> q, k, v), each its own constant.
  /// Part of checkpoint tensor `name` (expected `shape`) as one constant; `label`
  /// names the constant ("<name>.<label>").
  Result<ValueId> weight_view(const std::string& name, const std::vector<int64_t>& shape, const WeightView& view,
                              const std::string& label);
  /// A convolution [out, in, kh, kw] followed by eval-mode BatchNorm
  /// ("<bn>.weight/bias/running_mean/running_var"), folded into one conv's
  /// weight and bias while loading (in double, rounded once):
  /// w' = w g / sqrt(var + eps), b' = beta + (b - mean) g / sqrt(var + eps).
  /// `conv_bias`: "<conv>.bias" exists. num_batches_tracked is ignored.
  Result<LinearWeights> conv_bn_folded(const std::string& conv, const std::vector<int64_t>& shape, bool conv_bias,
                                       const std::string& bn, double eps);
  Result<std::vector<ValueId>> split_rows(const std::string& name, const std::vector<int64_t>& shape,
                                          const std::vector<int64_t>& row_counts);
  /// "<prefix>.weight" [out, in] (stored [in, out] for WeightLayout::linear_in_out)
  /// and, when `bias`, "<prefix>.bias" [out].
  Result<LinearWeights> linear_weights(const std::string& prefix, int64_t out, int64_t in, bool bias);

  Result<ValueId> linear(ValueId x, const LinearWeights& w, const std::string& name);
  Result<ValueId> rms_norm(ValueId x, ValueId weight, double eps, const std::string& name);
  /// "<name>" [size] and, for LayerNorm, the bias next to it ("...bias").
  Result<NormWeights> norm_weights(const std::string& weight_name, int64_t size, NormKind kind);
  /// Any NormKind over the last dim of x.
  Result<ValueId> norm(ValueId x, const NormWeights& w, const NormOptions& o, const std::string& name);
  /// HF activations by name: silu, gelu (erf), gelu_pytorch_tanh / gelu_new (tanh form).
  /// Others are kNotSupported naming the activation.
  Result<ValueId> activation(ValueId x, std::string_view act, const std::string& name);
  /// The last of x's S positions along dim -2 ([S, H] -> [1, H]): --logits last.
  Result<ValueId> last_position(ValueId x, const SymInt& S);
  /// tanh(x / cap) * cap.
  Result<ValueId> softcap(ValueId x, double cap, const std::string& name);
  /// rotate_half RoPE on x [S, heads, head_dim] with cos/sin [S, 1, rotary_dim];
  /// when rotary_dim < head_dim only the first rotary_dim dims rotate.
  Result<ValueId> rope(ValueId x, ValueId cos, ValueId sin, const std::string& name);
  /// x [S, hidden] through `w`, split into heads: [heads, S, head_dim] (SDPA's layout).
  Result<ValueId> heads_of(ValueId x, const LinearWeights& w, int64_t heads, int64_t head_dim, const std::string& name);
  /// An attention output [heads, S, head_dim] back to [S, heads * head_dim].
  Result<ValueId> merge_heads(ValueId a, const std::string& name);
  /// softmax(q k^T * scale [softcapped], masked) v, grouping query heads over kv heads.
  Result<ValueId> attention(ValueId q, ValueId k_cache, ValueId v_cache, ValueId mask, const AttentionOptions& o,
                            const std::string& name);
  Result<ValueId> gated_mlp(ValueId x, const GatedMlpWeights& w, std::string_view act, const std::string& name);
  /// gpt-oss's expert: (clamp(up, -l, l) + 1) * g * sigmoid(1.702 g) with g = min(gate, l), then down.
  Result<ValueId> clamped_swiglu_mlp(ValueId x, const GatedMlpWeights& w, double limit, const std::string& name);
  /// bool mask of the k largest entries along v's last dim (ties: all tied), no topk kernel.
  Result<ValueId> top_k_mask(ValueId v, int64_t k, const std::string& name);
  /// Top-k routed experts on x [S, hidden], computed densely (see blocks.cpp).
  Result<ValueId> moe(ValueId x, const MoeWeights& w, const MoeOptions& o, const std::string& name);
  /// A 0-d constant (f32, i64 or bool) for scalar operands of where / le.
  ValueId scalar(ScalarType dtype, double value, const std::string& name);
  Result<ValueId> op(OpId op, std::vector<graph::Arg> args, const std::string& name) { return g_.add(op, std::move(args), name); }

  Graph& graph() { return g_; }
  /// `x` as `dtype`: x itself when it already is, else one cast (aten::_to_copy).
  /// 16-bit programs keep f32 inputs and outputs (llm-contract.md) and cast at the edges.
  Result<ValueId> cast(ValueId x, ScalarType dtype, const std::string& name);
  ScalarType dtype() const { return dtype_; }

 private:
  Result<graph::TensorSource> source(const TensorRef& t);
  /// `name`, or `name` without the optional prefix when only that exists.
  std::string resolve(const std::string& name) const;
  Graph& g_;
  Checkpoint& ckpt_;
  ScalarType dtype_;
  WeightLayout layout_;
};

/// A tensor-name template with the layer filled in: "model.layers.{}.mlp" -> "model.layers.3.mlp".
std::string layer_name(std::string_view tmpl, int64_t layer);

/// The raw bytes of `v`, for constants computed at export (position tables).
template <typename T>
std::vector<uint8_t> to_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace hf2pte::models
