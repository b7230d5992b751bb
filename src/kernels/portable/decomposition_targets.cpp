// Kernels for the ops the decomposition rules lower to (export/decompositions.cpp):
// comparisons (lt/gt/ge/eq), sum/amax/amin over a dim list, gather, expand_copy,
// 2-D convolution and rand. Upstream portable schemas; all loops go through
// strides. Dtypes: f32 everywhere; i64 (and i32, bool where the rules need them).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/portable/elementwise.h"
#include "kernels/portable/kernel_util.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

namespace {

inline constexpr DTypeSet kReduceOut = kFloating | DTypeSet{ScalarType::kLong, ScalarType::kInt};
inline constexpr DTypeSet kReduceIn = kReduceOut | DTypeSet{ScalarType::kBool};
/// What comparisons compute in: a 16-bit operand widens to f32 exactly.
inline constexpr DTypeSet kCompareCompute{ScalarType::kFloat, ScalarType::kLong, ScalarType::kBool};

template <typename Cmp>
Status compare(OpId op, std::span<rt::EValue*> args, Cmp cmp) {
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * a, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * b, r.tensor(1));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(2));
  const ScalarType ct = compute_type(promote_types(a->dtype(), b->dtype()));
  HF2PTE_RETURN_IF_ERROR(dispatch<kCompareCompute>(ct, op, "computation", [&](auto tc) {
    using CT = typename decltype(tc)::type;
    return map_binary<CT>(op, *a, *b, *out, [&](CT x, CT y) -> bool { return cmp(x, y); });
  }));
  r.set_return(2);
  return Status::ok();
}

/// The kept and reduced dims of a reduction over `dims` ([] = all), with strides.
struct ReducePlan {
  DimArray kept_sizes{}, kept_in{}, kept_out{}, red_sizes{}, red_in{};
  int n_kept = 0, n_red = 0;
  int64_t count = 1;
};

Result<ReducePlan> plan_reduction(OpId op, const rt::Tensor& self, const std::vector<int64_t>& dims, bool keepdim,
                                  rt::Tensor& out) {
  const int rank = self.dim();
  uint32_t reduced = dims.empty() && rank > 0 ? (uint32_t(1) << rank) - 1 : 0;
  for (int64_t d : dims) {
    HF2PTE_ASSIGN_OR_RETURN(int64_t nd, normalize_dim(d, rank, op));
    HF2PTE_CHECK_OR_RETURN(!(reduced & (uint32_t(1) << nd)), kInvalidArgument,
                           "{}: dim {} appears multiple times in the list of dims", op_key(op), d);
    if (rank > 0) reduced |= uint32_t(1) << nd;
  }
  ReducePlan p;
  DimArray out_shape{};
  std::array<int, kMaxTensorRank> kept_out_dim{};
  int out_rank = 0;
  for (int d = 0; d < rank; ++d) {
    const int64_t size = self.sizes()[size_t(d)];
    if (reduced & (uint32_t(1) << d)) {
      p.red_sizes[size_t(p.n_red)] = size;
      p.red_in[size_t(p.n_red++)] = self.strides()[size_t(d)];
      p.count *= size;
      if (keepdim) out_shape[size_t(out_rank++)] = 1;
    } else {
      p.kept_sizes[size_t(p.n_kept)] = size;
      p.kept_in[size_t(p.n_kept)] = self.strides()[size_t(d)];
      kept_out_dim[size_t(p.n_kept++)] = out_rank;
      out_shape[size_t(out_rank++)] = size;
    }
  }
  HF2PTE_RETURN_IF_ERROR(resize_out(out, std::span(out_shape.data(), size_t(out_rank)), op));
  for (int k = 0; k < p.n_kept; ++k) p.kept_out[size_t(k)] = out.strides()[size_t(kept_out_dim[size_t(k)])];
  return p;
}

/// out[kept] = finish(fold(init, self[kept, reduced...])) with typed input X and out O.
template <typename Acc, typename X, typename O, typename Fold>
void run_reduction(const ReducePlan& p, const rt::Tensor& self, rt::Tensor& out, Acc init, Fold fold) {
  const X* in = self.data<X>();
  O* po = out.data<O>();
  const std::span<const int64_t> red_span(p.red_sizes.data(), size_t(p.n_red));
  const std::array<DimArray, 1> red_strides{p.red_in};
  for_each_offset<2>(std::span<const int64_t>(p.kept_sizes.data(), size_t(p.n_kept)),
                     std::array<DimArray, 2>{p.kept_out, p.kept_in}, [&](const std::array<int64_t, 2>& o) {
                       Acc acc = init;
                       // An empty input (a data-dependent size of 0) may have no storage:
                       // no offset is applied to it, and the fold below runs zero times.
                       const X* base = self.numel() == 0 ? in : in + o[1];
                       for_each_offset<1>(red_span, red_strides, [&](const std::array<int64_t, 1>& q) {
                         acc = fold(acc, load(base + q[0]));
                       });
                       po[o[0]] = convert<O>(acc);
                     });
}

template <bool kMax>
Status min_max(OpId op, std::span<rt::EValue*> args) {
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * self, r.tensor(0));
  std::vector<int64_t> dims;
  HF2PTE_RETURN_IF_ERROR(r.int_list(1, &dims));
  HF2PTE_ASSIGN_OR_RETURN(bool keepdim, r.bool_arg(2));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(3));
  HF2PTE_CHECK_OR_RETURN(out->dtype() == self->dtype(), kInvalidArgument, "{}: out dtype {} must equal self dtype {}",
                         op_key(op), scalar_type_name(out->dtype()), scalar_type_name(self->dtype()));
  HF2PTE_ASSIGN_OR_RETURN(ReducePlan p, plan_reduction(op, *self, dims, keepdim, *out));
  HF2PTE_CHECK_OR_RETURN(p.count > 0 || self->numel() == 0, kInvalidArgument,
                         "{}: cannot reduce over a zero-size dim", op_key(op));
  HF2PTE_RETURN_IF_ERROR(dispatch<kReduceOut>(self->dtype(), op, "self", [&](auto tx) {
    using T = typename decltype(tx)::type;
    // 16-bit values fold in float (exact: a max or min rounds nothing).
    using A = std::conditional_t<is_half_type_v<T>, float, T>;
    // NaN propagates (torch.amax/amin do); -inf / +inf (integers: min / max) seed the fold.
    A init = kMax ? std::numeric_limits<A>::lowest() : std::numeric_limits<A>::max();
    if constexpr (std::is_floating_point_v<A>) {
      init = kMax ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::infinity();
    }
    run_reduction<A, T, T>(p, *self, *out, init, [](A acc, T tv) {
      const A v = A(tv);
      if constexpr (std::is_floating_point_v<A>) {
        if (std::isnan(acc) || std::isnan(v)) return std::numeric_limits<A>::quiet_NaN();
      }
      return kMax ? (v > acc ? v : acc) : (v < acc ? v : acc);
    });
  }));
  r.set_return(3);
  return Status::ok();
}

}  // namespace

Status LtTensorOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  return compare(OpId::LtTensorOut, args, [](auto x, auto y) { return x < y; });
}
Status GtTensorOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  return compare(OpId::GtTensorOut, args, [](auto x, auto y) { return x > y; });
}
Status GeTensorOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  return compare(OpId::GeTensorOut, args, [](auto x, auto y) { return x >= y; });
}
Status EqTensorOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  return compare(OpId::EqTensorOut, args, [](auto x, auto y) { return x == y; });
}

Status SumIntListOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::SumIntListOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * self, r.tensor(0));
  std::vector<int64_t> dims;
  HF2PTE_RETURN_IF_ERROR(r.int_list(1, &dims, /*optional=*/true));
  HF2PTE_ASSIGN_OR_RETURN(bool keepdim, r.bool_arg(2));
  HF2PTE_ASSIGN_OR_RETURN(std::optional<int64_t> dtype, r.opt_int(3));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(4));
  HF2PTE_CHECK_OR_RETURN(!dtype || *dtype == int64_t(out->dtype()), kInvalidArgument,
                         "{}: dtype argument {} does not match out dtype {}", op_key(op), *dtype,
                         scalar_type_name(out->dtype()));
  HF2PTE_CHECK_OR_RETURN(!is_floating(self->dtype()) || is_floating(out->dtype()), kInvalidArgument,
                         "{}: a floating sum cannot be written to {}", op_key(op), scalar_type_name(out->dtype()));
  HF2PTE_ASSIGN_OR_RETURN(ReducePlan p, plan_reduction(op, *self, dims, keepdim, *out));
  HF2PTE_RETURN_IF_ERROR(dispatch<kReduceIn>(self->dtype(), op, "self", [&](auto tx) {
    using X = typename decltype(tx)::type;
    return dispatch<kReduceOut>(out->dtype(), op, "out", [&](auto to) {
      using O = typename decltype(to)::type;
      if constexpr (is_float_v<X> || is_float_v<O>) {
        run_reduction<double, X, O>(p, *self, *out, 0.0, [](double acc, X v) { return acc + double(convert<float>(v)); });
      } else {
        // Integer sums wrap (no UB), as the arithmetic kernels do.
        run_reduction<int64_t, X, O>(p, *self, *out, int64_t{0}, [](int64_t acc, X v) {
          return int64_t(uint64_t(acc) + uint64_t(int64_t(v)));
        });
      }
    });
  }));
  r.set_return(4);
  return Status::ok();
}

Status AmaxOut(rt::KernelContext&, std::span<rt::EValue*> args) { return min_max<true>(OpId::AmaxOut, args); }
Status AminOut(rt::KernelContext&, std::span<rt::EValue*> args) { return min_max<false>(OpId::AminOut, args); }

// out[i..][j][k..] = self[i..][index[i..][j][k..]][k..] along `dim`.
Status GatherOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::GatherOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * self, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim_arg, r.int_arg(1));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * index, r.tensor(2));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(4));
  HF2PTE_CHECK_OR_RETURN(out->dtype() == self->dtype(), kInvalidArgument, "{}: out dtype {} must equal self dtype {}",
                         op_key(op), scalar_type_name(out->dtype()), scalar_type_name(self->dtype()));
  HF2PTE_CHECK_OR_RETURN(index->dim() == self->dim(), kInvalidArgument, "{}: index rank {} != self rank {}",
                         op_key(op), index->dim(), self->dim());
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim, normalize_dim(dim_arg, self->dim(), op));
  for (int d = 0; d < self->dim(); ++d) {
    HF2PTE_CHECK_OR_RETURN(d == dim || index->size(d) <= self->size(d), kInvalidArgument,
                           "{}: index {} is larger than self {} outside dim {}", op_key(op),
                           format_shape(index->sizes()), format_shape(self->sizes()), dim);
  }
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, index->sizes(), op));
  const int64_t n = self->dim() == 0 ? 1 : self->size(int(dim));
  const int64_t dim_stride = self->dim() == 0 ? 0 : self->strides()[size_t(dim)];
  // self's strides with the gathered dim zeroed: the index supplies that offset.
  DimArray self_st = strides_of(*self);
  if (self->dim() > 0) self_st[size_t(dim)] = 0;
  const size_t es = element_size(self->dtype());
  const auto* in = static_cast<const uint8_t*>(self->raw_data());
  auto* po = static_cast<uint8_t*>(out->raw_data());
  return dispatch<kIndex>(index->dtype(), op, "index", [&](auto ti) -> Status {
    using I = typename decltype(ti)::type;
    const I* idx = index->data<I>();
    // Validate every index first so that a bad one writes nothing.
    Status bad = Status::ok();
    for_each_offset<1>(index->sizes(), std::array<DimArray, 1>{strides_of(*index)}, [&](const std::array<int64_t, 1>& o) {
      int64_t v = int64_t(idx[o[0]]);
      if (bad.is_ok() && (v < -n || v >= n)) {
        bad = make_error(ErrorCode::kOutOfRange, "{}: index {} is out of bounds for dim {} of size {}", op_key(op), v, dim, n);
      }
    });
    HF2PTE_RETURN_IF_ERROR(bad);
    for_each_offset<3>(index->sizes(), std::array<DimArray, 3>{strides_of(*out), strides_of(*index), self_st},
                       [&](const std::array<int64_t, 3>& o) {
                         int64_t v = int64_t(idx[o[1]]);
                         if (v < 0) v += n;
                         std::memcpy(po + size_t(o[0]) * es, in + size_t(o[2] + v * dim_stride) * es, es);
                       });
    r.set_return(4);
    return Status::ok();
  });
}

// out = self broadcast to `size` (-1 keeps a dim), materialised contiguous.
Status ExpandCopyOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::ExpandCopyOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * self, r.tensor(0));
  std::vector<int64_t> size;
  HF2PTE_RETURN_IF_ERROR(r.int_list(1, &size));
  HF2PTE_ASSIGN_OR_RETURN(bool implicit, r.bool_arg(2));
  (void)implicit;
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(3));
  HF2PTE_CHECK_OR_RETURN(out->dtype() == self->dtype(), kInvalidArgument, "{}: out dtype {} must equal self dtype {}",
                         op_key(op), scalar_type_name(out->dtype()), scalar_type_name(self->dtype()));
  HF2PTE_CHECK_OR_RETURN(size.size() >= size_t(self->dim()), kInvalidArgument, "{}: cannot expand {} to {} dims",
                         op_key(op), format_shape(self->sizes()), size.size());
  const size_t lead = size.size() - size_t(self->dim());
  for (size_t i = 0; i < size.size(); ++i) {
    if (i < lead) {
      HF2PTE_CHECK_OR_RETURN(size[i] >= 0, kInvalidArgument, "{}: -1 is not allowed on new leading dim {}", op_key(op), i);
      continue;
    }
    const int64_t in = self->size(int(i - lead));
    if (size[i] == -1) size[i] = in;
    HF2PTE_CHECK_OR_RETURN(in == size[i] || in == 1, kInvalidArgument, "{}: cannot expand {} to {}", op_key(op),
                           format_shape(self->sizes()), format_shape(size));
  }
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, size, op));
  const size_t es = element_size(self->dtype());
  const auto* in = static_cast<const uint8_t*>(self->raw_data());
  auto* po = static_cast<uint8_t*>(out->raw_data());
  for_each_offset<2>(size, std::array<DimArray, 2>{strides_of(*out), broadcast_strides(*self, size)},
                     [&](const std::array<int64_t, 2>& o) { std::memcpy(po + size_t(o[0]) * es, in + size_t(o[1]) * es, es); });
  r.set_return(3);
  return Status::ok();
}

// out[n, c, y, x] = max over in-bounds taps in[n, c, y*s - p + i*d, x*s - p + j*d]
// (NaN wins, as in PyTorch); indices[n, c, y, x] = the winning tap's h * W + w.
Status MaxPool2dWithIndicesOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::MaxPool2dWithIndicesOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * in, r.tensor(0));
  std::vector<int64_t> kernel, stride, padding, dilation;
  HF2PTE_RETURN_IF_ERROR(r.int_list(1, &kernel));
  HF2PTE_RETURN_IF_ERROR(r.int_list(2, &stride));
  HF2PTE_RETURN_IF_ERROR(r.int_list(3, &padding));
  HF2PTE_RETURN_IF_ERROR(r.int_list(4, &dilation));
  HF2PTE_ASSIGN_OR_RETURN(bool ceil_mode, r.bool_arg(5));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(6));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * indices, r.tensor(7));
  HF2PTE_CHECK_OR_RETURN(in->dtype() == out->dtype(), kInvalidArgument, "{}: out is {}; expected the input's {}",
                         op_key(op), scalar_type_name(out->dtype()), scalar_type_name(in->dtype()));
  if (indices->dtype() != ScalarType::kLong) return unsupported_dtype(op, "indices", indices->dtype(), DTypeSet{ScalarType::kLong});
  HF2PTE_CHECK_OR_RETURN(!ceil_mode, kNotSupported, "{}: ceil_mode is not supported", op_key(op));
  HF2PTE_CHECK_OR_RETURN(in->dim() == 4 && !kernel.empty() && kernel.size() <= 2 && stride.size() <= 2 &&
                             padding.size() <= 2 && dilation.size() <= 2,
                         kNotSupported, "{}: expected a 4-D input and 1- or 2-element lists; input {}", op_key(op),
                         format_shape(in->sizes()));
  auto pick = [](const std::vector<int64_t>& v, size_t i, int64_t d) { return v.empty() ? d : v[v.size() == 1 ? 0 : i]; };
  const int64_t kh = pick(kernel, 0, 1), kw = pick(kernel, 1, 1);
  const int64_t sh = pick(stride, 0, kh), sw = pick(stride, 1, kw), ph = pick(padding, 0, 0), pw = pick(padding, 1, 0);
  const int64_t dh = pick(dilation, 0, 1), dw = pick(dilation, 1, 1);
  HF2PTE_CHECK_OR_RETURN(kh > 0 && kw > 0 && sh > 0 && sw > 0 && dh > 0 && dw > 0 && ph >= 0 && pw >= 0 &&
                             2 * ph <= kh && 2 * pw <= kw,
                         kInvalidArgument, "{}: kernel [{}, {}] stride [{}, {}] padding [{}, {}] dilation [{}, {}] are invalid",
                         op_key(op), kh, kw, sh, sw, ph, pw, dh, dw);
  const int64_t N = in->size(0), C = in->size(1), H = in->size(2), W = in->size(3);
  const int64_t OH = (H + 2 * ph - dh * (kh - 1) - 1) / sh + 1, OW = (W + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
  HF2PTE_CHECK_OR_RETURN(OH > 0 && OW > 0 && H + 2 * ph >= dh * (kh - 1) + 1 && W + 2 * pw >= dw * (kw - 1) + 1,
                         kInvalidArgument, "{}: kernel [{}, {}] is larger than the padded input {}", op_key(op), kh, kw,
                         format_shape(in->sizes()));
  const int64_t out_sizes[] = {N, C, OH, OW};
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, out_sizes, op));
  HF2PTE_RETURN_IF_ERROR(resize_out(*indices, out_sizes, op));
  const auto is = in->strides(), os = out->strides(), xs = indices->strides();
  // 16-bit data compares in float; the max is one of the inputs, so nothing rounds.
  return dispatch<kFloating>(in->dtype(), op, "self", [&](auto tt) {
  using T = typename decltype(tt)::type;
  const T* px = in->data<T>();
  T* po = out->data<T>();
  int64_t* pi = indices->data<int64_t>();
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t y = 0; y < OH; ++y) {
        for (int64_t x = 0; x < OW; ++x) {
          float best = -std::numeric_limits<float>::infinity();
          int64_t at = -1;
          bool nan = false;  // a NaN tap is final
          for (int64_t i = 0; i < kh && !nan; ++i) {
            const int64_t iy = y * sh - ph + i * dh;
            if (iy < 0 || iy >= H) continue;
            for (int64_t j = 0; j < kw && !nan; ++j) {
              const int64_t ix = x * sw - pw + j * dw;
              if (ix < 0 || ix >= W) continue;
              const float v = float(px[n * is[0] + c * is[1] + iy * is[2] + ix * is[3]]);
              if (at < 0 || v > best || std::isnan(v)) {
                best = v;
                at = iy * W + ix;
                nan = std::isnan(v);
              }
            }
          }
          po[n * os[0] + c * os[1] + y * os[2] + x * os[3]] = T(best);
          pi[n * xs[0] + c * xs[1] + y * xs[2] + x * xs[3]] = at;
        }
      }
    }
  }
  });
}

// out[n, o, y, x] = bias[o] + sum_{c in group(o), i, j} in[n, c, y*s - p + i*d, x*s - p + j*d] * w[o, c', i, j]
Status ConvolutionOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::ConvolutionOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * in, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * w, r.tensor(1));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * bias, r.opt_tensor(2));
  std::vector<int64_t> stride, padding, dilation, output_padding;
  HF2PTE_RETURN_IF_ERROR(r.int_list(3, &stride));
  HF2PTE_RETURN_IF_ERROR(r.int_list(4, &padding));
  HF2PTE_RETURN_IF_ERROR(r.int_list(5, &dilation));
  HF2PTE_ASSIGN_OR_RETURN(bool transposed, r.bool_arg(6));
  HF2PTE_RETURN_IF_ERROR(r.int_list(7, &output_padding));
  HF2PTE_ASSIGN_OR_RETURN(int64_t groups, r.int_arg(8));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(9));
  for (const rt::Tensor* t : {w, out}) {
    HF2PTE_CHECK_OR_RETURN(t->dtype() == in->dtype(), kInvalidArgument, "{}: weight and out must be {} like the input; got {}",
                           op_key(op), scalar_type_name(in->dtype()), scalar_type_name(t->dtype()));
  }
  HF2PTE_CHECK_OR_RETURN(!transposed, kNotSupported, "{}: transposed convolution is not supported", op_key(op));
  HF2PTE_CHECK_OR_RETURN(in->dim() == 4 && w->dim() == 4, kNotSupported,
                         "{}: only 2-D convolution is supported; input {}, weight {}", op_key(op),
                         format_shape(in->sizes()), format_shape(w->sizes()));
  auto pick = [](const std::vector<int64_t>& v, size_t i, int64_t d) { return v.empty() ? d : v[v.size() == 1 ? 0 : i]; };
  const int64_t N = in->size(0), C = in->size(1), H = in->size(2), W = in->size(3);
  const int64_t O = w->size(0), Cg = w->size(1), KH = w->size(2), KW = w->size(3);
  const int64_t sh = pick(stride, 0, 1), sw = pick(stride, 1, 1), ph = pick(padding, 0, 0), pw = pick(padding, 1, 0);
  const int64_t dh = pick(dilation, 0, 1), dw = pick(dilation, 1, 1);
  HF2PTE_CHECK_OR_RETURN(groups >= 1 && C == Cg * groups && O % groups == 0 && sh > 0 && sw > 0 && dh > 0 && dw > 0 &&
                             ph >= 0 && pw >= 0,
                         kInvalidArgument, "{}: input {} weight {} groups {} stride [{}, {}] do not match", op_key(op),
                         format_shape(in->sizes()), format_shape(w->sizes()), groups, sh, sw);
  HF2PTE_CHECK_OR_RETURN(!bias || (bias->dim() == 1 && bias->size(0) == O && bias->dtype() == in->dtype()),
                         kInvalidArgument, "{}: bias must be {} [{}]", op_key(op), scalar_type_name(in->dtype()), O);
  const int64_t OH = (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1, OW = (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1;
  HF2PTE_CHECK_OR_RETURN(OH > 0 && OW > 0, kInvalidArgument, "{}: kernel {} is larger than padded input {}", op_key(op),
                         format_shape(w->sizes()), format_shape(in->sizes()));
  const int64_t out_sizes[] = {N, O, OH, OW};
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, out_sizes, op));
  const auto is = in->strides(), ws = w->strides(), os = out->strides();
  const int64_t opg = O / groups;
  // 16-bit data: products summed in double, rounded once to the out dtype.
  HF2PTE_RETURN_IF_ERROR(dispatch<kFloating>(in->dtype(), op, "input", [&](auto tt) {
  using T = typename decltype(tt)::type;
  const T* px = in->data<T>();
  const T* pwt = w->data<T>();
  const T* pb = bias ? bias->data<T>() : nullptr;
  T* po = out->data<T>();
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t o = 0; o < O; ++o) {
      const int64_t c0 = (o / opg) * Cg;
      for (int64_t y = 0; y < OH; ++y) {
        for (int64_t x = 0; x < OW; ++x) {
          double acc = pb ? double(float(pb[o * bias->strides()[0]])) : 0.0;
          for (int64_t c = 0; c < Cg; ++c) {
            for (int64_t i = 0; i < KH; ++i) {
              const int64_t iy = y * sh - ph + i * dh;
              if (iy < 0 || iy >= H) continue;
              for (int64_t j = 0; j < KW; ++j) {
                const int64_t ix = x * sw - pw + j * dw;
                if (ix < 0 || ix >= W) continue;
                acc += double(float(px[n * is[0] + (c0 + c) * is[1] + iy * is[2] + ix * is[3]])) *
                       double(float(pwt[o * ws[0] + c * ws[1] + i * ws[2] + j * ws[3]]));
              }
            }
          }
          po[n * os[0] + o * os[1] + y * os[2] + x * os[3]] = T(float(acc));
        }
      }
    }
  }
  }));
  r.set_return(9);
  return Status::ok();
}

// out = uniform [0, 1) samples of shape `size` (a fresh random_device seed per call, as upstream).
Status RandOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::RandOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  std::vector<int64_t> size;
  HF2PTE_RETURN_IF_ERROR(r.int_list(0, &size));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(1));
  if (out->dtype() != ScalarType::kFloat) return unsupported_dtype(op, "out", out->dtype(), kFloatOnly);
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, size, op));
  std::mt19937_64 gen(std::random_device{}());
  std::uniform_real_distribution<double> dist(0.0, 1.0);
  constexpr float kBelowOne = 0x1.fffffep-1f;  // rounding to float must not reach 1
  float* po = out->data<float>();
  for_each_offset<1>(out->sizes(), std::array<DimArray, 1>{strides_of(*out)},
                     [&](const std::array<int64_t, 1>& o) { po[o[0]] = std::min(float(dist(gen)), kBelowOne); });
  r.set_return(1);
  return Status::ok();
}

}  // namespace hf2pte::kernels
