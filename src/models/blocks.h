// Reusable transformer blocks that emit graph IR: weights come in as structs,
// options as structs (no long positional argument lists). Every value gets a
// debug name "layers.<i>.<what>".
#pragma once

#include <optional>
#include <string>

#include "checkpoint/checkpoint.h"
#include "graph/constant.h"
#include "graph/graph.h"

namespace hf2pte::models {

using graph::Graph;
using graph::SymInt;
using graph::ValueId;

/// Weights of one linear layer: y = x W^T + b.
struct LinearWeights {
  ValueId weight = -1;
  std::optional<ValueId> bias;
};

/// Reads checkpoint tensors into graph constants (checking shape and dtype,
/// marking each consumed) and emits blocks into one graph.
class BlockBuilder {
 public:
  BlockBuilder(Graph& g, Checkpoint& ckpt, ScalarType dtype) : g_(g), ckpt_(ckpt), dtype_(dtype) {}

  /// A checkpoint tensor as a constant, optionally rows [row_begin, row_end) only.
  Result<ValueId> weight(const std::string& name, const std::vector<int64_t>& shape);
  /// Several row blocks of one fused tensor (e.g. qkv_proj -> q, k, v), each its own constant.
  Result<std::vector<ValueId>> split_rows(const std::string& name, const std::vector<int64_t>& shape,
                                          const std::vector<int64_t>& row_counts);
  /// "<prefix>.weight" [out, in] and, when `bias`, "<prefix>.bias" [out].
  Result<LinearWeights> linear_weights(const std::string& prefix, int64_t out, int64_t in, bool bias);

  Result<ValueId> linear(ValueId x, const LinearWeights& w, const std::string& name);
  Result<ValueId> rms_norm(ValueId x, ValueId weight, double eps, const std::string& name);
  /// rotate_half RoPE on x [S, heads, head_dim] with cos/sin [S, 1, head_dim].
  Result<ValueId> rope(ValueId x, ValueId cos, ValueId sin, const std::string& name);
  Result<ValueId> op(OpId op, std::vector<graph::Arg> args, const std::string& name) { return g_.add(op, std::move(args), name); }

  Graph& graph() { return g_; }
  ScalarType dtype() const { return dtype_; }

 private:
  Result<graph::TensorSource> source(const TensorRef& t);
  Graph& g_;
  Checkpoint& ckpt_;
  ScalarType dtype_;
};

}  // namespace hf2pte::models
