// Kernels and the registry that maps "name.overload" to them.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/status.h"
#include "runtime/evalue.h"

namespace hf2pte::rt {

/// Per-call context. Kernels report errors by returning a Status.
struct KernelContext {
  std::string_view op_name;  ///< "aten::add.out", for error messages
  /// The Method proved that every reader of this call's out tensor takes a
  /// strided view (Backend::takes_strided_views) and that its input is not
  /// written before they have run: a slice may then hand out a view of its
  /// input instead of a copy (Tensor::set_strided_view).
  bool output_may_view = false;
};

/// A kernel receives its KernelCall args in schema order plus the return slot
/// (docs/pte-format.md §4): e.g. add.out gets [self, other, alpha, out, ret].
using KernelFn = std::function<Status(KernelContext&, std::span<EValue*>)>;

/// Kernel registry keyed by "namespace::name.overload" (no dot when the overload is empty).
/// Applications register their own kernels for custom operators here.
class KernelRegistry {
 public:
  /// Registers `fn` under `key`; replaces an earlier registration of the same key.
  void register_kernel(std::string key, KernelFn fn);
  /// nullptr when the key is unknown.
  const KernelFn* find(std::string_view key) const;
  size_t size() const { return kernels_.size(); }

 private:
  std::unordered_map<std::string, KernelFn> kernels_;
};

}  // namespace hf2pte::rt
