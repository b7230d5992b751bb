// Portable reference kernels: one per HF2PTE_KERNEL_OP row of ops/ops.def.
//
// They define what every op means at runtime (ATen semantics, float math
// accumulated in double where it matters), so optimized and delegate kernels
// are tested against them. Each kernel takes the KernelCall args in schema
// order plus the trailing return slot (docs/pte-format.md §4).
#pragma once

#include <span>

#include "core/status.h"
#include "ops/op_table.h"
#include "runtime/evalue.h"
#include "runtime/kernel.h"

namespace hf2pte::kernels {

/// The signature of every portable kernel (a plain function, so the
/// registration table below is a constant array).
using PortableKernelFn = Status (*)(rt::KernelContext&, std::span<rt::EValue*>);

/// Portable kernel `kernels::<Id>` for each HF2PTE_KERNEL_OP row, e.g.
/// `Status AddOut(rt::KernelContext&, std::span<rt::EValue*>)` for aten::add.out.
/// Errors (bad arg tags, shapes, dtypes, indices, out capacity) come back as a
/// Status whose message starts with the kernel key.
#define HF2PTE_KERNEL_OP(id, name, overload, schema) \
  Status id(rt::KernelContext& ctx, std::span<rt::EValue*> args);
#define HF2PTE_GRAPH_OP(id, name, overload, schema)
#include "ops/ops.def"
#undef HF2PTE_KERNEL_OP
#undef HF2PTE_GRAPH_OP

/// One row of the portable kernel table.
struct PortableKernel {
  OpId op;
  PortableKernelFn fn;
};

/// Every portable kernel, in ops.def order (one row per HF2PTE_KERNEL_OP).
std::span<const PortableKernel> portable_kernel_table();

/// Registers every portable kernel under its kernel key ("aten::add.out").
/// Later registrations of the same key (e.g. optimized kernels) replace these.
void register_portable_kernels(rt::KernelRegistry& registry);

/// A registry holding just the portable kernels, built once on first use.
const rt::KernelRegistry& portable_registry();

}  // namespace hf2pte::kernels

namespace hf2pte {
// Also reachable as hf2pte::register_portable_kernels / hf2pte::portable_registry.
using kernels::portable_registry;
using kernels::register_portable_kernels;
}  // namespace hf2pte
