// Optimized kernels outside matmul (one .cpp each), registered by
// register_optimized_kernels over the portable ones.
#pragma once

#include <span>

#include "core/status.h"
#include "runtime/evalue.h"
#include "runtime/kernel.h"

namespace hf2pte::kernels {

/// aten::_softmax.out, last-dim contiguous float32 (else portable).
Status softmax_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);


/// aten::permute_copy.out for 4-byte dtypes: last dim kept, or the last two
/// swapped (else portable).
Status permute_copy_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);


/// aten::mm.out / bmm.out / addmm.out: contiguous float32 through OpenBLAS
/// sgemm, M = 1 through the SIMD GEMV (blas_matmul.cpp).
Status mm_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);
Status bmm_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);
Status addmm_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);


/// aten::where.self_out: bool condition matching self's trailing dims, f32 /
/// bf16 / f16 self, one-element other (the attention mask) (else portable).
Status where_self_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);


/// aten::convolution.out (2-D f32 NCHW): im2col + gemm_f32 per image and group.
Status convolution_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);
/// aten::index_select.out with a 1-D i64 index on contiguous tensors: one memcpy per row.
Status index_select_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);
/// aten::clamp.out on contiguous f32 (one min/max pass, threaded).
Status clamp_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);
/// aten::mean.out over the last dim of contiguous f32 (LayerNorm / RMSNorm
/// statistics): rows across the pool, each summed in double as the portable kernel does.
Status mean_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);
/// aten::exp.out / aten::erf.out on contiguous f32 (float math, threaded).
Status erf_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);
Status exp_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);
/// aten::index_put_ with one 1-D i64 index tensor (the KV-cache write): row
/// memcpys (else portable).
Status index_put_(rt::KernelContext& ctx, std::span<rt::EValue*> args);
/// llama::custom_sdpa.out reading the static cache in place (custom_sdpa.cpp).
Status custom_sdpa_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);


/// aten::mul.Scalar_out, contiguous float32 (else portable).
Status mul_scalar_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);

/// slice_copy.Tensor_out, step 1, contiguous self and out: one memcpy per
/// outer index (the K/V cache slices of --attention-span written), large
/// copies split across the pool.
Status slice_copy_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);


/// Elementwise ops on contiguous f32 / bf16 / f16 tensors in SIMD-widened
/// blocks (floating_elementwise.cpp): add / sub (alpha 1) / mul with
/// broadcasting, sigmoid, and _to_dim_order_copy's contiguous casts (else portable).
Status add_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);
Status sub_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);
Status mul_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);
Status sigmoid_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);
Status to_dim_order_copy_out(rt::KernelContext& ctx, std::span<rt::EValue*> args);

}  // namespace hf2pte::kernels
