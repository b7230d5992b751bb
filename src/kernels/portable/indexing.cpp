// Indexing kernels: embedding, index_select and index_put_ (advanced indexing
// with None slices, as the static KV-cache update `cache[None, None, pos] = v`
// needs). Every index is validated before anything is written, so a bad index
// is an error and never an out-of-bounds access or a half-updated tensor.
#include "kernels/portable/kernel_util.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

namespace {

/// Reads int64 or int32 index tensors as int64 (the two index dtypes ATen takes).
struct IndexReader {
  const void* data = nullptr;
  bool is32 = false;
  int64_t at(int64_t off) const {
    return is32 ? int64_t(static_cast<const int32_t*>(data)[off])
                : static_cast<const int64_t*>(data)[off];
  }
};

Result<IndexReader> index_reader(const rt::Tensor& t, OpId op, std::string_view what) {
  if (!kIndex.contains(t.dtype())) return unsupported_dtype(op, what, t.dtype(), kIndex);
  return IndexReader{t.raw_data(), t.dtype() == ScalarType::kInt};
}

/// Checks every element of index tensor `t` lies in [lo, size); reports the first that does not.
Status check_indices(const rt::Tensor& t, const IndexReader& ir, int64_t lo, int64_t size,
                     OpId op, std::string_view what) {
  bool ok = true;
  int64_t bad = 0;
  for_each_offset<1>(t.sizes(), std::array<DimArray, 1>{strides_of(t)},
                     [&](const std::array<int64_t, 1>& o) {
                       const int64_t v = ir.at(o[0]);
                       if (ok && (v < lo || v >= size)) {
                         ok = false;
                         bad = v;
                       }
                     });
  HF2PTE_CHECK_OR_RETURN(ok, kOutOfRange, "{}: {} value {} out of range; expected in [{}, {})",
                         op_key(op), what, bad, lo, size);
  return Status::ok();
}

Status check_same_dtype(const rt::Tensor& a, const rt::Tensor& b, OpId op, std::string_view an,
                        std::string_view bn) {
  HF2PTE_CHECK_OR_RETURN(a.dtype() == b.dtype(), kInvalidArgument,
                         "{}: {} and {} must have the same dtype; got {} and {}", op_key(op), an,
                         bn, scalar_type_name(a.dtype()), scalar_type_name(b.dtype()));
  return Status::ok();
}

}  // namespace

Status EmbeddingOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::EmbeddingOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * weight, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * indices, r.tensor(1));
  // padding_idx, scale_grad_by_freq and sparse only affect the gradient.
  HF2PTE_RETURN_IF_ERROR(r.int_arg(2).status());
  HF2PTE_RETURN_IF_ERROR(r.bool_arg(3).status());
  HF2PTE_RETURN_IF_ERROR(r.bool_arg(4).status());
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(5));
  HF2PTE_CHECK_OR_RETURN(weight->dim() == 2, kInvalidArgument,
                         "{}: weight must have rank 2; got shape {}", op_key(op),
                         format_shape(weight->sizes()));
  HF2PTE_RETURN_IF_ERROR(check_same_dtype(*weight, *out, op, "weight", "out"));
  HF2PTE_ASSIGN_OR_RETURN(IndexReader ir, index_reader(*indices, op, "indices"));
  HF2PTE_CHECK_OR_RETURN(indices->dim() < kMaxTensorRank, kNotSupported,
                         "{}: indices of rank {} give an out of rank above {}", op_key(op),
                         indices->dim(), kMaxTensorRank);
  const int64_t rows = weight->size(0), width = weight->size(1);
  HF2PTE_RETURN_IF_ERROR(check_indices(*indices, ir, 0, rows, op, "index"));

  std::vector<int64_t> shape(indices->sizes().begin(), indices->sizes().end());
  shape.push_back(width);
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, shape, op));
  const int irank = indices->dim();
  const int64_t ws0 = weight->strides()[0], ws1 = weight->strides()[1];
  const int64_t os_last = out->strides()[size_t(irank)];
  HF2PTE_RETURN_IF_ERROR(dispatch<kStandard>(weight->dtype(), op, "weight", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pw = weight->data<T>();
    T* po = out->data<T>();
    for_each_offset<2>(indices->sizes(),
                       std::array<DimArray, 2>{strides_of(*out), strides_of(*indices)},
                       [&](const std::array<int64_t, 2>& o) {
                         const T* row = pw + ir.at(o[1]) * ws0;
                         T* dst = po + o[0];
                         for (int64_t j = 0; j < width; ++j) dst[j * os_last] = load(row + j * ws1);
                       });
  }));
  r.set_return(5);
  return Status::ok();
}

Status IndexSelectOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::IndexSelectOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * self, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim_arg, r.int_arg(1));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * index, r.tensor(2));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(3));
  HF2PTE_RETURN_IF_ERROR(check_same_dtype(*self, *out, op, "self", "out"));
  HF2PTE_ASSIGN_OR_RETURN(IndexReader ir, index_reader(*index, op, "index"));
  HF2PTE_CHECK_OR_RETURN(index->dim() <= 1, kInvalidArgument,
                         "{}: index must be a vector; got shape {}", op_key(op),
                         format_shape(index->sizes()));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim, normalize_dim(dim_arg, self->dim(), op));
  const int rank = self->dim();
  const int64_t n = index->numel();
  // A 0-dim self behaves as a one-element vector whose result stays 0-dim.
  const int64_t dim_size = rank == 0 ? 1 : self->size(int(dim));
  HF2PTE_CHECK_OR_RETURN(rank > 0 || n == 1, kInvalidArgument,
                         "{}: index of a 0-dim tensor must have one element; got {}", op_key(op), n);
  HF2PTE_RETURN_IF_ERROR(check_indices(*index, ir, 0, dim_size, op, "index"));

  std::vector<int64_t> shape(self->sizes().begin(), self->sizes().end());
  if (rank > 0) shape[size_t(dim)] = n;
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, shape, op));
  // Iterate every position outside `dim`, then gather along it.
  DimArray outer{};
  for (int d = 0; d < rank; ++d) outer[size_t(d)] = shape[size_t(d)];
  int64_t ss = 0, os = 0;
  if (rank > 0) {
    outer[size_t(dim)] = 1;
    ss = self->strides()[size_t(dim)];
    os = out->strides()[size_t(dim)];
  }
  const int64_t is = index->dim() == 1 ? index->strides()[0] : 0;
  HF2PTE_RETURN_IF_ERROR(dispatch<kStandard>(self->dtype(), op, "self", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* ps = self->data<T>();
    T* po = out->data<T>();
    for_each_offset<2>(std::span<const int64_t>(outer.data(), size_t(rank)),
                       std::array<DimArray, 2>{strides_of(*out), strides_of(*self)},
                       [&](const std::array<int64_t, 2>& o) {
                         for (int64_t j = 0; j < n; ++j) {
                           po[o[0] + j * os] = load(ps + o[1] + ir.at(j * is) * ss);
                         }
                       });
  }));
  r.set_return(3);
  return Status::ok();
}

Status IndexPut_(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::IndexPut_;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * self, r.tensor(0));
  std::vector<rt::Tensor*> indices;
  HF2PTE_RETURN_IF_ERROR(r.tensor_list(1, &indices));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * values, r.tensor(2));
  HF2PTE_ASSIGN_OR_RETURN(bool accumulate, r.bool_arg(3));
  HF2PTE_RETURN_IF_ERROR(check_same_dtype(*self, *values, op, "self", "values"));
  const int rank = self->dim();
  HF2PTE_CHECK_OR_RETURN(int(indices.size()) <= rank, kInvalidArgument,
                         "{}: too many indices for a tensor of rank {}; got {}", op_key(op), rank,
                         indices.size());

  // The indexed dims, their readers, and the broadcast shape of the indices.
  std::vector<int> idx_dims;
  std::vector<IndexReader> readers;
  std::vector<std::span<const int64_t>> idx_shapes;
  for (size_t k = 0; k < indices.size(); ++k) {
    const rt::Tensor* t = indices[k];
    if (t == nullptr) continue;
    HF2PTE_CHECK_OR_RETURN(t->dtype() != ScalarType::kBool, kNotSupported,
                           "{}: boolean mask indices are not supported; expected i64 or i32 at indices[{}]",
                           op_key(op), k);
    HF2PTE_ASSIGN_OR_RETURN(IndexReader ir, index_reader(*t, op, "indices"));
    // Negative indices count from the end, as in Python.
    const int64_t size = self->size(int(k));
    HF2PTE_RETURN_IF_ERROR(check_indices(*t, ir, -size, size, op, "index"));
    idx_dims.push_back(int(k));
    readers.push_back(ir);
    idx_shapes.push_back(t->sizes());
  }
  std::vector<int64_t> bshape;
  HF2PTE_RETURN_IF_ERROR(broadcast_shapes(idx_shapes, op, &bshape));
  bool adjacent = true;
  for (size_t k = 1; k < idx_dims.size(); ++k) adjacent &= idx_dims[k] == idx_dims[k - 1] + 1;

  // The indexed shape (numpy rules): the broadcast index dims replace the
  // indexed dims in place when those are adjacent, else they go first. Each
  // of its dims carries strides for self (plain dims), values (broadcast) and
  // every index tensor (broadcast dims).
  constexpr size_t kOps = 2 + kMaxTensorRank;  // self, values, up to 16 index tensors
  const size_t n_idx = idx_dims.size();
  std::vector<int64_t> shape;
  std::array<DimArray, kOps> st{};
  auto is_indexed = [&](int d) {
    return d < int(indices.size()) && indices[size_t(d)] != nullptr;
  };
  auto push_plain = [&](int d) -> Status {
    HF2PTE_CHECK_OR_RETURN(shape.size() < size_t(kMaxTensorRank), kNotSupported,
                           "{}: indexed shape has rank above {}", op_key(op), kMaxTensorRank);
    st[0][shape.size()] = self->strides()[size_t(d)];
    shape.push_back(self->size(d));
    return Status::ok();
  };
  auto push_broadcast = [&]() -> Status {
    HF2PTE_CHECK_OR_RETURN(shape.size() + bshape.size() <= size_t(kMaxTensorRank), kNotSupported,
                           "{}: indexed shape has rank above {}", op_key(op), kMaxTensorRank);
    for (size_t k = 0; k < n_idx; ++k) {
      const DimArray bs = broadcast_strides(*indices[size_t(idx_dims[k])], bshape);
      for (size_t j = 0; j < bshape.size(); ++j) st[2 + k][shape.size() + j] = bs[j];
    }
    shape.insert(shape.end(), bshape.begin(), bshape.end());
    return Status::ok();
  };
  if (n_idx > 0 && !adjacent) HF2PTE_RETURN_IF_ERROR(push_broadcast());
  for (int d = 0; d < rank; ++d) {
    if (!is_indexed(d)) {
      HF2PTE_RETURN_IF_ERROR(push_plain(d));
    } else if (adjacent && d == idx_dims.front()) {
      HF2PTE_RETURN_IF_ERROR(push_broadcast());
    }
  }
  // values must broadcast to the indexed shape without widening it.
  bool fits = values->dim() <= int(shape.size());
  for (int d = 0; fits && d < values->dim(); ++d) {
    const int64_t v = values->sizes()[size_t(values->dim() - 1 - d)];
    fits = v == 1 || v == shape[shape.size() - 1 - size_t(d)];
  }
  HF2PTE_CHECK_OR_RETURN(fits, kInvalidArgument,
                         "{}: values of shape {} cannot be broadcast to indexed shape {}",
                         op_key(op), format_shape(values->sizes()), format_shape(shape));
  HF2PTE_CHECK_OR_RETURN(!(accumulate && self->dtype() == ScalarType::kBool), kNotSupported,
                         "{}: accumulate=True is not supported for bool tensors", op_key(op));
  st[1] = broadcast_strides(*values, shape);

  std::array<int64_t, kMaxTensorRank> idx_stride{}, idx_size{};
  for (size_t k = 0; k < n_idx; ++k) {
    idx_stride[k] = self->strides()[size_t(idx_dims[k])];
    idx_size[k] = self->size(idx_dims[k]);
  }
  HF2PTE_RETURN_IF_ERROR(dispatch<kStandard>(self->dtype(), op, "self", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* ps = self->data<T>();
    const T* pv = values->data<T>();
    for_each_offset<kOps>(shape, st, [&](const std::array<int64_t, kOps>& o) {
      int64_t off = o[0];
      for (size_t k = 0; k < n_idx; ++k) {
        int64_t i = readers[k].at(o[2 + k]);
        if (i < 0) i += idx_size[k];  // validated above: now in [0, size)
        off += i * idx_stride[k];
      }
      if constexpr (std::is_same_v<T, bool>) {
        ps[off] = load(pv + o[1]);
      } else {
        // Duplicate indices: the last write wins, or all add up when accumulating.
        if (!accumulate) {
          ps[off] = pv[o[1]];
        } else if constexpr (std::is_integral_v<T>) {
          ps[off] = T(uint64_t(ps[off]) + uint64_t(pv[o[1]]));  // wraps, no signed-overflow UB
        } else {
          ps[off] = T(float(ps[off]) + float(pv[o[1]]));  // 16-bit: in float, rounded once
        }
      }
    });
  }));
  r.set_return(0);
  return Status::ok();
}

}  // namespace hf2pte::kernels
