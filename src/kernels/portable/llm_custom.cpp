// Upstream's LLM custom ops (extension/llm/custom_ops), as optimum-executorch's
// --use_custom_sdpa / --use_custom_kv_cache programs call them (ops.def):
// llama::update_cache writes a call's K or V rows into a [B, max_seq_len,
// kv_heads, head_dim] cache at start_pos; llama::custom_sdpa attends over the
// cache in place, only the positions a query may see. Reference math: double
// accumulation, one rounding per output.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/portable/dtype_dispatch.h"
#include "kernels/portable/kernel_util.h"
#include "kernels/portable/kernels.h"
#include "kernels/portable/llm_custom.h"

namespace hf2pte::kernels {

namespace {

Status check_rank4_contiguous(const rt::Tensor& t, OpId op, const char* what) {
  HF2PTE_CHECK_OR_RETURN(t.dim() == 4, kInvalidArgument, "{}: {} must be 4-D [batch, seq, heads, head_dim]; got {}-D",
                         op_key(op), what, t.dim());
  HF2PTE_CHECK_OR_RETURN(t.is_contiguous(), kNotSupported, "{}: {} must be contiguous", op_key(op), what);
  return Status::ok();
}

}  // namespace

Status check_custom_sdpa_args(OpId op, const rt::Tensor& q, const rt::Tensor& k, const rt::Tensor& v,
                              int64_t start_pos, const rt::Tensor* mask, double dropout) {
  HF2PTE_RETURN_IF_ERROR(check_rank4_contiguous(q, op, "query"));
  HF2PTE_RETURN_IF_ERROR(check_rank4_contiguous(k, op, "key"));
  HF2PTE_RETURN_IF_ERROR(check_rank4_contiguous(v, op, "value"));
  for (const rt::Tensor* t : {&q, &k, &v}) {
    HF2PTE_CHECK_OR_RETURN(kFloating.contains(t->dtype()) && t->dtype() == q.dtype(), kNotSupported,
                           "{}: expected query, key and value of one float dtype; got {} and {}", op_key(op),
                           scalar_type_name(q.dtype()), scalar_type_name(t->dtype()));
  }
  HF2PTE_CHECK_OR_RETURN(mask == nullptr, kNotSupported,
                         "{}: attn_mask is not supported (hf2pte's programs use is_causal)", op_key(op));
  HF2PTE_CHECK_OR_RETURN(dropout == 0.0, kNotSupported, "{}: dropout {} is not supported at inference", op_key(op),
                         dropout);
  const int64_t B = q.size(0), S = q.size(1), H = q.size(2), D = q.size(3);
  const int64_t M = k.size(1), Hk = k.size(2);
  HF2PTE_CHECK_OR_RETURN(k.size(0) == B && v.size(0) == B && v.size(1) == M && v.size(2) == Hk && k.size(3) == D &&
                             v.size(3) == D,
                         kInvalidArgument, "{}: key and value must be [{}, max_seq_len, kv_heads, {}] alike", op_key(op),
                         B, D);
  HF2PTE_CHECK_OR_RETURN(Hk > 0 && H % Hk == 0, kInvalidArgument, "{}: {} query heads do not group over {} kv heads",
                         op_key(op), H, Hk);
  HF2PTE_CHECK_OR_RETURN(start_pos >= 0 && start_pos <= M - S, kOutOfRange,
                         "{}: start_pos {} + {} queries exceeds the cache's {} positions", op_key(op), start_pos, S, M);
  return Status::ok();
}

// [value, cache, start_pos, out, ret]
Status LlamaUpdateCacheOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::LlamaUpdateCacheOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * value, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * cache, r.tensor(1));
  HF2PTE_ASSIGN_OR_RETURN(int64_t start, r.int_arg(2));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(3));
  (void)out;  // a placeholder, as in upstream
  HF2PTE_RETURN_IF_ERROR(check_rank4_contiguous(*value, op, "value"));
  HF2PTE_RETURN_IF_ERROR(check_rank4_contiguous(*cache, op, "cache"));
  HF2PTE_CHECK_OR_RETURN(value->dtype() == cache->dtype(), kInvalidArgument, "{}: value is {} but the cache is {}",
                         op_key(op), scalar_type_name(value->dtype()), scalar_type_name(cache->dtype()));
  const int64_t B = value->size(0), S = value->size(1), M = cache->size(1);
  HF2PTE_CHECK_OR_RETURN(cache->size(0) == B && cache->size(2) == value->size(2) && cache->size(3) == value->size(3),
                         kInvalidArgument, "{}: value [{}, {}, {}, {}] does not fit the cache's rows", op_key(op), B, S,
                         value->size(2), value->size(3));
  HF2PTE_CHECK_OR_RETURN(start >= 0 && start <= M - S, kOutOfRange,
                         "{}: start_pos {} + {} rows exceeds the cache's {} positions", op_key(op), start, S, M);
  const size_t row = size_t(value->size(2) * value->size(3)) * element_size(value->dtype());
  auto* dst = static_cast<uint8_t*>(cache->raw_data());
  const auto* src = static_cast<const uint8_t*>(value->raw_data());
  for (int64_t b = 0; b < B; ++b) {
    std::memcpy(dst + size_t(b * M + start) * row, src + size_t(b * S) * row, size_t(S) * row);
  }
  r.set_return(3);
  return Status::ok();
}

// [query, key, value, start_pos, attn_mask, drpout_p, is_causal, scale, out, ret]
Status LlamaCustomSdpaOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::LlamaCustomSdpaOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * q, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * k, r.tensor(1));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * v, r.tensor(2));
  HF2PTE_ASSIGN_OR_RETURN(int64_t start, r.int_arg(3));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * mask, r.opt_tensor(4));
  HF2PTE_ASSIGN_OR_RETURN(CustomSdpaScalars sc, custom_sdpa_scalars(r, *q));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(8));
  HF2PTE_RETURN_IF_ERROR(check_custom_sdpa_args(op, *q, *k, *v, start, mask, sc.dropout));
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, q->sizes(), op));
  HF2PTE_CHECK_OR_RETURN(out->dtype() == q->dtype(), kInvalidArgument, "{}: out must be {} like the query",
                         op_key(op), scalar_type_name(q->dtype()));
  const int64_t B = q->size(0), S = q->size(1), H = q->size(2), D = q->size(3), M = k->size(1), Hk = k->size(2);
  // In double, rounded once to the out's type (f32, or a 16-bit type widened exactly on load).
  HF2PTE_RETURN_IF_ERROR(dispatch<kFloating>(q->dtype(), op, "query", [&](auto tt) {
    using T = typename decltype(tt)::type;
    const T* pq = q->data<T>();
    const T* pk = k->data<T>();
    const T* pv = v->data<T>();
    T* po = out->data<T>();
    std::vector<double> p(static_cast<size_t>(M));
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t s = 0; s < S; ++s) {
        const int64_t keys = sc.is_causal ? start + s + 1 : start + S;
        for (int64_t h = 0; h < H; ++h) {
          const int64_t kh = h / (H / Hk);
          const T* qr = pq + ((b * S + s) * H + h) * D;
          double mx = -std::numeric_limits<double>::infinity();
          for (int64_t j = 0; j < keys; ++j) {
            const T* kr = pk + ((b * M + j) * Hk + kh) * D;
            double dot = 0;
            for (int64_t d = 0; d < D; ++d) dot += double(float(qr[d])) * double(float(kr[d]));
            p[size_t(j)] = dot * sc.scale;
            mx = std::max(mx, p[size_t(j)]);
          }
          double sum = 0;
          for (int64_t j = 0; j < keys; ++j) sum += (p[size_t(j)] = std::exp(p[size_t(j)] - mx));
          T* orow = po + ((b * S + s) * H + h) * D;
          for (int64_t d = 0; d < D; ++d) {
            double acc = 0;
            for (int64_t j = 0; j < keys; ++j) acc += p[size_t(j)] * double(float(pv[((b * M + j) * Hk + kh) * D + d]));
            orow[d] = T(float(acc / sum));
          }
        }
      }
    }
  }));
  r.set_return(8);
  return Status::ok();
}

Result<CustomSdpaScalars> custom_sdpa_scalars(const ArgReader& r, const rt::Tensor& q) {
  CustomSdpaScalars sc;
  const rt::EValue* drop = r.raw(5);
  HF2PTE_CHECK_OR_RETURN(drop->is_double() || drop->is_int(), kInvalidProgram, "{}: drpout_p must be a float",
                         r.key());
  sc.dropout = drop->is_double() ? drop->d : double(drop->i);
  HF2PTE_ASSIGN_OR_RETURN(sc.is_causal, r.bool_arg(6));
  const rt::EValue* scale = r.raw(7);
  HF2PTE_CHECK_OR_RETURN(scale->is_none() || scale->is_double(), kInvalidProgram, "{}: scale must be a float or None",
                         r.key());
  sc.scale = scale->is_none() ? 1.0 / std::sqrt(double(q.dim() == 4 ? q.size(3) : 1)) : scale->d;
  return sc;
}

}  // namespace hf2pte::kernels
