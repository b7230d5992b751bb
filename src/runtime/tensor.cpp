#include "runtime/tensor.h"

#include <limits>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace hf2pte::rt {

Tensor::Tensor(ScalarType dtype, std::vector<int64_t> sizes, std::vector<uint8_t> dim_order, void* data,
               size_t capacity_bytes, ShapeDynamism dynamism)
    : dtype_(dtype),
      sizes_(std::move(sizes)),
      dim_order_(std::move(dim_order)),
      data_(data),
      capacity_bytes_(capacity_bytes),
      dynamism_(dynamism) {
  // An absent dim_order means the default (contiguous) layout.
  if (dim_order_.size() != sizes_.size()) {
    dim_order_.resize(sizes_.size());
    for (size_t i = 0; i < dim_order_.size(); ++i) dim_order_[i] = uint8_t(i);
  }
  numel_ = 1;
  for (int64_t s : sizes_) numel_ *= s;  // the loader validated sizes (>= 0, no overflow)
  recompute_strides();
}

bool Tensor::is_contiguous() const {
  if (in_view_) return false;
  for (size_t i = 0; i < dim_order_.size(); ++i) {
    if (dim_order_[i] != i) return false;
  }
  return true;
}

void Tensor::recompute_strides() {
  // Mirrors ExecuTorch's dim_order_to_stride: the innermost dim in dim_order has
  // stride 1; a zero-sized dim does not zero the strides of the dims outside it.
  const size_t n = sizes_.size();
  strides_.assign(n, 1);
  if (n == 0) return;
  strides_[dim_order_[n - 1]] = 1;
  for (size_t k = n - 1; k-- > 0;) {
    const uint8_t inner = dim_order_[k + 1];
    const int64_t s = sizes_[inner];
    strides_[dim_order_[k]] = s == 0 ? strides_[inner] : strides_[inner] * s;
  }
}

void Tensor::set_strided_view(const void* data, std::span<const int64_t> sizes, std::span<const int64_t> strides) {
  if (!in_view_) {
    own_data_ = data_;
    own_capacity_ = capacity_bytes_;
    in_view_ = true;
  }
  data_ = const_cast<void*>(data);
  capacity_bytes_ = 0;  // nothing may be written through a view
  sizes_.assign(sizes.begin(), sizes.end());
  strides_.assign(strides.begin(), strides.end());
  numel_ = 1;
  for (int64_t s : sizes_) numel_ *= s;
}

void Tensor::end_view() {
  data_ = own_data_;
  capacity_bytes_ = own_capacity_;
  own_data_ = nullptr;
  own_capacity_ = 0;
  in_view_ = false;
  recompute_strides();
}

Status Tensor::resize(std::span<const int64_t> new_sizes) {
  const bool was_view = in_view_;
  if (was_view) end_view();
  HF2PTE_CHECK_OR_RETURN(new_sizes.size() == sizes_.size(), kInvalidArgument,
                         "cannot resize tensor of rank {} to rank {} (shape [{}])", sizes_.size(),
                         new_sizes.size(), fmt::join(new_sizes, ", "));
  bool same = true;
  for (size_t i = 0; i < new_sizes.size(); ++i) same = same && new_sizes[i] == sizes_[i];
  if (same && !was_view) return Status::ok();  // a former view's shape is checked against its own memory
  HF2PTE_CHECK_OR_RETURN(same || dynamism_ != ShapeDynamism::kStatic, kInvalidArgument,
                         "cannot resize static tensor of shape [{}] to [{}]", fmt::join(sizes_, ", "),
                         fmt::join(new_sizes, ", "));
  // numel * element size, checked for overflow so a hostile shape cannot wrap
  // around and pass the capacity check.
  const size_t esize = element_size(dtype_);
  uint64_t bytes = esize;
  for (int64_t s : new_sizes) {
    HF2PTE_CHECK_OR_RETURN(s >= 0, kInvalidArgument, "negative size in shape [{}]",
                           fmt::join(new_sizes, ", "));
    if (s != 0 && bytes > std::numeric_limits<uint64_t>::max() / uint64_t(s)) {
      return make_error(ErrorCode::kOutOfRange, "shape [{}] overflows", fmt::join(new_sizes, ", "));
    }
    bytes *= uint64_t(s);
  }
  HF2PTE_CHECK_OR_RETURN(bytes <= capacity_bytes_, kOutOfRange,
                         "shape [{}] needs {} bytes, exceeding the planned capacity of {} bytes (shape [{}])",
                         fmt::join(new_sizes, ", "), bytes, capacity_bytes_, fmt::join(sizes_, ", "));
  sizes_.assign(new_sizes.begin(), new_sizes.end());
  // bytes fits the capacity, so numel cannot overflow here.
  numel_ = 1;
  for (int64_t s : sizes_) numel_ *= s;
  recompute_strides();
  return Status::ok();
}

}  // namespace hf2pte::rt
