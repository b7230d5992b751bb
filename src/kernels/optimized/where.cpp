// where.self_out for the attention mask: float self (the scores), a bool
// condition equal to self's trailing dims after its leading 1s (broadcast
// over heads), a one-element other (-inf). Anything else is the portable
// kernel's.
#include <cstring>

#include "kernels/optimized/optimized_ops.h"
#include "kernels/optimized/simd_kernels.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {


// [condition, self, other, out, ret]
Status where_self_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  if (args.size() != 5 || !args[0]->is_tensor() || !args[1]->is_tensor() || !args[2]->is_tensor() ||
      !args[3]->is_tensor()) {
    return kernels::WhereSelfOut(ctx, args);
  }
  const rt::Tensor &cond = *args[0]->tensor, &self = *args[1]->tensor, &other = *args[2]->tensor;
  rt::Tensor& out = *args[3]->tensor;
  bool fast = cond.dtype() == ScalarType::kBool && self.dtype() == ScalarType::kFloat &&
              other.dtype() == ScalarType::kFloat && out.dtype() == ScalarType::kFloat && other.numel() == 1 &&
              other.dim() <= self.dim() && cond.dim() <= self.dim() && cond.is_contiguous() && self.is_contiguous() &&
              cond.raw_data() != nullptr && self.raw_data() != nullptr && other.raw_data() != nullptr && cond.numel() > 0;
  // Leading 1s of the condition broadcast too (sdpa_to_math views the mask as
  // [1, 1, 1, L, S] against scores [lead, kv, group, L, S]).
  int lead_ones = 0;
  while (lead_ones < cond.dim() && cond.size(lead_ones) == 1) ++lead_ones;
  for (int d = lead_ones; fast && d < cond.dim(); ++d) {
    fast = cond.size(d) == self.size(self.dim() - cond.dim() + d);
  }
  if (!fast || !out.resize(self.sizes()) || !out.is_contiguous()) return kernels::WhereSelfOut(ctx, args);
  if (cond.numel() == 1) {  // one flag for the whole tensor (Mamba's "continue from the state")
    float* y = out.data<float>();
    if (*cond.data<bool>()) {
      if (y != self.data<float>()) std::memcpy(y, self.data<float>(), size_t(self.numel()) * sizeof(float));
    } else {
      std::fill(y, y + self.numel(), *other.data<float>());
    }
    if (args[4] != args[3]) *args[4] = *args[3];
    return Status::ok();
  }
  const int64_t inner = cond.numel(), outer = self.numel() / inner;
  const bool* c = cond.data<bool>();
  const float* s = self.data<float>();
  const float o = *other.data<float>();
  float* y = out.data<float>();
  const SimdKernels& simd_k = simd();
  for (int64_t b = 0; b < outer; ++b) simd_k.select_row(c, s + b * inner, o, y + b * inner, inner);
  if (args[4] != args[3]) *args[4] = *args[3];
  return Status::ok();
}

}  // namespace hf2pte::kernels
