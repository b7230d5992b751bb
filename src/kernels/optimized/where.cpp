// where.self_out for the attention mask: floating self (the scores: f32,
// bf16 or f16), a bool condition equal to self's trailing dims after its
// leading 1s (broadcast over heads), a one-element other (-inf) of self's
// dtype. Anything else is the portable kernel's. A select copies values, so
// 16-bit tensors are selected as their bits.
#include <algorithm>
#include <cstring>

#include "kernels/optimized/optimized_ops.h"
#include "kernels/optimized/simd_kernels.h"
#include "kernels/optimized/thread_pool.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

namespace {

void select_row16(const bool* c, const uint16_t* s, uint16_t o, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = c[i] ? s[i] : o;
}

/// fn(b, i0, i1) over [0, outer) x [0, inner) in runs of at most 64K
/// elements, across the pool from 128K elements on (the scores of a prefill
/// are heads x L x S: 3M elements at 512 tokens); a decode step's few
/// thousand stay on the calling thread.
template <class Fn>
void for_each_run(int64_t outer, int64_t inner, const Fn& fn) {
  constexpr int64_t kRun = int64_t(1) << 16;
  const int64_t per_row = (inner + kRun - 1) / kRun, runs = outer * per_row;
  parallel_for(runs, outer * inner >= 2 * kRun ? 1 : runs, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / per_row, i0 = (r % per_row) * kRun;
      fn(b, i0, std::min(inner, i0 + kRun));
    }
  });
}

}  // namespace

// [condition, self, other, out, ret]
Status where_self_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  if (args.size() != 5 || !args[0]->is_tensor() || !args[1]->is_tensor() || !args[2]->is_tensor() ||
      !args[3]->is_tensor()) {
    return kernels::WhereSelfOut(ctx, args);
  }
  const rt::Tensor &cond = *args[0]->tensor, &self = *args[1]->tensor, &other = *args[2]->tensor;
  rt::Tensor& out = *args[3]->tensor;
  const ScalarType t = self.dtype();
  const bool wide = t == ScalarType::kFloat;
  bool fast = cond.dtype() == ScalarType::kBool &&
              (wide || t == ScalarType::kBFloat16 || t == ScalarType::kHalf) && other.dtype() == t &&
              out.dtype() == t && other.numel() == 1 &&
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
  const size_t elem = wide ? sizeof(float) : sizeof(uint16_t);
  if (cond.numel() == 1) {  // one flag for the whole tensor (Mamba's "continue from the state")
    if (*cond.data<bool>()) {
      if (out.raw_data() != self.raw_data()) std::memcpy(out.raw_data(), self.raw_data(), size_t(self.numel()) * elem);
    } else if (wide) {
      std::fill(out.data<float>(), out.data<float>() + self.numel(), *other.data<float>());
    } else {
      std::fill(out.data<uint16_t>(), out.data<uint16_t>() + self.numel(), *other.data<uint16_t>());
    }
    if (args[4] != args[3]) *args[4] = *args[3];
    return Status::ok();
  }
  const int64_t inner = cond.numel(), outer = self.numel() / inner;
  const bool* c = cond.data<bool>();
  if (wide) {
    const float* s = self.data<float>();
    const float o = *other.data<float>();
    float* y = out.data<float>();
    const SimdKernels& simd_k = simd();
    for_each_run(outer, inner, [&](int64_t b, int64_t i0, int64_t i1) {
      simd_k.select_row(c + i0, s + b * inner + i0, o, y + b * inner + i0, i1 - i0);
    });
  } else {
    const uint16_t* s = self.data<uint16_t>();
    const uint16_t o = *other.data<uint16_t>();
    uint16_t* y = out.data<uint16_t>();
    for_each_run(outer, inner, [&](int64_t b, int64_t i0, int64_t i1) {
      select_row16(c + i0, s + b * inner + i0, o, y + b * inner + i0, i1 - i0);
    });
  }
  if (args[4] != args[3]) *args[4] = *args[3];
  return Status::ok();
}

}  // namespace hf2pte::kernels
