#include "models/blocks.h"

#include <fmt/format.h>

namespace hf2pte::models {

using graph::IntList;
using graph::None;

Result<graph::TensorSource> BlockBuilder::source(const TensorRef& t) {
  graph::TensorSource s;
  s.name = t.name;
  s.dtype = t.dtype;
  s.shape = t.shape;
  s.bytes = t.bytes;
  s.owner = t.storage;
  return s;
}

Result<ValueId> BlockBuilder::weight(const std::string& name, const std::vector<int64_t>& shape) {
  HF2PTE_ASSIGN_OR_RETURN(TensorRef t, ckpt_.expect(name, DTypeSet::float_weights(), shape));
  HF2PTE_ASSIGN_OR_RETURN(graph::TensorSource src, source(t));
  graph::ConstantRecipe r;
  r.source = std::move(src);
  r.dtype = dtype_;
  return g_.add_constant(name, graph::make_constant(r));
}

Result<std::vector<ValueId>> BlockBuilder::split_rows(const std::string& name, const std::vector<int64_t>& shape,
                                                      const std::vector<int64_t>& row_counts) {
  HF2PTE_ASSIGN_OR_RETURN(TensorRef t, ckpt_.expect(name, DTypeSet::float_weights(), shape));
  HF2PTE_ASSIGN_OR_RETURN(graph::TensorSource src, source(t));
  std::vector<ValueId> out;
  int64_t begin = 0;
  for (size_t i = 0; i < row_counts.size(); ++i) {
    graph::ConstantRecipe r;
    r.source = src;
    r.row_begin = begin;
    r.row_end = begin + row_counts[i];
    r.dtype = dtype_;
    begin = r.row_end;
    out.push_back(g_.add_constant(fmt::format("{}.{}", name, i), graph::make_constant(r)));
  }
  return out;
}

Result<LinearWeights> BlockBuilder::linear_weights(const std::string& prefix, int64_t out, int64_t in, bool bias) {
  LinearWeights w;
  HF2PTE_ASSIGN_OR_RETURN(w.weight, weight(prefix + ".weight", {out, in}));
  if (bias) {
    HF2PTE_ASSIGN_OR_RETURN(ValueId b, weight(prefix + ".bias", {out}));
    w.bias = b;
  }
  return w;
}

Result<ValueId> BlockBuilder::linear(ValueId x, const LinearWeights& w, const std::string& name) {
  graph::Arg bias = w.bias ? graph::Arg{*w.bias} : graph::Arg{None{}};
  return g_.add(OpId::Linear, {x, w.weight, bias}, name);
}

Result<ValueId> BlockBuilder::rms_norm(ValueId x, ValueId weight, double eps, const std::string& name) {
  IntList normalized{g_.type(x).sizes.back()};
  return g_.add(OpId::RmsNorm, {x, normalized, weight, eps}, name);
}

Result<ValueId> BlockBuilder::rope(ValueId x, ValueId cos, ValueId sin, const std::string& name) {
  // out = x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2])
  const SymInt& d = g_.type(x).sizes.back();
  int64_t half = d.constant_value() / 2;
  HF2PTE_ASSIGN_OR_RETURN(ValueId x1, op(OpId::SliceCopyTensorOut, {x, int64_t{-1}, SymInt(0), SymInt(half)}, name + ".x1"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId x2, op(OpId::SliceCopyTensorOut, {x, int64_t{-1}, SymInt(half), SymInt(2 * half)}, name + ".x2"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId nx2, op(OpId::NegOut, {x2}, name + ".neg"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId rot, op(OpId::CatOut, {graph::TensorList{nx2, x1}, int64_t{-1}}, name + ".rot"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId xc, op(OpId::MulOut, {x, cos}, name + ".xcos"));
  HF2PTE_ASSIGN_OR_RETURN(ValueId rs, op(OpId::MulOut, {rot, sin}, name + ".rsin"));
  return op(OpId::AddOut, {xc, rs}, name);
}

}  // namespace hf2pte::models
