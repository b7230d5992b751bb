// The kernel sets the shared op tests run against in this binary: the
// portable kernels, whose float results must match hand-computed values
// to float32 rounding.
#include "kernels/portable/kernels.h"
#include "kernels/portable/test/op_test_util.h"

namespace hf2pte::kernels::testing {

std::vector<KernelSet> kernel_sets_under_test() {
  return {KernelSet{"portable", &portable_registry, 1e-6}};
}

}  // namespace hf2pte::kernels::testing
