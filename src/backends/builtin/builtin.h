// Every delegate backend built into hf2pte (XNNPACK, CUDA), registered
// explicitly so that static linking cannot drop one.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace hf2pte::pte {
class PteFile;
}

namespace hf2pte::backends {

/// Registers XnnpackBackend and Hf2pteCudaBackend. Idempotent, thread-safe.
Status register_builtin_backends();

/// Whether `id` is a backend built into hf2pte (its payloads can be decoded).
bool is_builtin_backend(std::string_view id);

/// Node kind -> count of a delegate payload of a built-in backend, for
/// `hf2pte inspect`; kNotSupported for other ids.
Result<std::vector<std::pair<std::string, size_t>>> describe_payload(std::string_view id,
                                                                     std::span<const uint8_t> payload,
                                                                     const pte::PteFile& file);

}  // namespace hf2pte::backends
