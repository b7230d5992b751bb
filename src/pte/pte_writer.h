// Writes a .pte: the Program flatbuffer (built by the emitter as the flatc
// object API's ProgramT), the eh00 header, and segments whose bytes are
// streamed from their sources (e.g. an mmapped checkpoint) straight to disk.
// The output appears only when complete: written to a temporary name in the
// same directory, then renamed.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "pte/program_generated.h"

namespace hf2pte::pte {

/// Where blob bytes go. Writers call write() any number of times.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual Status write(const void* data, size_t size) = 0;
};

/// A blob whose bytes are produced on demand, exactly `size` of them.
struct Blob {
  uint64_t size = 0;
  /// Writes exactly `size` bytes to the sink.
  std::function<Status(ByteSink&)> write;
  /// Blobs with the same non-empty key are stored once (they must be identical).
  std::string dedup_key;
};

/// Bytes of one segment named in Program.named_data.
struct NamedBlob {
  std::string key;
  Blob blob;
};

struct WriteProgress {
  uint64_t bytes_written = 0;
  uint64_t bytes_total = 0;
};

struct PteContents {
  /// Everything except segments, constant_segment, mutable_data_segments and
  /// named_data, which the writer fills in: leave them empty, and leave the
  /// legacy constant_buffer empty too (the runtime would ignore it).
  /// Tensor.data_buffer_idx k refers to constants[k-1] (for constants) or
  /// mutable_data[k-1] (for planned tensors with initial data).
  executorch_flatbuffer::ProgramT program;
  std::vector<Blob> constants;     ///< constant segment, 16-byte aligned, offsets[0] reserved
  std::vector<Blob> mutable_data;  ///< initial values of mutable buffers (second segment)
  std::vector<NamedBlob> named;    ///< named_data segments (e.g. XNNPACK weights, tokenizer)
  /// Delegate payloads stored as segments (ExecuTorch's extract_delegate_segments).
  /// A BackendDelegate whose `processed` is {SEGMENT, k} refers to delegates[k];
  /// the writer rewrites k to the real segment index. INLINE references (to
  /// Program.backend_delegate_data) are left alone.
  std::vector<Blob> delegates;
};

struct WriteSummary;

struct WriteOptions {
  /// Called once the layout is decided, before the first byte is written (and
  /// before any blob streams its source): the file will be exactly
  /// `file_size` bytes.
  std::function<void(const WriteSummary&)> on_layout;
  /// Called after every blob (and at the end) with bytes written so far.
  std::function<void(const WriteProgress&)> on_progress;
  /// Polled before every write; when it reads true the write stops with
  /// kCancelled and the temporary file is removed (e.g. set from SIGINT).
  const std::atomic<bool>* cancel = nullptr;
};

struct WriteSummary {
  uint64_t file_size = 0;
  uint64_t program_size = 0;
  uint64_t segment_data_size = 0;
};

/// Writes `contents` to `path` atomically (temp file + rename). On any error
/// the temporary file is removed and `path` is left as it was.
Result<WriteSummary> write_pte(const std::string& path, PteContents contents, const WriteOptions& options = {});

/// The same bytes, in memory (for tests and fuzz seeds).
Result<std::vector<uint8_t>> serialize_pte(PteContents contents);

}  // namespace hf2pte::pte
