// Runtime tensor: a view over memory the Method owns (planned arena, constant
// segment, or caller input). Kernels never allocate; they resize their `out`
// tensors within the capacity the memory plan gave them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/scalar_type.h"
#include "core/status.h"

namespace hf2pte::rt {

inline constexpr int kMaxTensorRank = 16;

enum class ShapeDynamism : uint8_t { kStatic = 0, kDynamicBound = 1, kDynamicUnbound = 2 };

class Tensor {
 public:
  Tensor() = default;
  /// `sizes` are the planned (upper-bound) sizes; `capacity_bytes` is what `data` can hold.
  Tensor(ScalarType dtype, std::vector<int64_t> sizes, std::vector<uint8_t> dim_order, void* data,
         size_t capacity_bytes, ShapeDynamism dynamism);

  ScalarType dtype() const { return dtype_; }
  int dim() const { return int(sizes_.size()); }
  std::span<const int64_t> sizes() const { return sizes_; }
  int64_t size(int d) const { return sizes_[size_t(d < 0 ? d + dim() : d)]; }
  std::span<const int64_t> strides() const { return strides_; }
  std::span<const uint8_t> dim_order() const { return dim_order_; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return size_t(numel_) * element_size(dtype_); }
  size_t capacity_bytes() const { return capacity_bytes_; }
  ShapeDynamism dynamism() const { return dynamism_; }
  bool is_contiguous() const;

  void* raw_data() { return data_; }
  const void* raw_data() const { return data_; }
  template <typename T> T* data() { return static_cast<T*>(data_); }
  template <typename T> const T* data() const { return static_cast<const T*>(data_); }
  void set_data(void* data, size_t capacity_bytes) { data_ = data; capacity_bytes_ = capacity_bytes; }

  /// Makes this tensor a strided view of another tensor's bytes: `data` with
  /// shape `sizes` (same rank) and element `strides`, nothing copied. Only for
  /// values every reader of which takes strided views (the Method decides:
  /// KernelContext::output_may_view). The next resize() ends the view first, so
  /// a kernel that writes this tensor writes its own memory again.
  void set_strided_view(const void* data, std::span<const int64_t> sizes, std::span<const int64_t> strides);
  /// True between set_strided_view and the next resize().
  bool is_strided_view() const { return in_view_; }
  /// What the tensor's own memory holds (its planned capacity, also while a view).
  size_t own_capacity_bytes() const { return in_view_ ? own_capacity_ : capacity_bytes_; }

  /// Changes the shape (same rank). STATIC tensors only accept their own shape;
  /// DYNAMIC_BOUND tensors accept any shape whose bytes fit the capacity.
  Status resize(std::span<const int64_t> new_sizes);

 private:
  void recompute_strides();
  void end_view();

  ScalarType dtype_ = ScalarType::kFloat;
  std::vector<int64_t> sizes_;
  std::vector<int64_t> strides_;
  std::vector<uint8_t> dim_order_;
  int64_t numel_ = 0;
  void* data_ = nullptr;
  size_t capacity_bytes_ = 0;
  ShapeDynamism dynamism_ = ShapeDynamism::kStatic;
  // While a strided view: the tensor's own memory, restored by end_view().
  bool in_view_ = false;
  void* own_data_ = nullptr;
  size_t own_capacity_ = 0;
};

}  // namespace hf2pte::rt
