// Reductions: mean over a dim list and numerically stable softmax. Both read
// f32 (or f16/bf16, widened exactly) and accumulate in double, rounding once, because the end-to-end target (1e-4 on
// logits against a float64 reference) leaves no room for float32 sums over
// long rows.
#include <cmath>
#include <limits>

#include "kernels/portable/dtype_dispatch.h"
#include "kernels/portable/kernel_util.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

Status MeanOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::MeanOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * self, r.tensor(0));
  std::vector<int64_t> dims;
  HF2PTE_RETURN_IF_ERROR(r.int_list(1, &dims, /*optional=*/true));
  HF2PTE_ASSIGN_OR_RETURN(bool keepdim, r.bool_arg(2));
  HF2PTE_ASSIGN_OR_RETURN(std::optional<int64_t> dtype, r.opt_int(3));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(4));

  // ATen cannot infer an integral mean; we compute float types only.
  if (!kFloating.contains(self->dtype())) return unsupported_dtype(op, "self", self->dtype(), kFloating);
  if (!kFloating.contains(out->dtype())) return unsupported_dtype(op, "out", out->dtype(), kFloating);
  HF2PTE_CHECK_OR_RETURN(!dtype || *dtype == int64_t(out->dtype()), kNotSupported,
                         "{}: dtype argument {} is not supported; expected None or the out's dtype ({})",
                         op_key(op), *dtype, int(out->dtype()));

  // Which dims are reduced: None or [] means all of them, as in ATen.
  const int rank = self->dim();
  uint32_t reduced = 0;
  if (dims.empty()) {
    reduced = rank == 0 ? 0 : (uint32_t(1) << rank) - 1;
  }
  for (int64_t d : dims) {
    HF2PTE_ASSIGN_OR_RETURN(int64_t nd, normalize_dim(d, rank, op));
    HF2PTE_CHECK_OR_RETURN(!(reduced & (uint32_t(1) << nd)), kInvalidArgument,
                           "{}: dim {} appears multiple times in the list of dims", op_key(op), d);
    if (rank > 0) reduced |= uint32_t(1) << nd;
  }

  // Split self's dims into kept (iterated per output element) and reduced
  // (summed), mapping kept dims onto out's dims.
  DimArray out_shape{}, kept_sizes{}, red_sizes{};
  int out_rank = 0, n_kept = 0, n_red = 0;
  DimArray kept_in{}, red_in{};
  std::array<int, kMaxTensorRank> kept_out_dim{};
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    const int64_t size = self->sizes()[size_t(d)];
    if (reduced & (uint32_t(1) << d)) {
      red_sizes[size_t(n_red)] = size;
      red_in[size_t(n_red++)] = self->strides()[size_t(d)];
      count *= size;
      if (keepdim) out_shape[size_t(out_rank++)] = 1;
    } else {
      kept_sizes[size_t(n_kept)] = size;
      kept_in[size_t(n_kept)] = self->strides()[size_t(d)];
      kept_out_dim[size_t(n_kept++)] = out_rank;
      out_shape[size_t(out_rank++)] = size;
    }
  }
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, std::span(out_shape.data(), size_t(out_rank)), op));
  DimArray kept_out{};
  for (int k = 0; k < n_kept; ++k) {
    kept_out[size_t(k)] = out->strides()[size_t(kept_out_dim[size_t(k)])];
  }

  const std::span<const int64_t> red_span(red_sizes.data(), size_t(n_red));
  const std::array<DimArray, 1> red_strides{red_in};
  HF2PTE_RETURN_IF_ERROR(dispatch<kFloating>(self->dtype(), op, "self", [&](auto ti) {
    using I = typename decltype(ti)::type;
    return dispatch<kFloating>(out->dtype(), op, "out", [&](auto to) {
      using O = typename decltype(to)::type;
      const I* in = self->data<I>();
      O* po = out->data<O>();
      for_each_offset<2>(std::span<const int64_t>(kept_sizes.data(), size_t(n_kept)),
                         std::array<DimArray, 2>{kept_out, kept_in},
                         [&](const std::array<int64_t, 2>& o) {
                           double sum = 0.0;
                           const I* base = in + o[1];
                           for_each_offset<1>(red_span, red_strides,
                                              [&](const std::array<int64_t, 1>& q) { sum += float(base[q[0]]); });
                           // count == 0 gives NaN, as torch.mean of an empty dim does.
                           po[o[0]] = O(float(sum / double(count)));
                         });
    });
  }));
  r.set_return(4);
  return Status::ok();
}

Status SoftmaxOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::SoftmaxOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * self, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim_arg, r.int_arg(1));
  HF2PTE_ASSIGN_OR_RETURN(bool half_to_float, r.bool_arg(2));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(3));
  if (!kFloating.contains(self->dtype())) return unsupported_dtype(op, "self", self->dtype(), kFloating);
  HF2PTE_CHECK_OR_RETURN(out->dtype() == self->dtype(), kNotSupported, "{}: out has dtype {}; expected self's ({})",
                         op_key(op), scalar_type_name(out->dtype()), scalar_type_name(self->dtype()));
  HF2PTE_CHECK_OR_RETURN(!half_to_float, kNotSupported,
                         "{}: half_to_float=True is not supported (the out has self's dtype)", op_key(op));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim, normalize_dim(dim_arg, self->dim(), op));
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, self->sizes(), op));

  // Iterate over every row (all dims but `dim`), then walk the row by stride.
  const int rank = self->dim();
  DimArray outer{};
  for (int d = 0; d < rank; ++d) outer[size_t(d)] = self->sizes()[size_t(d)];
  int64_t n = 1, in_step = 0, out_step = 0;
  if (rank > 0) {
    n = outer[size_t(dim)];
    in_step = self->strides()[size_t(dim)];
    out_step = out->strides()[size_t(dim)];
    outer[size_t(dim)] = 1;
  }
  HF2PTE_RETURN_IF_ERROR(dispatch<kFloating>(self->dtype(), op, "self", [&](auto tt) {
    using T = typename decltype(tt)::type;
    const T* in = self->data<T>();
    T* po = out->data<T>();
    for_each_offset<2>(std::span<const int64_t>(outer.data(), size_t(rank)),
                       std::array<DimArray, 2>{strides_of(*out), strides_of(*self)},
                       [&](const std::array<int64_t, 2>& o) {
                         const T* x = in + o[1];
                         T* y = po + o[0];
                         // Max with NaN propagation (torch's max does): a NaN
                         // anywhere makes the whole row NaN below.
                         double m = -std::numeric_limits<double>::infinity();
                         for (int64_t i = 0; i < n; ++i) {
                           const double v = float(x[i * in_step]);
                           if (std::isnan(v)) {
                             m = v;
                             break;
                           }
                           m = v > m ? v : m;
                         }
                         // A row of only -inf gives exp(-inf - -inf) = NaN, as
                         // in torch; -inf next to a finite max gives exp(-inf) = 0.
                         double sum = 0.0;
                         for (int64_t i = 0; i < n; ++i) sum += std::exp(double(float(x[i * in_step])) - m);
                         const double inv = 1.0 / sum;
                         for (int64_t i = 0; i < n; ++i) {
                           y[i * out_step] = T(float(std::exp(double(float(x[i * in_step])) - m) * inv));
                         }
                       });
  }));
  r.set_return(3);
  return Status::ok();
}

}  // namespace hf2pte::kernels
