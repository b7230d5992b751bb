// Kernels whose output size depends on the data (issue #3 item 2): nonzero and
// masked_select.
// The out is planned at the declared bound of its unbacked size and resized to
// the actual size before anything is written, so an out smaller than the data
// needs (a hostile program) is an error, never a write past its memory.
#include "kernels/portable/kernel_util.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

namespace {

/// Every dtype nonzero reads: a value is non-zero when `v != 0`, so NaN counts
/// and -0.0 does not (as in ATen).
constexpr DTypeSet kNonzeroTypes = kStandard | DTypeSet{ScalarType::kInt};

}  // namespace

// out[k] = the row-major (C order) coordinates of the k-th non-zero element of
// self; out is int64 [count, self.dim()] (a 0-dim self gives [0 or 1, 0]).
Status NonzeroOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::NonzeroOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * self, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(1));
  HF2PTE_CHECK_OR_RETURN(out->dtype() == ScalarType::kLong, kInvalidArgument, "{}: out must be i64; got {}",
                         op_key(op), scalar_type_name(out->dtype()));
  const int rank = self->dim();
  const auto sizes = self->sizes();
  const auto strides = self->strides();
  HF2PTE_RETURN_IF_ERROR(dispatch<kNonzeroTypes>(self->dtype(), op, "self", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* ps = self->data<T>();
    // Pass 1: the count (for_each_offset walks in row-major order).
    int64_t count = 0;
    for_each_offset<1>(sizes, std::array<DimArray, 1>{strides_of(*self)},
                       [&](const std::array<int64_t, 1>& o) { count += load(ps + o[0]) != T(0) ? 1 : 0; });
    const std::array<int64_t, 2> shape{count, int64_t(rank)};
    HF2PTE_RETURN_IF_ERROR(resize_out(*out, shape, op));
    // Pass 2: coordinates, walking a row-major odometer through self's strides.
    // `row < count` also holds if out aliases self (a hostile program): the
    // writes then change self, but never leave out's resized shape.
    int64_t* po = out->data<int64_t>();
    const int64_t os0 = out->strides()[0], os1 = out->strides()[1];
    const int64_t n = self->numel();
    DimArray idx{};
    int64_t off = 0, row = 0;
    for (int64_t i = 0; i < n && row < count; ++i) {
      if (load(ps + off) != T(0)) {
        for (int d = 0; d < rank; ++d) po[row * os0 + d * os1] = idx[size_t(d)];
        ++row;
      }
      for (int d = rank - 1; d >= 0; --d) {
        off += strides[size_t(d)];
        if (++idx[size_t(d)] < sizes[size_t(d)]) break;
        off -= strides[size_t(d)] * sizes[size_t(d)];
        idx[size_t(d)] = 0;
      }
    }
    return Status::ok();
  }));
  r.set_return(1);
  return Status::ok();
}

// out = the elements of self where mask is set, self and mask broadcast
// against each other, in row-major order of the broadcast shape (1-D, self's dtype).
Status MaskedSelectOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::MaskedSelectOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * self, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * mask, r.tensor(1));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(2));
  HF2PTE_CHECK_OR_RETURN(mask->dtype() == ScalarType::kBool, kInvalidArgument, "{}: mask must be bool; got {}",
                         op_key(op), scalar_type_name(mask->dtype()));
  HF2PTE_CHECK_OR_RETURN(out->dtype() == self->dtype(), kInvalidArgument,
                         "{}: out must have self's dtype {}; got {}", op_key(op), scalar_type_name(self->dtype()),
                         scalar_type_name(out->dtype()));
  std::vector<int64_t> shape;
  const std::span<const int64_t> shapes[] = {self->sizes(), mask->sizes()};
  HF2PTE_RETURN_IF_ERROR(broadcast_shapes(shapes, op, &shape));
  const std::array<DimArray, 2> strides{broadcast_strides(*self, shape), broadcast_strides(*mask, shape)};
  const auto* pm = mask->data<uint8_t>();  // bools read as bytes: any non-zero byte is set
  int64_t count = 0;
  for_each_offset<2>(shape, strides, [&](const std::array<int64_t, 2>& o) { count += pm[o[1]] != 0 ? 1 : 0; });
  const std::array<int64_t, 1> out_shape{count};
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, out_shape, op));
  HF2PTE_RETURN_IF_ERROR(dispatch<kNonzeroTypes>(self->dtype(), op, "self", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* ps = self->data<T>();
    T* po = out->data<T>();
    const int64_t os = out->strides()[0];
    int64_t row = 0;  // `row < count` holds even if out aliases mask (a hostile program)
    for_each_offset<2>(shape, strides, [&](const std::array<int64_t, 2>& o) {
      if (pm[o[1]] != 0 && row < count) po[os * row++] = load(ps + o[0]);
    });
  }));
  r.set_return(2);
  return Status::ok();
}

}  // namespace hf2pte::kernels
