#include "runtime/kernel.h"

#include <utility>

namespace hf2pte::rt {

void KernelRegistry::register_kernel(std::string key, KernelFn fn) {
  kernels_.insert_or_assign(std::move(key), std::move(fn));
}

const KernelFn* KernelRegistry::find(std::string_view key) const {
  // Heterogeneous lookup needs a transparent hash; one allocation per lookup is
  // fine because lookups happen at load time only.
  auto it = kernels_.find(std::string(key));
  return it == kernels_.end() ? nullptr : &it->second;
}

}  // namespace hf2pte::rt
