// The shared op tests, run against the optimized registry (OpenBLAS
// sgemm accumulates in float, so the tolerance is float32 GEMM rounding).
#include "kernels/optimized/kernels.h"
#include "kernels/portable/test/op_test_util.h"

namespace hf2pte::kernels::testing {

std::vector<KernelSet> kernel_sets_under_test() {
  return {KernelSet{"optimized", &optimized_registry, 1e-5}};
}

}  // namespace hf2pte::kernels::testing
