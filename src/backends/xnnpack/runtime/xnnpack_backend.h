// The XNNPACK delegate backend: runs "XnnpackBackend" payloads written by the
// upstream ExecuTorch XNNPACK partitioner (docs/xnnpack-payload.md) on
// hf2pte's own C++ node implementations (docs/xnnpack.md lists what is
// supported).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "runtime/backend.h"

namespace hf2pte::xnn {

/// The BackendDelegate.id this backend serves.
inline constexpr const char* kXnnpackBackendId = "XnnpackBackend";

/// The backend object (stateless; per-delegate state lives in its handles).
class XnnpackBackend final : public rt::Backend {
 public:
  /// Parses and verifies the payload, resolves constants (inline region or the
  /// program's named data through `ctx.file`) and packs filters once.
  Result<std::unique_ptr<rt::DelegateHandle>> init(const rt::BackendInitContext& ctx,
                                                   std::span<const uint8_t> payload,
                                                   std::span<const rt::CompileSpec> compile_specs) const override;
  /// Binds external ids to `args` (inputs then outputs), reshapes the subgraph
  /// to the inputs' current shapes, runs every node and resizes the outputs.
  Status execute(rt::DelegateHandle& handle, std::span<rt::EValue*> args) const override;
  /// Batch-strided views go to the batch matmuls that take them in place;
  /// any other view is compacted at bind time.
  bool takes_strided_views() const override { return true; }
};

/// Registers XnnpackBackend in the process-wide backend registry. Explicit
/// rather than a static initializer, so that static-library linking cannot
/// silently drop it: call it once from main() or a test before loading a
/// program. Idempotent and thread-safe.
Status register_xnnpack_backend();

/// Node type -> count of an XNNPACK payload (e.g. {"XNNAdd", 1}), for
/// diagnostics such as `hf2pte inspect`. `file` resolves named constants
/// (a payload that uses them fails without it).
Result<std::vector<std::pair<std::string, size_t>>> xnnpack_node_counts(std::span<const uint8_t> payload,
                                                                         const pte::PteFile* file);

}  // namespace hf2pte::xnn
