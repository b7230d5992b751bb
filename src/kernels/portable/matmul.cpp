// Matrix products: mm, bmm, addmm in f32, f16 or bf16 (all operands one dtype,
// as upstream requires) with double accumulation, rounded once per element. This is
// the reference every fast GEMM is compared with, so it favours accuracy and
// clarity (row-at-a-time, cache-friendly, no blocking) over speed.
#include <algorithm>
#include <vector>

#include "kernels/portable/dtype_dispatch.h"
#include "kernels/portable/kernel_util.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

namespace {

/// A strided matrix view of element type T (element strides).
template <typename T>
struct MatView {
  const T* data;
  int64_t rows, cols, row_stride, col_stride;
};

template <typename T>
MatView<T> mat_view(const rt::Tensor& t, int first_dim, int64_t batch_offset) {
  return {t.data<T>() + batch_offset, t.sizes()[size_t(first_dim)],
          t.sizes()[size_t(first_dim) + 1], t.strides()[size_t(first_dim)],
          t.strides()[size_t(first_dim) + 1]};
}

/// Calls `epi(i, j, dot)` for every element of a @ b, with the dot product
/// accumulated in double. The loop order follows b's layout so the inner loop
/// is unit-stride: a row-major b streams rows (row i = sum_k a[i,k] * b[k,:]
/// into `acc`, the one scratch row of m doubles); a transposed b (what a
/// permuted weight looks like) takes plain dot products along k.
template <typename T, typename Epi>
void matmul(const MatView<T>& a, const MatView<T>& b, std::vector<double>& acc, Epi&& epi) {
  const int64_t n = a.rows, k = a.cols, m = b.cols;
  if (b.col_stride != 1 && m > 1) {
    for (int64_t i = 0; i < n; ++i) {
      const T* arow = a.data + i * a.row_stride;
      for (int64_t j = 0; j < m; ++j) {
        const T* bcol = b.data + j * b.col_stride;
        double dot = 0.0;
        for (int64_t kk = 0; kk < k; ++kk) {
          dot += double(float(arow[kk * a.col_stride])) * double(float(bcol[kk * b.row_stride]));
        }
        epi(i, j, dot);
      }
    }
    return;
  }
  acc.assign(size_t(m), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    const T* arow = a.data + i * a.row_stride;
    for (int64_t kk = 0; kk < k; ++kk) {
      // No skipping of zero a[i,k]: 0 * inf must still give NaN.
      const double av = float(arow[kk * a.col_stride]);
      const T* brow = b.data + kk * b.row_stride;
      for (int64_t j = 0; j < m; ++j) acc[size_t(j)] += av * double(float(brow[j]));
    }
    for (int64_t j = 0; j < m; ++j) epi(i, j, acc[size_t(j)]);
  }
}

/// Every operand a float type, all the same one.
Status check_float(std::initializer_list<std::pair<const rt::Tensor*, std::string_view>> ts, OpId op) {
  const ScalarType first = ts.begin()->first->dtype();
  for (const auto& [t, what] : ts) {
    if (!kFloating.contains(t->dtype())) return unsupported_dtype(op, what, t->dtype(), kFloating);
    HF2PTE_CHECK_OR_RETURN(t->dtype() == first, kNotSupported, "{}: {} has dtype {}, {} has {}; expected one dtype",
                           op_key(op), ts.begin()->second, scalar_type_name(first), what,
                           scalar_type_name(t->dtype()));
  }
  return Status::ok();
}

Status check_rank(const rt::Tensor& t, int rank, OpId op, std::string_view what) {
  HF2PTE_CHECK_OR_RETURN(t.dim() == rank, kInvalidArgument,
                         "{}: {} must have rank {}; got shape {}", op_key(op), what, rank,
                         format_shape(t.sizes()));
  return Status::ok();
}

Status check_inner(const rt::Tensor& a, const rt::Tensor& b, int64_t ka, int64_t kb, OpId op) {
  HF2PTE_CHECK_OR_RETURN(ka == kb, kInvalidArgument, "{}: shapes {} and {} cannot be multiplied",
                         op_key(op), format_shape(a.sizes()), format_shape(b.sizes()));
  return Status::ok();
}

}  // namespace

Status MmOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::MmOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * a, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * b, r.tensor(1));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(2));
  HF2PTE_RETURN_IF_ERROR(check_float({{a, "self"}, {b, "mat2"}, {out, "out"}}, op));
  HF2PTE_RETURN_IF_ERROR(check_rank(*a, 2, op, "self"));
  HF2PTE_RETURN_IF_ERROR(check_rank(*b, 2, op, "mat2"));
  HF2PTE_RETURN_IF_ERROR(check_inner(*a, *b, a->size(1), b->size(0), op));
  const int64_t shape[] = {a->size(0), b->size(1)};
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, shape, op));
  const int64_t os0 = out->strides()[0], os1 = out->strides()[1];
  HF2PTE_RETURN_IF_ERROR(dispatch<kFloating>(out->dtype(), op, "out", [&](auto tt) {
    using T = typename decltype(tt)::type;
    T* po = out->data<T>();
    std::vector<double> acc;
    matmul(mat_view<T>(*a, 0, 0), mat_view<T>(*b, 0, 0), acc,
           [&](int64_t i, int64_t j, double dot) { po[i * os0 + j * os1] = T(float(dot)); });
  }));
  r.set_return(2);
  return Status::ok();
}

Status BmmOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::BmmOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * a, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * b, r.tensor(1));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(2));
  HF2PTE_RETURN_IF_ERROR(check_float({{a, "self"}, {b, "mat2"}, {out, "out"}}, op));
  HF2PTE_RETURN_IF_ERROR(check_rank(*a, 3, op, "self"));
  HF2PTE_RETURN_IF_ERROR(check_rank(*b, 3, op, "mat2"));
  HF2PTE_CHECK_OR_RETURN(a->size(0) == b->size(0), kInvalidArgument,
                         "{}: batch sizes of {} and {} differ", op_key(op),
                         format_shape(a->sizes()), format_shape(b->sizes()));
  HF2PTE_RETURN_IF_ERROR(check_inner(*a, *b, a->size(2), b->size(1), op));
  const int64_t shape[] = {a->size(0), a->size(1), b->size(2)};
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, shape, op));
  const int64_t os0 = out->strides()[0], os1 = out->strides()[1], os2 = out->strides()[2];
  HF2PTE_RETURN_IF_ERROR(dispatch<kFloating>(out->dtype(), op, "out", [&](auto tt) {
    using T = typename decltype(tt)::type;
    T* po = out->data<T>();
    std::vector<double> acc;
    for (int64_t bi = 0; bi < shape[0]; ++bi) {
      T* ob = po + bi * os0;
      matmul(mat_view<T>(*a, 1, bi * a->strides()[0]), mat_view<T>(*b, 1, bi * b->strides()[0]), acc,
             [&](int64_t i, int64_t j, double dot) { ob[i * os1 + j * os2] = T(float(dot)); });
    }
  }));
  r.set_return(2);
  return Status::ok();
}

Status AddmmOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::AddmmOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * self, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * a, r.tensor(1));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * b, r.tensor(2));
  HF2PTE_ASSIGN_OR_RETURN(ScalarArg beta_arg, r.scalar(3));
  HF2PTE_ASSIGN_OR_RETURN(ScalarArg alpha_arg, r.scalar(4));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(5));
  HF2PTE_RETURN_IF_ERROR(check_float({{self, "self"}, {a, "mat1"}, {b, "mat2"}, {out, "out"}}, op));
  HF2PTE_RETURN_IF_ERROR(check_rank(*a, 2, op, "mat1"));
  HF2PTE_RETURN_IF_ERROR(check_rank(*b, 2, op, "mat2"));
  HF2PTE_RETURN_IF_ERROR(check_inner(*a, *b, a->size(1), b->size(0), op));
  const int64_t shape[] = {a->size(0), b->size(1)};
  // self (typically a bias [m]) must broadcast to the product's shape, not widen it.
  std::vector<int64_t> bshape;
  const std::span<const int64_t> shapes[] = {self->sizes(), shape};
  Status bst = broadcast_shapes(shapes, op, &bshape);
  HF2PTE_CHECK_OR_RETURN(bst.is_ok() && self->dim() <= 2 && bshape[0] == shape[0] &&
                             bshape[1] == shape[1],
                         kInvalidArgument, "{}: self {} cannot be broadcast to {}", op_key(op),
                         format_shape(self->sizes()), format_shape(shape));
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, shape, op));
  const DimArray ss = broadcast_strides(*self, shape);
  const int64_t os0 = out->strides()[0], os1 = out->strides()[1];
  const double alpha = alpha_arg.as_double(), beta = beta_arg.as_double();
  HF2PTE_RETURN_IF_ERROR(dispatch<kFloating>(out->dtype(), op, "out", [&](auto tt) {
    using T = typename decltype(tt)::type;
    const T* ps = self->data<T>();
    T* po = out->data<T>();
    std::vector<double> acc;
    matmul(mat_view<T>(*a, 0, 0), mat_view<T>(*b, 0, 0), acc, [&](int64_t i, int64_t j, double dot) {
      // beta == 0 ignores self entirely (NaN in self does not leak), as in ATen.
      double v = alpha * dot;
      if (beta != 0.0) v += beta * double(float(ps[i * ss[0] + j * ss[1]]));
      po[i * os0 + j * os1] = T(float(v));
    });
  }));
  r.set_return(5);
  return Status::ok();
}

}  // namespace hf2pte::kernels
