// Shared plumbing of the portable kernels: typed argument access named by the
// op's schema, shape helpers (broadcasting, dim normalisation) and one strided
// loop that every kernel iterates with.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/portable/dtype_dispatch.h"
#include "ops/op_table.h"
#include "runtime/evalue.h"
#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace hf2pte::kernels {

using rt::kMaxTensorRank;

/// A fixed-capacity shape or stride vector: kernels build these per call
/// without touching the heap.
using DimArray = std::array<int64_t, kMaxTensorRank>;

/// "[2, 3]" for error messages.
std::string format_shape(std::span<const int64_t> sizes);

/// A Scalar argument (Int, Double or Bool) with its kind kept, because type
/// promotion depends on whether a Python number was an int or a float.
struct ScalarArg {
  enum class Kind { kBool, kInt, kDouble } kind = Kind::kInt;
  int64_t i = 0;    ///< kInt / kBool
  double d = 0.0;   ///< kDouble
  double as_double() const { return kind == Kind::kDouble ? d : double(i); }
  bool is_floating() const { return kind == Kind::kDouble; }
};

/// Typed, checked access to one KernelCall's args. Argument names come from the
/// op's schema in ops.def, so an error reads "aten::mm.out: ... (argument 'mat2')".
class ArgReader {
 public:
  /// Checks the arity (schema args + one return slot) and that no slot is null.
  static Result<ArgReader> make(OpId op, std::span<rt::EValue*> args);

  OpId op() const { return op_; }
  std::string_view key() const { return op_key(op_); }

  /// A Tensor argument whose data covers its sizes and strides.
  Result<rt::Tensor*> tensor(size_t i) const;
  /// A Tensor argument whose metadata alone is used (no data check): sym_size
  /// may ask for the shape of a tensor whose memory is not live.
  Result<rt::Tensor*> tensor_meta(size_t i) const;
  /// An optional Tensor: nullptr for None.
  Result<rt::Tensor*> opt_tensor(size_t i) const;
  Result<int64_t> int_arg(size_t i) const;
  /// `int?` / `SymInt?`: nullopt for None.
  Result<std::optional<int64_t>> opt_int(size_t i) const;
  Result<bool> bool_arg(size_t i) const;
  Result<ScalarArg> scalar(size_t i) const;
  /// `int[]` or `int[]?` (None gives `*is_none = true` and an empty list).
  Status int_list(size_t i, std::vector<int64_t>* out, bool optional = false,
                  bool* is_none = nullptr) const;
  /// `Tensor[]` (no None) or `Tensor?[]` (nullptr for None); every tensor is validated.
  Status tensor_list(size_t i, std::vector<rt::Tensor*>* out) const;

  rt::EValue* raw(size_t i) const { return args_[i]; }
  /// The trailing return slot.
  rt::EValue* ret() const { return args_.back(); }

  /// Makes the return slot hold the value of arg `i` (the out or the mutated
  /// self), as ExecuTorch's kernel wrappers do; a no-op when the emitter made
  /// the return slot the same value, which it does for out-variants.
  void set_return(size_t i) const {
    if (args_.back() != args_[i]) *args_.back() = *args_[i];
  }

  /// Prefixes `status` with the op key unless it already names an op.
  Status wrap(const Status& status) const;

 private:
  ArgReader(OpId op, std::span<rt::EValue*> args) : op_(op), args_(args) {}
  const char* name(size_t i) const;

  OpId op_;
  std::span<rt::EValue*> args_;
};

/// Checks that the data behind `t` covers every element its sizes and strides
/// can address (defence in depth against inconsistent tensors).
Status validate_tensor(const rt::Tensor& t, OpId op, std::string_view what);

/// Resizes `out` to `sizes` and validates it; errors name the op and the out arg.
Status resize_out(rt::Tensor& out, std::span<const int64_t> sizes, OpId op);

/// Normalises a possibly negative `dim` against `rank` (0-dim tensors accept -1 and 0, as in ATen).
Result<int64_t> normalize_dim(int64_t dim, int64_t rank, OpId op);

/// torch's slice bounds on a dim of `size`: negatives wrap once, then both are
/// clamped into [0, size] with end >= start (out of range gives an empty slice,
/// not an error). None is 0 / to the end.
struct SliceBounds {
  int64_t start, end;
};
SliceBounds slice_bounds(std::optional<int64_t> start, std::optional<int64_t> end, int64_t size);

/// numpy-style broadcast of the given shapes; errors name all shapes.
Status broadcast_shapes(std::span<const std::span<const int64_t>> shapes, OpId op,
                        std::vector<int64_t>* out);

/// Strides of `t` seen through a broadcast to `out_sizes` (right-aligned; 0 on broadcast dims).
DimArray broadcast_strides(const rt::Tensor& t, std::span<const int64_t> out_sizes);

/// Strides of `t` copied into a DimArray.
DimArray strides_of(const rt::Tensor& t);

/// True when `dim_order` is 0, 1, ..., n-1 (or empty).
bool is_contiguous_dim_order(std::span<const uint8_t> dim_order);

/// Calls `f(offsets)` once per index of `sizes` (row-major order), where
/// `offsets[k]` is the element offset of operand k (sum of index * strides[k]).
/// Adjacent dims that are contiguous for every operand are merged first, so a
/// contiguous elementwise op runs as a single inner loop.
template <size_t N, typename F>
void for_each_offset(std::span<const int64_t> sizes, const std::array<DimArray, N>& strides,
                     F&& f) {
  // Drop size-1 dims and merge contiguous neighbours (outermost first).
  DimArray sz{};
  std::array<DimArray, N> st{};
  int rank = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return;
    if (sizes[d] == 1) continue;
    bool merge = rank > 0;
    for (size_t k = 0; k < N && merge; ++k) {
      merge = st[k][rank - 1] == strides[k][d] * sizes[d];
    }
    if (merge) {
      sz[rank - 1] *= sizes[d];
      for (size_t k = 0; k < N; ++k) st[k][rank - 1] = strides[k][d];
    } else {
      sz[rank] = sizes[d];
      for (size_t k = 0; k < N; ++k) st[k][rank] = strides[k][d];
      ++rank;
    }
  }
  std::array<int64_t, N> off{};
  if (rank == 0) {
    f(off);
    return;
  }
  const int inner = rank - 1;
  const int64_t inner_size = sz[inner];
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = st[k][inner];
  DimArray idx{};
  while (true) {
    std::array<int64_t, N> o = off;
    for (int64_t i = 0; i < inner_size; ++i) {
      f(o);
      for (size_t k = 0; k < N; ++k) o[k] += inner_stride[k];
    }
    // Odometer step over the outer dims.
    int d = inner - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < sz[d]) {
        for (size_t k = 0; k < N; ++k) off[k] += st[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k) off[k] -= st[k][d] * (sz[d] - 1);
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace hf2pte::kernels
