// The portable kernel table: the ops.def X-macro expanded into a constant
// array, so adding a kernel op to ops.def without a kernel is a link error.
#include <array>

#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

namespace {

constexpr PortableKernel kPortableKernels[] = {
#define HF2PTE_KERNEL_OP(id, name, overload, schema) {OpId::id, &kernels::id},
#define HF2PTE_GRAPH_OP(id, name, overload, schema)
#include "ops/ops.def"
#undef HF2PTE_KERNEL_OP
#undef HF2PTE_GRAPH_OP
};

}  // namespace

std::span<const PortableKernel> portable_kernel_table() { return kPortableKernels; }

void register_portable_kernels(rt::KernelRegistry& registry) {
  for (const PortableKernel& k : kPortableKernels) {
    registry.register_kernel(op_info(k.op).kernel_key(), k.fn);
  }
}

const rt::KernelRegistry& portable_registry() {
  // Function-local static: built once, thread-safe, never destroyed before use.
  static const rt::KernelRegistry registry = [] {
    rt::KernelRegistry r;
    register_portable_kernels(r);
    return r;
  }();
  return registry;
}

}  // namespace hf2pte::kernels
