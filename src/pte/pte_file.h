// A .pte file opened for reading: the extended header, the verified Program
// flatbuffer, and bounds-checked access to its segments. Every offset and size
// read from the file is checked before use: the file is untrusted.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"
#include "pte/program_generated.h"

namespace hf2pte::pte {

inline constexpr char kFileIdentifier[] = "ET12";
inline constexpr char kExtendedHeaderMagic[] = "eh00";
inline constexpr uint32_t kExtendedHeaderLength = 32;
inline constexpr uint64_t kSegmentAlignment = 128;
inline constexpr uint64_t kConstantAlignment = 16;

/// The `eh00` header at byte 8 (absent in files without segments).
struct ExtendedHeader {
  bool present = false;
  uint32_t length = 0;               ///< header length as stored (>= 24; 32 when written by us)
  uint64_t program_size = 0;         ///< flatbuffer bytes from offset 0, header included
  uint64_t segment_base_offset = 0;  ///< absolute offset of the first segment
  uint64_t segment_data_size = 0;    ///< base -> end of the last segment (0 when length < 32)
};

class PteFile {
 public:
  // Not copyable: bytes_ and program_ point into this object's own storage.
  PteFile(const PteFile&) = delete;
  PteFile& operator=(const PteFile&) = delete;

  /// Maps and verifies `path`: eh00 header bounds, identifier, flatbuffer
  /// verifier. Segment tables are bounds-checked by the accessors below.
  static Result<std::shared_ptr<PteFile>> open(const std::string& path);
  /// Verifies a file already in memory (takes ownership of the bytes).
  static Result<std::shared_ptr<PteFile>> from_bytes(std::vector<uint8_t> bytes, std::string name = "<memory>");

  const executorch_flatbuffer::Program& program() const { return *program_; }
  const ExtendedHeader& header() const { return header_; }
  const std::string& path() const { return name_; }
  std::span<const uint8_t> file_bytes() const { return bytes_; }

  /// Bytes of segment `index` (bounds-checked against the file).
  Result<std::span<const uint8_t>> segment(uint32_t index) const;
  /// Data of a constant tensor with `data_buffer_idx` k > 0: the constant segment
  /// at offsets[k] (or legacy Program.constant_buffer[k]); `nbytes` is checked.
  Result<std::span<const uint8_t>> constant_data(uint32_t data_buffer_idx, size_t nbytes) const;
  /// Initial value of a mutable planned tensor: mutable_data_segments[0].offsets[k].
  Result<std::span<const uint8_t>> mutable_data(uint32_t data_buffer_idx, size_t nbytes) const;
  /// Whole segment named by `Program.named_data[key]`.
  Result<std::span<const uint8_t>> named_data(std::string_view key) const;
  /// Says a caller keeps its own copy of `bytes` (part of this file): their
  /// pages leave the resident set when the file is mapped (no-op otherwise;
  /// reading them again faults them back in from the page cache).
  void release_pages(std::span<const uint8_t> bytes) const;
  /// Payload of a backend delegate (inline data or a segment).
  Result<std::span<const uint8_t>> delegate_data(const executorch_flatbuffer::BackendDelegateDataReference& ref) const;

 private:
  PteFile() = default;
  Status init();

  std::shared_ptr<MappedFile> mapping_;
  std::vector<uint8_t> owned_;
  std::span<const uint8_t> bytes_;
  std::string name_;
  ExtendedHeader header_;
  const executorch_flatbuffer::Program* program_ = nullptr;
};

}  // namespace hf2pte::pte
