// Data-movement kernels: view_copy, permute_copy, slice_copy, cat, clone and
// _to_dim_order_copy. They read and write through strides, so inputs and outs
// in any dim order (e.g. channels-last) are handled by the same loops.
#include <cstring>
#include <limits>

#include <fmt/ranges.h>

#include "kernels/portable/kernel_util.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

namespace {

/// ATen's canCast within f32 / f16 / bf16 / i64 / bool: no float -> integer, no number -> bool.
bool can_cast(ScalarType from, ScalarType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  if (from != ScalarType::kBool && to == ScalarType::kBool) return false;
  return true;
}

/// dst[dst_off + idx . dst_st] = convert(src[src_off + idx . src_st]) for
/// every idx of `sizes`; converts between the dtypes of src and dst.
Status copy_elements(OpId op, std::span<const int64_t> sizes, rt::Tensor& dst,
                     const DimArray& dst_st, int64_t dst_off, const rt::Tensor& src,
                     const DimArray& src_st, int64_t src_off) {
  return dispatch<kStandard>(src.dtype(), op, "self", [&](auto ts) {
    using S = typename decltype(ts)::type;
    return dispatch<kStandard>(dst.dtype(), op, "out", [&](auto td) {
      using D = typename decltype(td)::type;
      const S* ps = src.data<S>() + src_off;
      D* pd = dst.data<D>() + dst_off;
      for_each_offset<2>(sizes, std::array<DimArray, 2>{dst_st, src_st},
                         [&](const std::array<int64_t, 2>& o) {
                           pd[o[0]] = convert<D>(load(ps + o[1]));
                         });
    });
  });
}

/// Copies `src` into `dst` (same dtype, same numel, possibly different
/// shapes) in row-major logical order.
Status copy_reshape(OpId op, rt::Tensor& dst, const rt::Tensor& src) {
  if (src.numel() == 0) return Status::ok();
  if (src.is_contiguous() && dst.is_contiguous()) {
    // Contiguous on both sides: logical order is memory order.
    std::memcpy(dst.raw_data(), src.raw_data(), src.nbytes());
    return Status::ok();
  }
  return dispatch<kStandard>(src.dtype(), op, "self", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* ps = src.data<T>();
    T* pd = dst.data<T>();
    // Walk src with the strided loop and dst with its own odometer.
    const int drank = dst.dim();
    DimArray didx{};
    int64_t doff = 0;
    for_each_offset<1>(src.sizes(), std::array<DimArray, 1>{strides_of(src)},
                       [&](const std::array<int64_t, 1>& o) {
                         pd[doff] = load(ps + o[0]);
                         for (int d = drank - 1; d >= 0; --d) {
                           const size_t u = size_t(d);
                           if (++didx[u] < dst.sizes()[u]) {
                             doff += dst.strides()[u];
                             break;
                           }
                           doff -= dst.strides()[u] * (dst.sizes()[u] - 1);
                           didx[u] = 0;
                         }
                       });
  });
}

Status check_same_dtype(const rt::Tensor& self, const rt::Tensor& out, OpId op) {
  HF2PTE_CHECK_OR_RETURN(self.dtype() == out.dtype(), kInvalidArgument,
                         "{}: out dtype must match self; expected {}, got {}", op_key(op),
                         scalar_type_name(self.dtype()), scalar_type_name(out.dtype()));
  if (!kStandard.contains(self.dtype())) {
    return unsupported_dtype(op, "self", self.dtype(), kStandard);
  }
  return Status::ok();
}

}  // namespace

Status ViewCopyOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::ViewCopyOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * self, r.tensor(0));
  std::vector<int64_t> shape;
  HF2PTE_RETURN_IF_ERROR(r.int_list(1, &shape));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(2));
  HF2PTE_RETURN_IF_ERROR(check_same_dtype(*self, *out, op));

  // Infer at most one -1 from the element count.
  int infer = -1;
  int64_t known = 1;
  bool valid = true;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1 && infer < 0) {
      infer = int(d);
    } else if (shape[d] < 0) {
      valid = false;
    } else if (shape[d] != 0 && known > std::numeric_limits<int64_t>::max() / shape[d]) {
      valid = false;  // the product overflows: cannot match any real numel
    } else {
      known *= shape[d];
    }
  }
  if (valid && infer >= 0) {
    valid = known != 0 && self->numel() % known == 0;
    if (valid) shape[size_t(infer)] = self->numel() / known;
  } else if (valid) {
    valid = known == self->numel();
  }
  HF2PTE_CHECK_OR_RETURN(valid, kInvalidArgument, "{}: shape {} is invalid for input of size {}",
                         op_key(op), format_shape(shape), self->numel());
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, shape, op));
  HF2PTE_RETURN_IF_ERROR(copy_reshape(op, *out, *self));
  r.set_return(2);
  return Status::ok();
}

Status PermuteCopyOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::PermuteCopyOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * self, r.tensor(0));
  std::vector<int64_t> dims;
  HF2PTE_RETURN_IF_ERROR(r.int_list(1, &dims));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(2));
  HF2PTE_RETURN_IF_ERROR(check_same_dtype(*self, *out, op));
  const int rank = self->dim();
  HF2PTE_CHECK_OR_RETURN(int(dims.size()) == rank, kInvalidArgument,
                         "{}: dims {} must list each of the {} dims of self once", op_key(op),
                         format_shape(dims), rank);
  // out dim i reads self dim dims[i].
  std::vector<int64_t> shape(static_cast<size_t>(rank), 0);
  DimArray src_st{};
  uint32_t seen = 0;
  for (int i = 0; i < rank; ++i) {
    HF2PTE_ASSIGN_OR_RETURN(int64_t d, normalize_dim(dims[size_t(i)], rank, op));
    HF2PTE_CHECK_OR_RETURN(!(seen & (uint32_t(1) << d)), kInvalidArgument,
                           "{}: dims {} repeat dim {}", op_key(op), format_shape(dims), d);
    seen |= uint32_t(1) << d;
    shape[size_t(i)] = self->sizes()[size_t(d)];
    src_st[size_t(i)] = self->strides()[size_t(d)];
  }
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, shape, op));
  HF2PTE_RETURN_IF_ERROR(copy_elements(op, shape, *out, strides_of(*out), 0, *self, src_st, 0));
  r.set_return(2);
  return Status::ok();
}

Status SliceCopyTensorOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::SliceCopyTensorOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * self, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim_arg, r.int_arg(1));
  HF2PTE_ASSIGN_OR_RETURN(std::optional<int64_t> start_arg, r.opt_int(2));
  HF2PTE_ASSIGN_OR_RETURN(std::optional<int64_t> end_arg, r.opt_int(3));
  HF2PTE_ASSIGN_OR_RETURN(int64_t step, r.int_arg(4));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(5));
  HF2PTE_RETURN_IF_ERROR(check_same_dtype(*self, *out, op));
  HF2PTE_CHECK_OR_RETURN(self->dim() > 0, kInvalidArgument,
                         "{}: slice() cannot be applied to a 0-dim tensor", op_key(op));
  HF2PTE_CHECK_OR_RETURN(step > 0, kInvalidArgument, "{}: slice step must be positive; got {}",
                         op_key(op), step);
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim, normalize_dim(dim_arg, self->dim(), op));
  const auto [start, end] = slice_bounds(start_arg, end_arg, self->size(int(dim)));
  const int64_t len = (end - start + step - 1) / step;

  std::vector<int64_t> shape(self->sizes().begin(), self->sizes().end());
  shape[size_t(dim)] = len;
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, shape, op));
  DimArray src_st = strides_of(*self);
  const int64_t base = start * src_st[size_t(dim)];
  src_st[size_t(dim)] *= step;
  HF2PTE_RETURN_IF_ERROR(
      copy_elements(op, shape, *out, strides_of(*out), 0, *self, src_st, len > 0 ? base : 0));
  r.set_return(5);
  return Status::ok();
}

Status CatOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::CatOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  std::vector<rt::Tensor*> all;
  HF2PTE_RETURN_IF_ERROR(r.tensor_list(0, &all));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim_arg, r.int_arg(1));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(2));
  if (!kStandard.contains(out->dtype())) {
    return unsupported_dtype(op, "out", out->dtype(), kStandard);
  }
  // Legacy torch behaviour: 1-D empty tensors ([0]) are skipped whatever
  // their rank relative to the others.
  std::vector<const rt::Tensor*> inputs;
  for (size_t k = 0; k < all.size(); ++k) {
    const rt::Tensor* t = all[k];
    if (!kStandard.contains(t->dtype())) {
      return unsupported_dtype(op, fmt::format("tensors[{}]", k), t->dtype(), kStandard);
    }
    HF2PTE_CHECK_OR_RETURN(can_cast(t->dtype(), out->dtype()), kInvalidArgument,
                           "{}: tensors[{}] of dtype {} cannot be cast to out dtype {}",
                           op_key(op), k, scalar_type_name(t->dtype()),
                           scalar_type_name(out->dtype()));
    if (t->dim() == 1 && t->size(0) == 0) continue;
    inputs.push_back(t);
  }
  if (inputs.empty()) {
    // Only skipped (or no) inputs: torch returns an empty 1-D tensor.
    const int64_t empty[] = {0};
    HF2PTE_RETURN_IF_ERROR(resize_out(*out, empty, op));
    r.set_return(2);
    return Status::ok();
  }
  const rt::Tensor& ref = *inputs.front();
  const int rank = ref.dim();
  HF2PTE_CHECK_OR_RETURN(rank > 0, kInvalidArgument,
                         "{}: zero-dimensional tensors cannot be concatenated", op_key(op));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim, normalize_dim(dim_arg, rank, op));
  std::vector<int64_t> shape(ref.sizes().begin(), ref.sizes().end());
  shape[size_t(dim)] = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const rt::Tensor& t = *inputs[k];
    HF2PTE_CHECK_OR_RETURN(t.dim() == rank, kInvalidArgument,
                           "{}: tensors must have the same rank; expected {}, got shape {}",
                           op_key(op), rank, format_shape(t.sizes()));
    for (int d = 0; d < rank; ++d) {
      HF2PTE_CHECK_OR_RETURN(
          d == dim || t.size(d) == ref.size(d), kInvalidArgument,
          "{}: sizes of tensors must match except in dimension {}; expected {} in dimension {}, got shape {}",
          op_key(op), dim, ref.size(d), d, format_shape(t.sizes()));
    }
    shape[size_t(dim)] += t.size(int(dim));
  }
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, shape, op));
  const DimArray out_st = strides_of(*out);
  int64_t at = 0;
  for (const rt::Tensor* t : inputs) {
    HF2PTE_RETURN_IF_ERROR(copy_elements(op, t->sizes(), *out, out_st, at * out_st[size_t(dim)],
                                         *t, strides_of(*t), 0));
    at += t->size(int(dim));
  }
  r.set_return(2);
  return Status::ok();
}

Status CloneOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::CloneOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * self, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(std::optional<int64_t> memory_format, r.opt_int(1));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(2));
  HF2PTE_RETURN_IF_ERROR(check_same_dtype(*self, *out, op));
  // c10::MemoryFormat: 0 contiguous, 1 preserve. Either way the out's planned
  // dim order decides the layout, and the strided copy honours it.
  HF2PTE_CHECK_OR_RETURN(!memory_format || *memory_format == 0 || *memory_format == 1,
                         kNotSupported,
                         "{}: memory_format {} is not supported; expected None, 0 (contiguous) or 1 (preserve)",
                         op_key(op), *memory_format);
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, self->sizes(), op));
  HF2PTE_RETURN_IF_ERROR(
      copy_elements(op, self->sizes(), *out, strides_of(*out), 0, *self, strides_of(*self), 0));
  r.set_return(2);
  return Status::ok();
}

Status ToDimOrderCopyOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::ToDimOrderCopyOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * self, r.tensor(0));
  HF2PTE_RETURN_IF_ERROR(r.bool_arg(1).status());  // non_blocking: meaningless on CPU
  std::vector<int64_t> dim_order;
  HF2PTE_RETURN_IF_ERROR(r.int_list(2, &dim_order, /*optional=*/true));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(3));
  if (!kStandard.contains(self->dtype())) {
    return unsupported_dtype(op, "self", self->dtype(), kStandard);
  }
  if (!kStandard.contains(out->dtype())) {
    return unsupported_dtype(op, "out", out->dtype(), kStandard);
  }
  // The out's planned dim order must be the requested one (None or [] means
  // contiguous), as ExecuTorch checks; the copy itself is layout-agnostic.
  const auto out_order = out->dim_order();
  if (dim_order.empty()) {
    HF2PTE_CHECK_OR_RETURN(is_contiguous_dim_order(out_order), kInvalidArgument,
                           "{}: dim_order None asks for a contiguous out; out has dim order [{}]",
                           op_key(op), fmt::join(out_order, ", "));
  } else {
    bool same = dim_order.size() == out_order.size();
    for (size_t i = 0; same && i < dim_order.size(); ++i) same = dim_order[i] == out_order[i];
    HF2PTE_CHECK_OR_RETURN(same, kInvalidArgument,
                           "{}: dim_order {} does not match out's dim order [{}]", op_key(op),
                           format_shape(dim_order), fmt::join(out_order, ", "));
  }
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, self->sizes(), op));
  HF2PTE_RETURN_IF_ERROR(
      copy_elements(op, self->sizes(), *out, strides_of(*out), 0, *self, strides_of(*self), 0));
  r.set_return(3);
  return Status::ok();
}

}  // namespace hf2pte::kernels
