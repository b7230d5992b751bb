// llama::custom_sdpa.out over the static cache in place: one (batch, query,
// head) per task, its keys [0, start_pos + s] (causal) read straight from the
// [B, max_seq_len, kv_heads, D] caches: q . K^T as a strided gemv_t, softmax,
// p . V as a strided gemv, all from the SIMD table. Each output is one task's,
// so the result does not depend on the thread count. Anything the checks
// refuse is the portable kernel's (which reports it).
#include <vector>

#include "kernels/optimized/optimized_ops.h"
#include "kernels/optimized/simd_kernels.h"
#include "kernels/optimized/thread_pool.h"
#include "kernels/portable/kernels.h"
#include "kernels/portable/llm_custom.h"

namespace hf2pte::kernels {

Status custom_sdpa_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::LlamaCustomSdpaOut;
  auto r = ArgReader::make(op, args);
  if (!r) return LlamaCustomSdpaOut(ctx, args);
  auto q = r->tensor(0), k = r->tensor(1), v = r->tensor(2), out = r->tensor(8);
  auto start = r->int_arg(3);
  auto mask = r->opt_tensor(4);
  if (!q || !k || !v || !out || !start || !mask) return LlamaCustomSdpaOut(ctx, args);
  auto sc = custom_sdpa_scalars(*r, **q);
  if (!sc || !check_custom_sdpa_args(op, **q, **k, **v, *start, *mask, sc->dropout) ||
      (*q)->dtype() != ScalarType::kFloat || (*out)->dtype() != ScalarType::kFloat ||
      !resize_out(**out, (*q)->sizes(), op)) {
    return LlamaCustomSdpaOut(ctx, args);
  }
  const rt::Tensor& Q = **q;
  const int64_t B = Q.size(0), S = Q.size(1), H = Q.size(2), D = Q.size(3), M = (*k)->size(1), Hk = (*k)->size(2);
  const int64_t row = Hk * D;  // floats between one position's rows of the same head
  const float* pq = Q.data<float>();
  const float* pk = (*k)->data<float>();
  const float* pv = (*v)->data<float>();
  float* po = (*out)->data<float>();
  const float scale = float(sc->scale);
  const bool causal = sc->is_causal;
  const int64_t first = *start;
  const SimdKernels& simd_k = simd();
  parallel_for(B * S * H, 1, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> p;
    p.resize(size_t(M));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t h = i % H, s = (i / H) % S, b = i / (H * S);
      const int64_t kh = h / (H / Hk), keys = causal ? first + s + 1 : first + S;
      const float* qr = pq + ((b * S + s) * H + h) * D;
      const float* kb = pk + b * M * row + kh * D;
      const float* vb = pv + b * M * row + kh * D;
      simd_k.gemv_t(qr, kb, p.data(), D, row, 0, keys);
      for (int64_t j = 0; j < keys; ++j) p[size_t(j)] *= scale;
      simd_k.softmax_row(p.data(), p.data(), keys);
      simd_k.gemv(p.data(), vb, nullptr, po + ((b * S + s) * H + h) * D, keys, row, 0, D);
    }
  });
  r->set_return(8);
  return Status::ok();
}

}  // namespace hf2pte::kernels
