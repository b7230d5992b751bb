// The optimized kernel table, registered over the portable kernels.
#include <array>

#include "kernels/optimized/kernels.h"
#include "kernels/optimized/optimized_ops.h"
#include "kernels/optimized/thread_pool.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

namespace {

struct OptimizedKernel {
  OpId op;
  PortableKernelFn fn;
};

// Every kernel here keeps the portable kernel's semantics and falls back to
// it for dtypes/layouts it does not handle.
constexpr std::array kOptimizedKernels{
    OptimizedKernel{OpId::MmOut, mm_out},
    OptimizedKernel{OpId::BmmOut, bmm_out},
    OptimizedKernel{OpId::AddmmOut, addmm_out},
    OptimizedKernel{OpId::SoftmaxOut, softmax_out},
    OptimizedKernel{OpId::PermuteCopyOut, permute_copy_out},
    OptimizedKernel{OpId::WhereSelfOut, where_self_out},
    OptimizedKernel{OpId::IndexPut_, index_put_},
    OptimizedKernel{OpId::MulScalarOut, mul_scalar_out},
    OptimizedKernel{OpId::SliceCopyTensorOut, slice_copy_out},
    OptimizedKernel{OpId::IndexSelectOut, index_select_out},
    OptimizedKernel{OpId::ExpOut, exp_out},
    OptimizedKernel{OpId::ErfOut, erf_out},
    OptimizedKernel{OpId::ConvolutionOut, convolution_out},
    OptimizedKernel{OpId::ClampOut, clamp_out},
    OptimizedKernel{OpId::MeanOut, mean_out},
    OptimizedKernel{OpId::AddOut, add_out},
    OptimizedKernel{OpId::SubOut, sub_out},
    OptimizedKernel{OpId::MulOut, mul_out},
    OptimizedKernel{OpId::SigmoidOut, sigmoid_out},
    OptimizedKernel{OpId::ToDimOrderCopyOut, to_dim_order_copy_out},
    OptimizedKernel{OpId::LlamaCustomSdpaOut, custom_sdpa_out},
};

}  // namespace

void register_optimized_kernels(rt::KernelRegistry& registry) {
  for (const auto& k : kOptimizedKernels) registry.register_kernel(op_info(k.op).kernel_key(), k.fn);
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

void set_kernel_threads(int threads) {
  set_pool_threads(threads);  // OpenBLAS runs single-threaded inside the pool (gemm.h)
}

}  // namespace hf2pte::kernels
