// Argument checks of llama::custom_sdpa.out shared by the portable and the
// optimized kernels (llm_custom.cpp, kernels/optimized/custom_sdpa.cpp).
#pragma once

#include "core/status.h"
#include "kernels/portable/kernel_util.h"
#include "runtime/tensor.h"

namespace hf2pte::kernels {

/// custom_sdpa's scalar arguments (drpout_p, is_causal, scale; scale None =
/// 1 / sqrt(head_dim)).
struct CustomSdpaScalars {
  double dropout = 0.0;
  bool is_causal = false;
  double scale = 1.0;
};
Result<CustomSdpaScalars> custom_sdpa_scalars(const ArgReader& r, const rt::Tensor& q);

/// q [B, S, H, D], k and v [B, max_seq_len, kv_heads, D], all f32 and
/// contiguous; no mask, no dropout; start_pos + S within the cache.
Status check_custom_sdpa_args(OpId op, const rt::Tensor& q, const rt::Tensor& k, const rt::Tensor& v,
                              int64_t start_pos, const rt::Tensor* mask, double dropout);

}  // namespace hf2pte::kernels
