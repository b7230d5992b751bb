// Human- and machine-readable summaries of a .pte (`hf2pte inspect`). Both
// read only through PteFile's verified view and range-check every index the
// file supplies, printing "?" for bad ones: inspecting a broken file must
// describe it, not crash.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pte/pte_file.h"

namespace hf2pte::pte {

/// Describes one delegate payload as (node type, count) pairs, e.g.
/// {"XNNAdd", 1}. pte/ knows no backend, so the application supplies this
/// (the CLI passes the XNNPACK one); it should fail for ids it does not know.
using DelegateDescriber = std::function<Result<std::vector<std::pair<std::string, size_t>>>(
    std::string_view backend_id, std::span<const uint8_t> payload, const PteFile& file)>;

/// Optional extras for inspect.
struct InspectOptions {
  /// When set, each delegate also lists its node counts ("nodes" in JSON).
  DelegateDescriber describe_delegate;
};

/// A multi-line text summary: file size, eh00 header, segments, methods (inputs
/// and outputs with dtype, sizes and dynamism; operators with instruction
/// counts; value/instruction counts; delegates; memory-planned buffer sizes),
/// constant methods with their values, and named data keys with sizes.
std::string inspect_text(const PteFile& file, const InspectOptions& options = {});

/// The same information as JSON. Every method appears under "methods"; a
/// constant method (no instructions, one constant output) carries "constant".
nlohmann::ordered_json inspect_json(const PteFile& file, const InspectOptions& options = {});

}  // namespace hf2pte::pte
