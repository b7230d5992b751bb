// mm / bmm / addmm through OpenBLAS sgemm (Debian's libopenblas picks AVX-512
// kernels on this machine and reaches ~205 GFLOP/s on 2 threads; for M = 1 it
// runs a GEMV near the memory bandwidth). Row-major contiguous float32 only;
// anything else goes to the portable kernel, which also owns all argument
// checking messages.
#include <cblas.h>

#include <algorithm>
#include <span>

#include <fmt/format.h>

#include "kernels/optimized/kernels.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

namespace {

/// Names the op in a resize error, as the portable kernels do.
Status resize(rt::Tensor& out, std::span<const int64_t> shape, OpId op) {
  Status st = out.resize(shape);
  if (st) return st;
  return Status(st.code(), fmt::format("{}: {}", op_info(op).kernel_key(), st.message()));
}

bool fast_path(const rt::EValue* v, int rank) {
  return v != nullptr && v->is_tensor() && v->tensor->dtype() == ScalarType::kFloat && v->tensor->dim() == rank &&
         v->tensor->is_contiguous() && v->tensor->raw_data() != nullptr;
}

/// C[M,N] = alpha * A[M,K] B[K,N] + beta * C, all row-major contiguous.
void sgemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, const float* B, float beta, float* C) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(M), int(N), int(K), alpha, A, int(K), B, int(N), beta, C, int(N));
}

// [self, mat2, out, ret]
Status mm_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  if (args.size() != 4 || !fast_path(args[0], 2) || !fast_path(args[1], 2) || !args[2]->is_tensor() ||
      args[0]->tensor->size(1) != args[1]->tensor->size(0) || args[2]->tensor->dtype() != ScalarType::kFloat) {
    return kernels::MmOut(ctx, args);
  }
  const rt::Tensor &a = *args[0]->tensor, &b = *args[1]->tensor;
  rt::Tensor& out = *args[2]->tensor;
  int64_t shape[2] = {a.size(0), b.size(1)};
  HF2PTE_RETURN_IF_ERROR(resize(out, shape, OpId::MmOut));
  if (!out.is_contiguous()) return kernels::MmOut(ctx, args);
  if (shape[0] * shape[1] == 0) return Status::ok();
  if (a.size(1) == 0) {
    std::fill(out.data<float>(), out.data<float>() + out.numel(), 0.0f);
  } else {
    sgemm(shape[0], shape[1], a.size(1), 1.0f, a.data<float>(), b.data<float>(), 0.0f, out.data<float>());
  }
  if (args[3] != args[2]) *args[3] = *args[2];
  return Status::ok();
}

// [self, mat2, out, ret]
Status bmm_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  if (args.size() != 4 || !fast_path(args[0], 3) || !fast_path(args[1], 3) || !args[2]->is_tensor() ||
      args[0]->tensor->size(0) != args[1]->tensor->size(0) || args[0]->tensor->size(2) != args[1]->tensor->size(1) ||
      args[2]->tensor->dtype() != ScalarType::kFloat || args[0]->tensor->size(2) == 0) {
    return kernels::BmmOut(ctx, args);
  }
  const rt::Tensor &a = *args[0]->tensor, &b = *args[1]->tensor;
  rt::Tensor& out = *args[2]->tensor;
  int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  int64_t shape[3] = {B, M, N};
  HF2PTE_RETURN_IF_ERROR(resize(out, shape, OpId::BmmOut));
  if (!out.is_contiguous()) return kernels::BmmOut(ctx, args);
  for (int64_t i = 0; i < B; ++i) {
    sgemm(M, N, K, 1.0f, a.data<float>() + i * M * K, b.data<float>() + i * K * N, 0.0f, out.data<float>() + i * M * N);
  }
  if (args[3] != args[2]) *args[3] = *args[2];
  return Status::ok();
}

// [self(bias), mat1, mat2, beta, alpha, out, ret]; fast path: bias [N] or [1, N]
Status addmm_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  if (args.size() != 7 || !fast_path(args[1], 2) || !fast_path(args[2], 2) || !args[0]->is_tensor() ||
      !args[5]->is_tensor() || args[0]->tensor->dtype() != ScalarType::kFloat || !args[0]->tensor->is_contiguous() ||
      args[1]->tensor->size(1) != args[2]->tensor->size(0) || args[1]->tensor->size(1) == 0 ||
      !args[3]->is_scalar() || !args[4]->is_scalar() || args[5]->tensor->dtype() != ScalarType::kFloat) {
    return kernels::AddmmOut(ctx, args);
  }
  const rt::Tensor &bias = *args[0]->tensor, &a = *args[1]->tensor, &b = *args[2]->tensor;
  int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  bool row_bias = (bias.dim() == 1 && bias.size(0) == N) || (bias.dim() == 2 && bias.size(0) == 1 && bias.size(1) == N);
  if (!row_bias) return kernels::AddmmOut(ctx, args);
  rt::Tensor& out = *args[5]->tensor;
  int64_t shape[2] = {M, N};
  HF2PTE_RETURN_IF_ERROR(resize(out, shape, OpId::AddmmOut));
  if (!out.is_contiguous()) return kernels::AddmmOut(ctx, args);
  float beta = float(args[3]->scalar_as_double()), alpha = float(args[4]->scalar_as_double());
  float* c = out.data<float>();
  for (int64_t i = 0; i < M; ++i) {
    // beta = 0 ignores self entirely (NaN included), as ATen does.
    for (int64_t j = 0; j < N; ++j) c[i * N + j] = beta == 0.0f ? 0.0f : beta * bias.data<float>()[j];
  }
  sgemm(M, N, K, alpha, a.data<float>(), b.data<float>(), 1.0f, c);
  if (args[6] != args[5]) *args[6] = *args[5];
  return Status::ok();
}

}  // namespace

void register_optimized_kernels(rt::KernelRegistry& registry) {
  registry.register_kernel(op_info(OpId::MmOut).kernel_key(), mm_out);
  registry.register_kernel(op_info(OpId::BmmOut).kernel_key(), bmm_out);
  registry.register_kernel(op_info(OpId::AddmmOut).kernel_key(), addmm_out);
}

const rt::KernelRegistry& optimized_registry() {
  static const rt::KernelRegistry registry = [] {
    rt::KernelRegistry r;
    register_portable_kernels(r);
    register_optimized_kernels(r);
    return r;
  }();
  return registry;
}

void set_kernel_threads(int threads) { openblas_set_num_threads(threads); }

}  // namespace hf2pte::kernels
