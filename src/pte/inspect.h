// Human- and machine-readable summaries of a .pte (`hf2pte inspect`). Both
// read only through PteFile's verified view and range-check every index the
// file supplies, printing "?" for bad ones: inspecting a broken file must
// describe it, not crash.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "pte/pte_file.h"

namespace hf2pte::pte {

/// A multi-line text summary: file size, eh00 header, segments, methods (inputs
/// and outputs with dtype, sizes and dynamism; operators with instruction
/// counts; value/instruction counts; delegates; memory-planned buffer sizes),
/// constant methods with their values, and named data keys with sizes.
std::string inspect_text(const PteFile& file);

/// The same information as JSON. Every method appears under "methods"; a
/// constant method (no instructions, one constant output) carries "constant".
nlohmann::ordered_json inspect_json(const PteFile& file);

}  // namespace hf2pte::pte
