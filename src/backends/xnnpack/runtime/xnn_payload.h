// The XNNPACK delegate blob: the XH00 header, the XNNGraph flatbuffer and the
// constant region (docs/xnnpack-payload.md §2). Internal to the backend.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backends/xnnpack/xnnpack_generated.h"
#include "core/status.h"

namespace hf2pte::xnn {

/// The fields of an XH00 header, all offsets from the blob start.
struct XnnHeader {
  uint32_t flatbuffer_offset = 0;
  uint32_t flatbuffer_size = 0;
  uint32_t constant_data_offset = 0;
  uint64_t constant_data_size = 0;
};

/// Parses the header at the start of `blob`. Returns kNotFound when bytes 4..7
/// are not "XH00" (the blob is then a bare flatbuffer), kInvalidProgram when
/// the header is present but its ranges do not fit the blob.
Result<XnnHeader> parse_xnn_header(std::span<const uint8_t> blob);

/// A verified XNNGraph. Owns an aligned copy of the flatbuffer when the blob's
/// was misaligned; `constants` still points into the caller's blob.
struct VerifiedPayload {
  std::vector<uint64_t> aligned_copy;
  const fb_xnnpack::XNNGraph* graph = nullptr;
  std::span<const uint8_t> constants;  ///< XH00 constant region (empty without header)
  bool has_header = false;
};

/// Splits `blob`, checks the XN00/XN01 identifier and runs the flatbuffers
/// verifier, so every later read of the graph stays inside the buffer.
Result<VerifiedPayload> verify_payload(std::span<const uint8_t> blob);

}  // namespace hf2pte::xnn
