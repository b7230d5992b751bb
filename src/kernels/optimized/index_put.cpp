// index_put_ for the KV-cache write: self [..., S, ...] indexed by one 1-D
// i64 position tensor at dim d (leading indices None), values exactly the
// indexed shape, no accumulate. Rows below dim d+1 are contiguous, so each
// (outer, position) pair is one memcpy. Anything else (and every
// out-of-range position, for its error) is the portable kernel's.
#include <cstring>

#include "kernels/optimized/optimized_ops.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

// [self, indices, values, accumulate, ret]
Status index_put_(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  if (args.size() != 5 || !args[0]->is_tensor() || !args[2]->is_tensor() || !args[3]->is_bool() || args[3]->i != 0 ||
      args[1]->tag != rt::Tag::kOptionalTensorList) {
    return kernels::IndexPut_(ctx, args);
  }
  rt::Tensor& self = *args[0]->tensor;
  const rt::Tensor& values = *args[2]->tensor;
  const auto& items = args[1]->items;
  const int rank = self.dim();
  int d = -1;
  for (size_t k = 0; k < items.size(); ++k) {
    const bool none = items[k] == nullptr || items[k]->is_none();
    if (none) continue;
    if (d >= 0 || !items[k]->is_tensor()) return kernels::IndexPut_(ctx, args);
    d = int(k);
  }
  if (d < 0 || d >= rank || self.dtype() != values.dtype() || !self.is_contiguous() || !values.is_contiguous() ||
      self.raw_data() == nullptr || values.raw_data() == nullptr) {
    return kernels::IndexPut_(ctx, args);
  }
  const rt::Tensor& idx = *items[size_t(d)]->tensor;
  if (idx.dtype() != ScalarType::kLong || idx.dim() != 1 || !idx.is_contiguous() || values.dim() != rank) {
    return kernels::IndexPut_(ctx, args);
  }
  const int64_t npos = idx.size(0), size_d = self.size(d);
  for (int i = 0; i < rank; ++i) {
    if (values.size(i) != (i == d ? npos : self.size(i))) return kernels::IndexPut_(ctx, args);
  }
  const int64_t* pos = idx.data<int64_t>();
  for (int64_t p = 0; p < npos; ++p) {
    if (pos[p] < -size_d || pos[p] >= size_d) return kernels::IndexPut_(ctx, args);
  }
  int64_t outer = 1, inner_bytes = int64_t(element_size(self.dtype()));
  for (int i = 0; i < d; ++i) outer *= self.size(i);
  for (int i = d + 1; i < rank; ++i) inner_bytes *= self.size(i);
  auto* dst = static_cast<uint8_t*>(self.raw_data());
  const auto* src = static_cast<const uint8_t*>(values.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t p = 0; p < npos; ++p) {
      const int64_t at = pos[p] < 0 ? pos[p] + size_d : pos[p];
      std::memcpy(dst + (o * size_d + at) * inner_bytes, src + (o * npos + p) * inner_bytes, size_t(inner_bytes));
    }
  }
  if (args[4] != args[0]) *args[4] = *args[0];
  return Status::ok();
}

}  // namespace hf2pte::kernels
