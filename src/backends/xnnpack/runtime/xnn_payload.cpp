#include "backends/xnnpack/runtime/xnn_payload.h"

#include <cstring>

namespace hf2pte::xnn {

namespace {

// Sizes from docs/xnnpack-payload.md §2: the writer emits 30 header bytes
// (padded to 32); the reader needs at least the 30.
constexpr size_t kHeaderMinSize = 30;
constexpr size_t kFlatbufferMinSize = 8;

template <typename T>
T read_le(std::span<const uint8_t> b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));  // memcpy: the blob has no alignment promise
  return v;
}

}  // namespace

Result<XnnHeader> parse_xnn_header(std::span<const uint8_t> blob) {
  if (blob.size() < kHeaderMinSize || std::memcmp(blob.data() + 4, "XH00", 4) != 0) {
    return make_error(ErrorCode::kNotFound, "no XH00 header");
  }
  XnnHeader h;
  h.flatbuffer_offset = read_le<uint32_t>(blob, 10);
  h.flatbuffer_size = read_le<uint32_t>(blob, 14);
  h.constant_data_offset = read_le<uint32_t>(blob, 18);
  h.constant_data_size = read_le<uint64_t>(blob, 22);
  // All arithmetic in uint64 so hostile 32-bit values cannot wrap.
  const uint64_t n = blob.size();
  HF2PTE_CHECK_OR_RETURN(h.flatbuffer_size >= kFlatbufferMinSize, kInvalidProgram,
                         "XH00 flatbuffer_size too small; expected >= {}, got {}", kFlatbufferMinSize,
                         h.flatbuffer_size);
  HF2PTE_CHECK_OR_RETURN(uint64_t(h.flatbuffer_offset) + h.flatbuffer_size <= n, kInvalidProgram,
                         "XH00 flatbuffer [{}, +{}) exceeds the {}-byte blob", h.flatbuffer_offset,
                         h.flatbuffer_size, n);
  HF2PTE_CHECK_OR_RETURN(h.constant_data_offset <= n && h.constant_data_size <= n - h.constant_data_offset,
                         kInvalidProgram, "XH00 constant region [{}, +{}) exceeds the {}-byte blob",
                         h.constant_data_offset, h.constant_data_size, n);
  HF2PTE_CHECK_OR_RETURN(uint64_t(h.constant_data_offset) >= uint64_t(h.flatbuffer_offset) + h.flatbuffer_size,
                         kInvalidProgram, "XH00 constant region at {} overlaps the flatbuffer [{}, +{})",
                         h.constant_data_offset, h.flatbuffer_offset, h.flatbuffer_size);
  return h;
}

Result<VerifiedPayload> verify_payload(std::span<const uint8_t> blob) {
  VerifiedPayload p;
  std::span<const uint8_t> fb = blob;
  auto header = parse_xnn_header(blob);
  if (header.is_ok()) {
    p.has_header = true;
    fb = blob.subspan(header->flatbuffer_offset, header->flatbuffer_size);
    p.constants = blob.subspan(header->constant_data_offset, size_t(header->constant_data_size));
  } else if (header.status().code() != ErrorCode::kNotFound) {
    return header.status();
  }
  HF2PTE_CHECK_OR_RETURN(fb.size() >= kFlatbufferMinSize, kInvalidProgram,
                         "XNNPACK payload too small; expected >= {} bytes, got {}", kFlatbufferMinSize, fb.size());
  // Both identifiers name the same layout for our purposes (§4.1).
  const bool known_id = std::memcmp(fb.data() + 4, "XN00", 4) == 0 || std::memcmp(fb.data() + 4, "XN01", 4) == 0;
  HF2PTE_CHECK_OR_RETURN(known_id, kInvalidProgram,
                         "XNNPACK flatbuffer identifier; expected XN00 or XN01, got '{}'",
                         std::string_view(reinterpret_cast<const char*>(fb.data() + 4), 4));
  // The verifier rejects misaligned scalars; a payload inside a .pte is
  // normally aligned, but a copy costs little and keeps hostile offsets safe.
  if (reinterpret_cast<uintptr_t>(fb.data()) % 8 != 0) {
    p.aligned_copy.resize((fb.size() + 7) / 8);
    std::memcpy(p.aligned_copy.data(), fb.data(), fb.size());
    fb = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(p.aligned_copy.data()), fb.size());
  }
  flatbuffers::Verifier verifier(fb.data(), fb.size());
  HF2PTE_CHECK_OR_RETURN(verifier.VerifyBuffer<fb_xnnpack::XNNGraph>(nullptr), kInvalidProgram,
                         "XNNPACK flatbuffer fails verification ({} bytes)", fb.size());
  p.graph = flatbuffers::GetRoot<fb_xnnpack::XNNGraph>(fb.data());
  HF2PTE_CHECK_OR_RETURN(p.graph->xnodes() != nullptr && p.graph->xvalues() != nullptr, kInvalidProgram,
                         "XNNGraph has no {}", p.graph->xnodes() == nullptr ? "xnodes" : "xvalues");
  return p;
}

}  // namespace hf2pte::xnn
