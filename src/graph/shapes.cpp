// Shape functions, one per op, registered through the ops.def X-macro so an op
// cannot exist without one.
#include "graph/shapes.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

namespace hf2pte::graph {

namespace {

using Outs = Result<std::vector<OutputType>>;
using Args = std::vector<Arg>;

std::string shape_str(const std::vector<SymInt>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + s[i].str();
  return r + "]";
}

Result<const TensorType*> tensor_arg(const Graph& g, const Args& args, size_t i, const char* name) {
  const auto* id = i < args.size() ? std::get_if<ValueId>(&args[i]) : nullptr;
  if (id == nullptr) return make_error(ErrorCode::kInternal, "argument '{}' must be a tensor", name);
  if (g.value(*id).role == ValueRole::kSymInt) {
    return make_error(ErrorCode::kInternal, "argument '{}' must be a tensor, got an integer value", name);
  }
  return &g.type(*id);
}

Result<SymInt> int_arg(const Args& args, size_t i, const char* name) {
  if (i < args.size()) {
    if (const auto* v = std::get_if<int64_t>(&args[i])) return SymInt(*v);
    if (const auto* s = std::get_if<SymInt>(&args[i])) return *s;
  }
  return make_error(ErrorCode::kInternal, "argument '{}' must be an integer", name);
}

Result<int64_t> const_int_arg(const Args& args, size_t i, const char* name) {
  HF2PTE_ASSIGN_OR_RETURN(SymInt s, int_arg(args, i, name));
  if (!s.is_constant()) return make_error(ErrorCode::kInternal, "argument '{}' must be a constant integer", name);
  return s.constant_value();
}

Result<IntList> int_list_arg(const Args& args, size_t i, const char* name) {
  if (i < args.size()) {
    if (const auto* l = std::get_if<IntList>(&args[i])) return *l;
  }
  return make_error(ErrorCode::kInternal, "argument '{}' must be an int list", name);
}

ScalarType promote(ScalarType a, ScalarType b) {
  if (a == b) return a;
  if (is_floating(a) && !is_floating(b)) return a;
  if (is_floating(b) && !is_floating(a)) return b;
  if (a == ScalarType::kBool) return b;
  if (b == ScalarType::kBool) return a;
  // f16 with bf16: neither holds the other, so ATen promotes to f32.
  if (element_size(a) == element_size(b) && is_floating(a)) return ScalarType::kFloat;
  return element_size(a) >= element_size(b) ? a : b;
}

TensorType like(const TensorType& t, std::vector<SymInt> sizes, ScalarType dtype) {
  TensorType r;
  r.dtype = dtype;
  r.sizes = std::move(sizes);
  return r;
}

Outs one(TensorType t) { return std::vector<OutputType>{std::move(t)}; }

// ---- families ----

Outs binary(const Graph& g, const Args& a, bool to_bool, bool to_float) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(auto y, tensor_arg(g, a, 1, "other"));
  HF2PTE_ASSIGN_OR_RETURN(auto sizes, broadcast_shapes(x->sizes, y->sizes));
  ScalarType dt = promote(x->dtype, y->dtype);
  if (to_float && !is_floating(dt)) dt = ScalarType::kFloat;
  if (to_bool) dt = ScalarType::kBool;
  return one(like(*x, std::move(sizes), dt));
}

Outs unary(const Graph& g, const Args& a, bool to_float) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  ScalarType dt = x->dtype;
  if (to_float && !is_floating(dt)) dt = ScalarType::kFloat;
  return one(like(*x, x->sizes, dt));
}

Outs same_as_first(const Graph& g, const Args& a) { return unary(g, a, false); }

}  // namespace

Result<std::vector<SymInt>> broadcast_shapes(const std::vector<SymInt>& a, const std::vector<SymInt>& b) {
  size_t n = std::max(a.size(), b.size());
  std::vector<SymInt> out(n);
  for (size_t i = 0; i < n; ++i) {
    const SymInt* x = i < n - a.size() ? nullptr : &a[i - (n - a.size())];
    const SymInt* y = i < n - b.size() ? nullptr : &b[i - (n - b.size())];
    if (x == nullptr || (x->is_constant() && x->constant_value() == 1)) {
      out[i] = y ? *y : SymInt(1);
    } else if (y == nullptr || (y->is_constant() && y->constant_value() == 1) || *x == *y) {
      out[i] = *x;
    } else {
      return make_error(ErrorCode::kInternal, "shapes {} and {} cannot be broadcast", shape_str(a), shape_str(b));
    }
  }
  return out;
}

Result<int> normalize_dim(int64_t dim, int rank) {
  int64_t r = std::max(rank, 1);
  if (dim < -r || dim >= r) {
    return make_error(ErrorCode::kInternal, "dim {} out of range for rank {}", dim, rank);
  }
  return int(dim < 0 ? dim + r : dim);
}

namespace shapes {

Outs AddOut(const Graph& g, const Args& a) { return binary(g, a, false, false); }
Outs SubOut(const Graph& g, const Args& a) { return binary(g, a, false, false); }
Outs MulOut(const Graph& g, const Args& a) { return binary(g, a, false, false); }
Outs DivOut(const Graph& g, const Args& a) { return binary(g, a, false, true); }
Outs LeTensorOut(const Graph& g, const Args& a) { return binary(g, a, true, false); }
Outs AddScalarOut(const Graph& g, const Args& a) { return same_as_first(g, a); }
Outs MulScalarOut(const Graph& g, const Args& a) { return same_as_first(g, a); }
Outs NegOut(const Graph& g, const Args& a) { return same_as_first(g, a); }
Outs RsqrtOut(const Graph& g, const Args& a) { return unary(g, a, true); }
Outs SigmoidOut(const Graph& g, const Args& a) { return unary(g, a, true); }
Outs TanhOut(const Graph& g, const Args& a) { return unary(g, a, true); }
Outs ErfOut(const Graph& g, const Args& a) { return unary(g, a, true); }
Outs ExpOut(const Graph& g, const Args& a) { return unary(g, a, true); }
Outs Log1pOut(const Graph& g, const Args& a) { return unary(g, a, true); }
Outs ClampOut(const Graph& g, const Args& a) { return same_as_first(g, a); }
Outs MaximumOut(const Graph& g, const Args& a) { return binary(g, a, false, false); }
Outs PowTensorScalarOut(const Graph& g, const Args& a) { return same_as_first(g, a); }
Outs CloneOut(const Graph& g, const Args& a) { return same_as_first(g, a); }
// The out is laid out in the requested dim order (None: contiguous).
Outs ToDimOrderCopyOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto outs, same_as_first(g, a));
  if (const auto* order = a.size() > 2 ? std::get_if<IntList>(&a[2]) : nullptr) {
    auto& t = std::get<TensorType>(outs[0]);
    bool identity = true;
    for (size_t i = 0; i < order->size(); ++i) {
      if (!(*order)[i].is_constant()) return make_error(ErrorCode::kInternal, "_to_dim_order_copy: dim_order must be constant");
      t.dim_order.push_back(uint8_t((*order)[i].constant_value()));
      identity &= t.dim_order.back() == i;
    }
    if (identity) t.dim_order.clear();
  }
  return outs;
}
Outs SoftmaxOut(const Graph& g, const Args& a) { return same_as_first(g, a); }
Outs Silu(const Graph& g, const Args& a) { return same_as_first(g, a); }
Outs ToCopy(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto outs, same_as_first(g, a));
  if (const auto* dt = a.size() > 1 ? std::get_if<ScalarType>(&a[1]) : nullptr) std::get<TensorType>(outs[0]).dtype = *dt;
  return outs;
}
Outs RmsNorm(const Graph& g, const Args& a) { return same_as_first(g, a); }

Outs WhereSelfOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto c, tensor_arg(g, a, 0, "condition"));
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 1, "self"));
  HF2PTE_ASSIGN_OR_RETURN(auto y, tensor_arg(g, a, 2, "other"));
  HF2PTE_ASSIGN_OR_RETURN(auto xy, broadcast_shapes(x->sizes, y->sizes));
  HF2PTE_ASSIGN_OR_RETURN(auto sizes, broadcast_shapes(c->sizes, xy));
  return one(like(*x, std::move(sizes), promote(x->dtype, y->dtype)));
}

Outs MaskedFillScalarOut(const Graph& g, const Args& a) { return same_as_first(g, a); }

Outs MeanOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  bool keepdim = std::get_if<bool>(&a[2]) ? std::get<bool>(a[2]) : false;
  std::vector<bool> reduce(size_t(x->rank()), std::holds_alternative<None>(a[1]));
  if (const auto* dims = std::get_if<IntList>(&a[1])) {
    if (dims->empty()) reduce.assign(reduce.size(), true);
    for (const auto& d : *dims) {
      if (!d.is_constant()) return make_error(ErrorCode::kInternal, "mean: dims must be constant");
      HF2PTE_ASSIGN_OR_RETURN(int nd, normalize_dim(d.constant_value(), x->rank()));
      reduce[size_t(nd)] = true;
    }
  }
  std::vector<SymInt> sizes;
  for (int i = 0; i < x->rank(); ++i) {
    if (!reduce[size_t(i)]) sizes.push_back(x->sizes[size_t(i)]);
    else if (keepdim) sizes.emplace_back(1);
  }
  return one(like(*x, std::move(sizes), x->dtype));
}

Outs MmOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(auto y, tensor_arg(g, a, 1, "mat2"));
  if (x->rank() != 2 || y->rank() != 2 || !(x->sizes[1] == y->sizes[0])) {
    return make_error(ErrorCode::kInternal, "mm: shapes {} and {} cannot be multiplied", shape_str(x->sizes),
                      shape_str(y->sizes));
  }
  return one(like(*x, {x->sizes[0], y->sizes[1]}, x->dtype));
}

Outs BmmOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(auto y, tensor_arg(g, a, 1, "mat2"));
  if (x->rank() != 3 || y->rank() != 3 || !(x->sizes[2] == y->sizes[1]) || !(x->sizes[0] == y->sizes[0])) {
    return make_error(ErrorCode::kInternal, "bmm: shapes {} and {} cannot be multiplied", shape_str(x->sizes),
                      shape_str(y->sizes));
  }
  return one(like(*x, {x->sizes[0], x->sizes[1], y->sizes[2]}, x->dtype));
}

Outs AddmmOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto bias, tensor_arg(g, a, 0, "self"));
  Args mm_args{a[1], a[2]};
  HF2PTE_ASSIGN_OR_RETURN(auto outs, MmOut(g, mm_args));
  const auto& t = std::get<TensorType>(outs[0]);
  HF2PTE_RETURN_IF_ERROR(broadcast_shapes(t.sizes, bias->sizes).status());
  return outs;
}

Outs EmbeddingOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto w, tensor_arg(g, a, 0, "weight"));
  HF2PTE_ASSIGN_OR_RETURN(auto idx, tensor_arg(g, a, 1, "indices"));
  if (w->rank() != 2) return make_error(ErrorCode::kInternal, "embedding: weight must be 2-D");
  auto sizes = idx->sizes;
  sizes.push_back(w->sizes[1]);
  return one(like(*w, std::move(sizes), w->dtype));
}

Outs IndexSelectOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim, const_int_arg(a, 1, "dim"));
  HF2PTE_ASSIGN_OR_RETURN(auto idx, tensor_arg(g, a, 2, "index"));
  HF2PTE_ASSIGN_OR_RETURN(int d, normalize_dim(dim, x->rank()));
  if (idx->rank() > 1) return make_error(ErrorCode::kInternal, "index_select: index must be 0-D or 1-D");
  auto sizes = x->sizes;
  sizes[size_t(d)] = idx->rank() == 0 ? SymInt(1) : idx->sizes[0];
  return one(like(*x, std::move(sizes), x->dtype));
}

Outs IndexPut_(const Graph& g, const Args& a) {
  HF2PTE_RETURN_IF_ERROR(tensor_arg(g, a, 0, "self").status());
  HF2PTE_RETURN_IF_ERROR(tensor_arg(g, a, 2, "values").status());
  return std::vector<OutputType>{};  // in place: the result is `self`
}

Outs ViewCopyOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(auto sizes, int_list_arg(a, 1, "size"));
  SymInt n_in = 1, n_out = 1;
  for (const auto& s : x->sizes) n_in = n_in * s;
  for (const auto& s : sizes) n_out = n_out * s;
  // Products are compared only when both are fully constant; symbolic views are
  // checked at runtime by the kernel (numel must match).
  if (n_in.is_constant() && n_out.is_constant() && !(n_in == n_out)) {
    return make_error(ErrorCode::kInternal, "view: cannot view {} as {}", shape_str(x->sizes), shape_str(sizes));
  }
  return one(like(*x, std::move(sizes), x->dtype));
}

/// The `dims` argument of a permute as normalised dims: a permutation of 0..rank-1.
static Result<std::vector<int>> permutation_arg(const Args& a, size_t i, int rank) {
  HF2PTE_ASSIGN_OR_RETURN(auto dims, int_list_arg(a, i, "dims"));
  if (int(dims.size()) != rank) return make_error(ErrorCode::kInternal, "permute: wrong number of dims");
  std::vector<int> p;
  std::vector<bool> seen(dims.size(), false);
  for (const auto& d : dims) {
    if (!d.is_constant()) return make_error(ErrorCode::kInternal, "permute: dims must be constant");
    HF2PTE_ASSIGN_OR_RETURN(int nd, normalize_dim(d.constant_value(), rank));
    if (seen[size_t(nd)]) return make_error(ErrorCode::kInternal, "permute: repeated dim {}", nd);
    seen[size_t(nd)] = true;
    p.push_back(nd);
  }
  return p;
}

Outs PermuteCopyOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(auto p, permutation_arg(a, 1, x->rank()));
  std::vector<SymInt> sizes;
  for (int d : p) sizes.push_back(x->sizes[size_t(d)]);
  return one(like(*x, std::move(sizes), x->dtype));
}

Outs SliceCopyTensorOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim, const_int_arg(a, 1, "dim"));
  HF2PTE_ASSIGN_OR_RETURN(int d, normalize_dim(dim, x->rank()));
  HF2PTE_ASSIGN_OR_RETURN(int64_t step, const_int_arg(a, 4, "step"));
  if (step < 1) return make_error(ErrorCode::kInternal, "slice: step must be positive");
  const SymInt& size = x->sizes[size_t(d)];
  SymInt start = 0, end = size;
  if (!std::holds_alternative<None>(a[2])) { HF2PTE_ASSIGN_OR_RETURN(start, int_arg(a, 2, "start")); }
  if (!std::holds_alternative<None>(a[3])) { HF2PTE_ASSIGN_OR_RETURN(end, int_arg(a, 3, "end")); }
  // Constant bounds are normalised and clamped as torch does; symbolic ones are
  // taken to be in range (node fixes rewrite negative symbolic starts).
  if (size.is_constant()) {
    int64_t n = size.constant_value();
    auto clamp = [n](const SymInt& v) -> SymInt {
      if (!v.is_constant()) return v;
      int64_t c = v.constant_value();
      if (c < 0) c += n;
      return std::clamp<int64_t>(c, 0, n);
    };
    start = clamp(start);
    end = clamp(end);
  } else {
    if (start.is_constant() && start.constant_value() < 0) start = size + start;
    if (end.is_constant() && end.constant_value() < 0) end = size + end;
    if (end.is_constant() && end.constant_value() >= INT64_MAX / 2) end = size;
  }
  SymInt len = ceildiv(end - start, SymInt(step));
  if (len.is_constant() && len.constant_value() < 0) len = 0;
  auto sizes = x->sizes;
  sizes[size_t(d)] = len;
  return one(like(*x, std::move(sizes), x->dtype));
}

Outs CatOut(const Graph& g, const Args& a) {
  const auto* list = std::get_if<TensorList>(&a[0]);
  if (list == nullptr || list->empty()) return make_error(ErrorCode::kInternal, "cat: needs a non-empty tensor list");
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim, const_int_arg(a, 1, "dim"));
  const TensorType& first = g.type((*list)[0]);
  HF2PTE_ASSIGN_OR_RETURN(int d, normalize_dim(dim, first.rank()));
  auto sizes = first.sizes;
  for (size_t i = 1; i < list->size(); ++i) {
    const TensorType& t = g.type((*list)[i]);
    if (t.rank() != first.rank()) return make_error(ErrorCode::kInternal, "cat: rank mismatch");
    sizes[size_t(d)] = sizes[size_t(d)] + t.sizes[size_t(d)];
  }
  return one(like(first, std::move(sizes), first.dtype));
}

Outs SymSizeInt(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim, const_int_arg(a, 1, "dim"));
  HF2PTE_ASSIGN_OR_RETURN(int d, normalize_dim(dim, x->rank()));
  return std::vector<OutputType>{x->sizes[size_t(d)]};
}

Outs prim(const Args& a, SymInt (*f)(const SymInt&, const SymInt&)) {
  HF2PTE_ASSIGN_OR_RETURN(SymInt x, int_arg(a, 0, "a"));
  HF2PTE_ASSIGN_OR_RETURN(SymInt y, int_arg(a, 1, "b"));
  return std::vector<OutputType>{f(x, y)};
}
Outs PrimAddScalar(const Graph&, const Args& a) { return prim(a, [](const SymInt& x, const SymInt& y) { return x + y; }); }
Outs PrimSubScalar(const Graph&, const Args& a) { return prim(a, [](const SymInt& x, const SymInt& y) { return x - y; }); }
Outs PrimMulScalar(const Graph&, const Args& a) { return prim(a, [](const SymInt& x, const SymInt& y) { return x * y; }); }
Outs PrimFloordivScalar(const Graph&, const Args& a) { return prim(a, [](const SymInt& x, const SymInt& y) { return floordiv(x, y); }); }

Outs Linear(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "input"));
  HF2PTE_ASSIGN_OR_RETURN(auto w, tensor_arg(g, a, 1, "weight"));
  if (w->rank() != 2 || x->rank() < 1 || !(x->sizes.back() == w->sizes[1])) {
    return make_error(ErrorCode::kInternal, "linear: input {} does not match weight {}", shape_str(x->sizes),
                      shape_str(w->sizes));
  }
  auto sizes = x->sizes;
  sizes.back() = w->sizes[0];
  return one(like(*x, std::move(sizes), x->dtype));
}

Outs ScaledDotProductAttention(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto q, tensor_arg(g, a, 0, "query"));
  HF2PTE_ASSIGN_OR_RETURN(auto k, tensor_arg(g, a, 1, "key"));
  HF2PTE_ASSIGN_OR_RETURN(auto v, tensor_arg(g, a, 2, "value"));
  if (q->rank() < 2 || k->rank() != q->rank() || v->rank() != q->rank() || !(q->sizes.back() == k->sizes.back())) {
    return make_error(ErrorCode::kInternal, "sdpa: query {}, key {}, value {} do not match", shape_str(q->sizes),
                      shape_str(k->sizes), shape_str(v->sizes));
  }
  auto sizes = q->sizes;
  sizes.back() = v->sizes.back();
  return one(like(*q, std::move(sizes), q->dtype));
}

// The partitioner sets a delegate call's outputs (the lowered subgraph's); they
// cannot be re-derived from the args.
Outs DelegateCall(const Graph&, const Args&) {
  return make_error(ErrorCode::kInternal, "delegate_call outputs are set by the partitioner, not inferred");
}


// ---- decomposition targets and sources (export/decompositions.cpp) ----

namespace {

Result<bool> bool_arg(const Args& a, size_t i, const char* name) {
  if (i < a.size()) {
    if (const auto* b = std::get_if<bool>(&a[i])) return *b;
  }
  return make_error(ErrorCode::kInternal, "argument '{}' must be a bool", name);
}

/// Sizes after reducing `dims` (None or [] = all dims), keeping 1s when keepdim.
Result<std::vector<SymInt>> reduced_sizes(const TensorType& x, const Arg& dims_arg, bool keepdim) {
  std::vector<bool> reduce(size_t(x.rank()), true);
  if (const auto* dims = std::get_if<IntList>(&dims_arg); dims && !dims->empty()) {
    reduce.assign(reduce.size(), false);
    for (const auto& d : *dims) {
      if (!d.is_constant()) return make_error(ErrorCode::kInternal, "reduction dims must be constant");
      HF2PTE_ASSIGN_OR_RETURN(int nd, normalize_dim(d.constant_value(), x.rank()));
      reduce[size_t(nd)] = true;
    }
  }
  std::vector<SymInt> sizes;
  for (int i = 0; i < x.rank(); ++i) {
    if (!reduce[size_t(i)]) sizes.push_back(x.sizes[size_t(i)]);
    else if (keepdim) sizes.emplace_back(1);
  }
  return sizes;
}

Outs reduction(const Graph& g, const Args& a, ScalarType dtype_if_int) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(bool keepdim, bool_arg(a, 2, "keepdim"));
  HF2PTE_ASSIGN_OR_RETURN(auto sizes, reduced_sizes(*x, a[1], keepdim));
  ScalarType dt = is_floating(x->dtype) ? x->dtype : dtype_if_int;
  return one(like(*x, std::move(sizes), dt));
}

/// expand's target sizes: right-aligned, -1 keeps the input size, size-1 dims broadcast.
Result<std::vector<SymInt>> expanded_sizes(const TensorType& x, const IntList& size) {
  if (size.size() < size_t(x.rank())) {
    return make_error(ErrorCode::kInternal, "expand: {} has more dims than {}", shape_str(x.sizes), shape_str(size));
  }
  std::vector<SymInt> out(size.begin(), size.end());
  size_t lead = size.size() - size_t(x.rank());
  for (size_t i = 0; i < size.size(); ++i) {
    bool keep = size[i].is_constant() && size[i].constant_value() == -1;
    if (i < lead) {
      if (keep) return make_error(ErrorCode::kInternal, "expand: -1 on a new leading dim");
      continue;
    }
    const SymInt& in = x.sizes[i - lead];
    if (keep) {
      out[i] = in;
    } else if (!(in.is_constant() && in.constant_value() == 1) && !(in == size[i])) {
      return make_error(ErrorCode::kInternal, "expand: cannot expand {} to {}", shape_str(x.sizes), shape_str(size));
    }
  }
  return out;
}

/// Pieces of a split of `total` (constant) into `sizes`.
Outs split_outputs(const TensorType& x, int d, const std::vector<int64_t>& pieces) {
  std::vector<OutputType> outs;
  for (int64_t p : pieces) {
    auto sizes = x.sizes;
    sizes[size_t(d)] = p;
    outs.push_back(like(x, std::move(sizes), x.dtype));
  }
  return outs;
}

/// Sizes of a split into chunks of `chunk` along a dim of constant size `total`.
std::vector<int64_t> even_pieces(int64_t total, int64_t chunk) {
  std::vector<int64_t> pieces;
  for (int64_t at = 0; at < total; at += chunk) pieces.push_back(std::min(chunk, total - at));
  if (pieces.empty()) pieces.push_back(0);
  return pieces;
}

Result<int64_t> const_dim_size(const TensorType& x, int d, const char* op) {
  const SymInt& s = x.sizes[size_t(d)];
  if (!s.is_constant()) return make_error(ErrorCode::kNotSupported, "{} along symbolic dim {}", op, s.str());
  return s.constant_value();
}

Result<std::vector<SymInt>> view_sizes(const TensorType& x, IntList sizes) {
  SymInt n_in = 1, known = 1;
  int infer = -1;
  for (const auto& s : x.sizes) n_in = n_in * s;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i].is_constant() && sizes[i].constant_value() == -1) {
      if (infer >= 0) return make_error(ErrorCode::kInternal, "view: only one dim can be -1");
      infer = int(i);
    } else {
      known = known * sizes[i];
    }
  }
  if (infer < 0) return sizes;
  // Cancel factors so that [seq, 4, 3] -> [3, -1] gives seq*4, not (seq*12)//3:
  // constant factors divide, symbolic ones cancel against equal input sizes.
  int64_t c_in = 1, c_known = 1;
  std::vector<SymInt> sym;
  for (const auto& s : x.sizes) {
    if (s.is_constant()) c_in *= s.constant_value();
    else sym.push_back(s);
  }
  bool cancels = true;
  for (size_t i = 0; i < sizes.size() && cancels; ++i) {
    if (int(i) == infer) continue;
    if (sizes[i].is_constant()) {
      c_known *= sizes[i].constant_value();
      continue;
    }
    auto it = std::find(sym.begin(), sym.end(), sizes[i]);
    if (it == sym.end()) cancels = false;
    else sym.erase(it);
  }
  if (cancels && c_known != 0 && c_in % c_known == 0) {
    SymInt r = c_in / c_known;
    for (const auto& s : sym) r = r * s;
    sizes[size_t(infer)] = r;
  } else {
    sizes[size_t(infer)] = floordiv(n_in, known);
  }
  return sizes;
}

/// A permutation view keeps the bytes of `x`: out dim i is in dim p[i], so the
/// out's dim order lists out dims in the physical order of x's dims.
Outs permuted_view(const TensorType& x, const std::vector<int>& p) {
  TensorType out = like(x, {}, x.dtype);
  for (int d : p) out.sizes.push_back(x.sizes[size_t(d)]);
  bool identity = true;
  for (int j = 0; j < x.rank(); ++j) {
    int phys = x.dim_order.empty() ? j : x.dim_order[size_t(j)];
    for (int i = 0; i < x.rank(); ++i) {
      if (p[size_t(i)] == phys) out.dim_order.push_back(uint8_t(i));
    }
    identity &= out.dim_order.back() == j;
  }
  if (identity) out.dim_order.clear();
  return one(std::move(out));
}

}  // namespace

Outs LtTensorOut(const Graph& g, const Args& a) { return binary(g, a, true, false); }
Outs GtTensorOut(const Graph& g, const Args& a) { return binary(g, a, true, false); }
Outs GeTensorOut(const Graph& g, const Args& a) { return binary(g, a, true, false); }
Outs EqTensorOut(const Graph& g, const Args& a) { return binary(g, a, true, false); }

Outs SumIntListOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(bool keepdim, bool_arg(a, 2, "keepdim"));
  HF2PTE_ASSIGN_OR_RETURN(auto sizes, reduced_sizes(*x, a[1], keepdim));
  // ATen: integral and bool inputs sum to i64 unless a dtype is given.
  ScalarType dt = is_floating(x->dtype) ? x->dtype : ScalarType::kLong;
  if (const auto* st = std::get_if<ScalarType>(&a[3])) dt = *st;
  return one(like(*x, std::move(sizes), dt));
}

Outs AmaxOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  return reduction(g, a, x->dtype);
}
Outs AminOut(const Graph& g, const Args& a) { return AmaxOut(g, a); }

Outs GatherOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(auto idx, tensor_arg(g, a, 2, "index"));
  if (idx->rank() != x->rank()) return make_error(ErrorCode::kInternal, "gather: index rank {} != self rank {}", idx->rank(), x->rank());
  return one(like(*x, idx->sizes, x->dtype));
}

Outs ExpandCopyOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(auto size, int_list_arg(a, 1, "size"));
  HF2PTE_ASSIGN_OR_RETURN(auto sizes, expanded_sizes(*x, size));
  return one(like(*x, std::move(sizes), x->dtype));
}
// expand is a view: without a broadcast dim it is the input itself, layout included.
Outs Expand(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto outs, ExpandCopyOut(g, a));
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  if (std::get<TensorType>(outs[0]).sizes == x->sizes) return one(*x);
  return outs;
}

/// A window's output size over one dim, (in + 2p - d(k-1) - 1) // s + 1, with
/// one constant offset (in + (2p - span)) when the window is static, so two
/// windows that shrink a symbolic size alike give the same expression.
SymInt window_output(const SymInt& in, const SymInt& kernel, const SymInt& stride, const SymInt& pad, const SymInt& dilation) {
  const SymInt span = dilation * (kernel - SymInt(1)) + SymInt(1);
  const SymInt grown = span.is_constant() && pad.is_constant() ? in + SymInt(2 * pad.constant_value() - span.constant_value())
                                                               : in + pad * SymInt(2) - span;
  return floordiv(grown, stride) + SymInt(1);
}

// out[n, o, h, w] over 2-D spatial dims: (H + 2p - d(k-1) - 1) // s + 1
Outs ConvolutionOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "input"));
  HF2PTE_ASSIGN_OR_RETURN(auto w, tensor_arg(g, a, 1, "weight"));
  HF2PTE_ASSIGN_OR_RETURN(auto stride, int_list_arg(a, 3, "stride"));
  HF2PTE_ASSIGN_OR_RETURN(auto padding, int_list_arg(a, 4, "padding"));
  HF2PTE_ASSIGN_OR_RETURN(auto dilation, int_list_arg(a, 5, "dilation"));
  HF2PTE_ASSIGN_OR_RETURN(bool transposed, bool_arg(a, 6, "transposed"));
  if (transposed) return make_error(ErrorCode::kNotSupported, "convolution: transposed convolution is not supported");
  if (x->rank() != 4 || w->rank() != 4 || stride.size() != 2 || padding.size() != 2 || dilation.size() != 2) {
    return make_error(ErrorCode::kNotSupported, "convolution: only 2-D (NCHW) convolutions are supported; input {}, weight {}",
                      shape_str(x->sizes), shape_str(w->sizes));
  }
  std::vector<SymInt> sizes{x->sizes[0], w->sizes[0]};
  for (size_t i = 0; i < 2; ++i) sizes.push_back(window_output(x->sizes[i + 2], w->sizes[i + 2], stride[i], padding[i], dilation[i]));
  return one(like(*x, std::move(sizes), x->dtype));
}

// values and int64 indices [n, c, oh, ow]: oh = (H + 2p - d(k-1) - 1) // s + 1
// (stride [] = kernel; ceil_mode is refused: the models we build never set it).
Outs MaxPool2dWithIndicesOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(auto kernel, int_list_arg(a, 1, "kernel_size"));
  HF2PTE_ASSIGN_OR_RETURN(auto stride, int_list_arg(a, 2, "stride"));
  HF2PTE_ASSIGN_OR_RETURN(auto padding, int_list_arg(a, 3, "padding"));
  HF2PTE_ASSIGN_OR_RETURN(auto dilation, int_list_arg(a, 4, "dilation"));
  HF2PTE_ASSIGN_OR_RETURN(bool ceil_mode, bool_arg(a, 5, "ceil_mode"));
  if (ceil_mode) return make_error(ErrorCode::kNotSupported, "max_pool2d_with_indices: ceil_mode is not supported");
  if (x->rank() != 4 || kernel.empty() || kernel.size() > 2 || stride.size() > 2 || padding.size() > 2 ||
      dilation.size() > 2) {
    return make_error(ErrorCode::kNotSupported, "max_pool2d_with_indices: expected a 4-D input and 1- or 2-element lists");
  }
  auto pick = [](const IntList& l, size_t i, SymInt dflt) { return l.empty() ? dflt : l[l.size() == 1 ? 0 : i]; };
  auto sizes = x->sizes;
  for (size_t i = 0; i < 2; ++i) {
    const SymInt k = pick(kernel, i, 1);
    sizes[i + 2] = window_output(x->sizes[i + 2], k, pick(stride, i, k), pick(padding, i, 0), pick(dilation, i, 1));
  }
  return std::vector<OutputType>{like(*x, sizes, x->dtype), like(*x, sizes, ScalarType::kLong)};
}

Outs RandOut(const Graph&, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto size, int_list_arg(a, 0, "size"));
  TensorType t;
  t.dtype = ScalarType::kFloat;
  t.sizes = std::move(size);
  return one(std::move(t));
}

Outs SplitTensor(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(int64_t chunk, const_int_arg(a, 1, "split_size"));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim, const_int_arg(a, 2, "dim"));
  HF2PTE_ASSIGN_OR_RETURN(int d, normalize_dim(dim, x->rank()));
  HF2PTE_ASSIGN_OR_RETURN(int64_t total, const_dim_size(*x, d, "split"));
  if (chunk < 1) return make_error(ErrorCode::kInternal, "split: split_size must be positive; got {}", chunk);
  return split_outputs(*x, d, even_pieces(total, chunk));
}

Outs SplitWithSizes(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(auto sizes, int_list_arg(a, 1, "split_sizes"));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim, const_int_arg(a, 2, "dim"));
  HF2PTE_ASSIGN_OR_RETURN(int d, normalize_dim(dim, x->rank()));
  HF2PTE_ASSIGN_OR_RETURN(int64_t total, const_dim_size(*x, d, "split_with_sizes"));
  std::vector<int64_t> pieces;
  int64_t sum = 0;
  for (const auto& s : sizes) {
    if (!s.is_constant() || s.constant_value() < 0) return make_error(ErrorCode::kNotSupported, "split_with_sizes: sizes must be constant");
    pieces.push_back(s.constant_value());
    sum += s.constant_value();
  }
  if (sum != total) return make_error(ErrorCode::kInternal, "split_with_sizes: sizes sum to {}, dim has {}", sum, total);
  return split_outputs(*x, d, pieces);
}

Outs Chunk(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(int64_t chunks, const_int_arg(a, 1, "chunks"));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim, const_int_arg(a, 2, "dim"));
  HF2PTE_ASSIGN_OR_RETURN(int d, normalize_dim(dim, x->rank()));
  HF2PTE_ASSIGN_OR_RETURN(int64_t total, const_dim_size(*x, d, "chunk"));
  if (chunks < 1) return make_error(ErrorCode::kInternal, "chunk: chunks must be positive; got {}", chunks);
  return split_outputs(*x, d, even_pieces(total, std::max<int64_t>((total + chunks - 1) / chunks, 1)));
}

Outs Topk(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(SymInt k, int_arg(a, 1, "k"));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim, const_int_arg(a, 2, "dim"));
  HF2PTE_ASSIGN_OR_RETURN(int d, normalize_dim(dim, x->rank()));
  auto sizes = x->sizes;
  sizes[size_t(d)] = k;
  return std::vector<OutputType>{like(*x, sizes, x->dtype), like(*x, sizes, ScalarType::kLong)};
}

// detach is a view: same type, layout included.
Outs Detach(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  return one(*x);
}

// out = (H + 2p - k) // s + 1 (ceil_mode: ceil-div, minus one if the last window starts in the right padding)
Outs AvgPool2d(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(auto kernel, int_list_arg(a, 1, "kernel_size"));
  HF2PTE_ASSIGN_OR_RETURN(auto stride, int_list_arg(a, 2, "stride"));
  HF2PTE_ASSIGN_OR_RETURN(auto padding, int_list_arg(a, 3, "padding"));
  HF2PTE_ASSIGN_OR_RETURN(bool ceil_mode, bool_arg(a, 4, "ceil_mode"));
  if (x->rank() != 3 && x->rank() != 4) return make_error(ErrorCode::kInternal, "avg_pool2d: input must be 3-D or 4-D");
  auto pick = [](const IntList& l, size_t i, SymInt dflt) { return l.empty() ? dflt : l[l.size() == 1 ? 0 : i]; };
  auto sizes = x->sizes;
  for (size_t i = 0; i < 2; ++i) {
    SymInt k = pick(kernel, i, 1), s = pick(stride, i, k), p = pick(padding, i, 0);
    SymInt in = x->sizes[size_t(x->rank() - 2) + i];
    // The seed clamps the window to the padded input (decompositions.cpp does the same).
    if (k.is_constant() && in.is_constant() && p.is_constant()) {
      k = std::min(k.constant_value(), in.constant_value() + 2 * p.constant_value());
    }
    SymInt span = in + p * SymInt(2) - k;
    SymInt o = (ceil_mode ? ceildiv(span, s) : floordiv(span, s)) + SymInt(1);
    if (ceil_mode && o.is_constant() && in.is_constant() && p.is_constant() && s.is_constant() &&
        (o.constant_value() - 1) * s.constant_value() >= in.constant_value() + p.constant_value()) {
      o = o - SymInt(1);
    }
    sizes[size_t(x->rank() - 2) + i] = o;
  }
  return one(like(*x, std::move(sizes), x->dtype));
}

Outs AdaptiveAvgPool2d(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(auto out, int_list_arg(a, 1, "output_size"));
  if (x->rank() < 3 || out.size() != 2) return make_error(ErrorCode::kInternal, "adaptive_avg_pool2d: input must be 3-D or 4-D");
  auto sizes = x->sizes;
  sizes[sizes.size() - 2] = out[0];
  sizes[sizes.size() - 1] = out[1];
  return one(like(*x, std::move(sizes), x->dtype));
}

Outs BucketizeTensor(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(bool out_int32, bool_arg(a, 2, "out_int32"));
  return one(like(*x, x->sizes, out_int32 ? ScalarType::kInt : ScalarType::kLong));
}

Outs SearchsortedTensor(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 1, "self"));
  HF2PTE_ASSIGN_OR_RETURN(bool out_int32, bool_arg(a, 2, "out_int32"));
  return one(like(*x, x->sizes, out_int32 ? ScalarType::kInt : ScalarType::kLong));
}

Outs Cummax(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim, const_int_arg(a, 1, "dim"));
  HF2PTE_RETURN_IF_ERROR(normalize_dim(dim, x->rank()).status());
  return std::vector<OutputType>{like(*x, x->sizes, x->dtype), like(*x, x->sizes, ScalarType::kLong)};
}
Outs Cummin(const Graph& g, const Args& a) { return Cummax(g, a); }

Outs Bernoulli(const Graph& g, const Args& a) { return same_as_first(g, a); }
Outs BernoulliP(const Graph& g, const Args& a) { return same_as_first(g, a); }

Outs Permute(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(auto p, permutation_arg(a, 1, x->rank()));
  return permuted_view(*x, p);
}

Outs TransposeInt(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(int64_t d0, const_int_arg(a, 1, "dim0"));
  HF2PTE_ASSIGN_OR_RETURN(int64_t d1, const_int_arg(a, 2, "dim1"));
  HF2PTE_ASSIGN_OR_RETURN(int n0, normalize_dim(d0, x->rank()));
  HF2PTE_ASSIGN_OR_RETURN(int n1, normalize_dim(d1, x->rank()));
  std::vector<int> p(size_t(x->rank()));
  for (int i = 0; i < x->rank(); ++i) p[size_t(i)] = i;
  std::swap(p[size_t(n0)], p[size_t(n1)]);
  return permuted_view(*x, p);
}

Outs Reshape(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(auto shape, int_list_arg(a, 1, "shape"));
  HF2PTE_ASSIGN_OR_RETURN(auto sizes, view_sizes(*x, std::move(shape)));
  return ViewCopyOut(g, {a[0], IntList(sizes)});
}
Outs View(const Graph& g, const Args& a) { return Reshape(g, a); }

// ---- data-dependent output sizes ----
// These shape functions also get the id of the node's first output: their
// fresh unbacked symbol is named "u<id>", so re-inferring the node (the
// verifier) yields the same symbol and rewrites, which keep output ids, keep it.
namespace {

/// A data-dependent size in [0, bound]; a non-finite bound (an unbounded dim)
/// declares none, which the verifier rejects by name.
SymInt fresh_unbacked(ValueId first_output, int64_t bound) {
  return SymInt::unbacked(fmt::format("u{}", first_output),
                          bound == DimRange::kUnbounded ? std::nullopt : std::optional<int64_t>(bound));
}

// out = int64 [u, self.dim()]: one row of coordinates per non-zero element, u <= numel(self).
Outs nonzero_sizes(const Graph& g, const Args& a, ValueId first_output) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  SymInt numel = 1;
  for (const auto& s : x->sizes) numel = numel * s;
  return one(like(*x, {fresh_unbacked(first_output, numel.upper_bound(g.dims())), SymInt(x->rank())}, ScalarType::kLong));
}

// out = self.dtype [u]: the elements where the bool mask is set, u <= numel(broadcast(self, mask)).
Outs masked_select_sizes(const Graph& g, const Args& a, ValueId first_output) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(auto m, tensor_arg(g, a, 1, "mask"));
  if (m->dtype != ScalarType::kBool) {
    return make_error(ErrorCode::kInternal, "masked_select: mask must be bool; got {}", scalar_type_name(m->dtype));
  }
  HF2PTE_ASSIGN_OR_RETURN(auto sizes, broadcast_shapes(x->sizes, m->sizes));
  SymInt numel = 1;
  for (const auto& s : sizes) numel = numel * s;
  return one(like(*x, {fresh_unbacked(first_output, numel.upper_bound(g.dims()))}, x->dtype));
}

}  // namespace

/// Graph::add_node's view: the first output gets the next value id.
Outs NonzeroOut(const Graph& g, const Args& a) { return nonzero_sizes(g, a, ValueId(g.num_values())); }
Outs MaskedSelectOut(const Graph& g, const Args& a) { return masked_select_sizes(g, a, ValueId(g.num_values())); }


// ---- quantized_decomposed (docs/quantization.md) ----

Outs ChooseQparamsPerTokenAsymmetricOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "input"));
  if (x->rank() < 1) return make_error(ErrorCode::kInternal, "choose_qparams_per_token_asymmetric: input must have rank >= 1");
  auto sizes = x->sizes;
  sizes.back() = SymInt(1);
  return std::vector<OutputType>{like(*x, sizes, ScalarType::kDouble), like(*x, sizes, ScalarType::kLong)};
}

Outs QuantizePerTokenOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "input"));
  return one(like(*x, x->sizes, ScalarType::kChar));
}

Outs DequantizePerTokenOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "input"));
  return one(like(*x, x->sizes, ScalarType::kFloat));
}

Outs MixedLinearOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto x, tensor_arg(g, a, 0, "input"));
  HF2PTE_ASSIGN_OR_RETURN(auto w, tensor_arg(g, a, 1, "weight"));
  if (x->rank() != 2 || w->rank() != 2) return make_error(ErrorCode::kInternal, "mixed_linear: input and weight must be 2-D");
  return one(like(*x, {x->sizes[0], w->sizes[0]}, ScalarType::kFloat));
}

namespace {
Outs embedding_xbit(const Graph& g, const Args& a, int64_t per_byte) {
  HF2PTE_ASSIGN_OR_RETURN(auto w, tensor_arg(g, a, 0, "weight"));
  HF2PTE_ASSIGN_OR_RETURN(auto idx, tensor_arg(g, a, 5, "indices"));
  if (w->rank() != 2 || !w->sizes[1].is_constant()) {
    return make_error(ErrorCode::kInternal, "quantized embedding: weight must be 2-D with a static width");
  }
  auto sizes = idx->sizes;
  sizes.push_back(SymInt(w->sizes[1].constant_value() * per_byte));
  return one(like(*w, std::move(sizes), ScalarType::kFloat));
}
}  // namespace

Outs EmbeddingByteOut(const Graph& g, const Args& a) { return embedding_xbit(g, a, 1); }
Outs Embedding4bitOut(const Graph& g, const Args& a) { return embedding_xbit(g, a, 2); }

// ---- upstream's LLM custom ops (--use-custom-sdpa) ----

Outs LlamaUpdateCacheOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto v, tensor_arg(g, a, 0, "value"));
  HF2PTE_ASSIGN_OR_RETURN(auto c, tensor_arg(g, a, 1, "cache"));
  if (v->rank() != 4 || c->rank() != 4) return make_error(ErrorCode::kInternal, "update_cache: value and cache must be 4-D");
  return one(like(*v, {SymInt(1)}, v->dtype));
}

Outs LlamaCustomSdpaOut(const Graph& g, const Args& a) {
  HF2PTE_ASSIGN_OR_RETURN(auto q, tensor_arg(g, a, 0, "query"));
  HF2PTE_ASSIGN_OR_RETURN(auto k, tensor_arg(g, a, 1, "key"));
  if (q->rank() != 4 || k->rank() != 4) return make_error(ErrorCode::kInternal, "custom_sdpa: query and key must be 4-D");
  return one(like(*q, q->sizes, q->dtype));
}

}  // namespace shapes

namespace {

// _to_dim_order_copy.out converts to its out's dtype, which no argument
// states: a node made by the cast lowering keeps the dtype its out was given
// (Graph::add makes the out in the input's dtype).
Outs to_dim_order_copy_types(const Graph& g, const Args& a, ValueId first_output) {
  HF2PTE_ASSIGN_OR_RETURN(auto outs, shapes::ToDimOrderCopyOut(g, a));
  if (size_t(first_output) < g.num_values() && g.value(first_output).role == ValueRole::kActivation) {
    std::get<TensorType>(outs[0]).dtype = g.type(first_output).dtype;
  }
  return outs;
}

struct DataDependentShape {
  OpId op;
  Outs (*fn)(const Graph&, const Args&, ValueId first_output);
};
constexpr DataDependentShape kDataDependentShapes[] = {
    {OpId::NonzeroOut, &shapes::nonzero_sizes},
    {OpId::MaskedSelectOut, &shapes::masked_select_sizes},
    {OpId::ToDimOrderCopyOut, &to_dim_order_copy_types},
};

}  // namespace

Result<std::vector<OutputType>> infer_outputs(const Graph& g, OpId op, const std::vector<Arg>& args,
                                              std::optional<ValueId> first_output) {
  for (const auto& d : kDataDependentShapes) {
    if (d.op == op) return d.fn(g, args, first_output.value_or(ValueId(g.num_values())));
  }
  using Fn = Outs (*)(const Graph&, const Args&);
  static constexpr std::array<Fn, size_t(OpId::kCount)> kShapeFns = {{
#define HF2PTE_KERNEL_OP(id, name, overload, schema) &shapes::id,
#define HF2PTE_GRAPH_OP(id, name, overload, schema) &shapes::id,
#include "ops/ops.def"
#undef HF2PTE_KERNEL_OP
#undef HF2PTE_GRAPH_OP
  }};
  return kShapeFns[size_t(op)](g, args);
}

}  // namespace hf2pte::graph
