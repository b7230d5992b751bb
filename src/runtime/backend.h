// Backend delegates: the hook through which a DelegateCall reaches an
// accelerator library (XNNPACK first). Mirrors ExecuTorch's BackendInterface:
// a backend compiles its payload once at Method load (init) and runs it for
// every DelegateCall (execute). Backends register themselves by id.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runtime/evalue.h"

namespace hf2pte::pte {
class PteFile;
}

namespace hf2pte::rt {

/// One compile spec of a BackendDelegate (bytes point into the program).
struct CompileSpec {
  std::string_view key;
  std::span<const uint8_t> value;
};

/// What a backend may read during init besides its own payload.
struct BackendInitContext {
  /// The program file: `named_data(key)` gives shared weight blobs. Outlives
  /// every handle created from it (the Method holds the file).
  const pte::PteFile* file = nullptr;
  std::string_view method_name;
  size_t delegate_index = 0;
};

/// Per-delegate state created by Backend::init (compiled graph, packed weights).
/// Owned by the Method; destroyed before the Method releases the file.
class DelegateHandle {
 public:
  virtual ~DelegateHandle() = default;
};

/// A delegate backend. Implementations must be thread-compatible: one Method
/// is used by one thread at a time, but several Methods may share a backend.
class Backend {
 public:
  virtual ~Backend() = default;
  /// False when the backend is compiled in but cannot run here (e.g. missing
  /// CPU features); the Method then fails to load with kNotSupported.
  virtual bool is_available() const { return true; }
  /// Compiles `payload` (a view into the program file, valid for the Method's
  /// lifetime) into a handle.
  virtual Result<std::unique_ptr<DelegateHandle>> init(const BackendInitContext& ctx,
                                                       std::span<const uint8_t> payload,
                                                       std::span<const CompileSpec> compile_specs) const = 0;
  /// Runs the delegate. `args` are the DelegateCall args: the lowered module's
  /// inputs, then its flattened outputs (docs/pte-format.md §4).
  virtual Status execute(DelegateHandle& handle, std::span<EValue*> args) const = 0;
  /// True when execute() accepts input tensors that are strided views
  /// (Tensor::is_strided_view): it reads them in place or compacts them itself.
  virtual bool takes_strided_views() const { return false; }
};

/// Registers `backend` under `id` (the BackendDelegate.id in the file, e.g.
/// "XnnpackBackend") in the process-wide registry. Fails with kInvalidArgument
/// when `id` is already taken. Thread-safe.
Status register_backend(std::string id, std::shared_ptr<const Backend> backend);
/// The backend registered under `id`, or nullptr. Thread-safe.
std::shared_ptr<const Backend> find_backend(std::string_view id);
/// Ids of all registered backends, sorted (for diagnostics).
std::vector<std::string> registered_backends();

}  // namespace hf2pte::rt
