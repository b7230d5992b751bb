#include "pte/pte_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <set>

#include <flatbuffers/flatbuffers.h>

#include "pte/pte_file.h"

namespace hf2pte::pte {
namespace efb = executorch_flatbuffer;

namespace {

static_assert(std::endian::native == std::endian::little, "the .pte header is written with memcpy: little-endian hosts only");

constexpr size_t kHeaderOffset = 8;  // eh00 goes right after root offset + identifier

/// Rounds `value` up to a multiple of `alignment`; false on overflow.
bool align_up(uint64_t value, uint64_t alignment, uint64_t* out) {
  uint64_t bumped = 0;
  if (__builtin_add_overflow(value, alignment - 1, &bumped)) return false;
  *out = bumped / alignment * alignment;
  return true;
}

// ---------------------------------------------------------------------------
// Layout: where every blob goes, decided before a single byte is written.

/// One stored blob (after dedup) inside a segment.
struct Placement {
  const Blob* blob = nullptr;
  std::string label;    ///< "constants[3]", "named 'key'": for error messages
  uint64_t offset = 0;  ///< relative to the segment start
};

struct SegmentPlan {
  std::vector<Placement> blobs;
  uint64_t offset = 0;  ///< relative to segment_base_offset
  uint64_t size = 0;
};

struct Layout {
  std::vector<SegmentPlan> segments;
  std::vector<uint8_t> program;  ///< the flatbuffer, eh00 header spliced in when present
  uint64_t segment_base_offset = 0;
  uint64_t segment_data_size = 0;
  uint64_t file_size = 0;
};

Status check_blob(const Blob& blob, const std::string& label) {
  HF2PTE_CHECK_OR_RETURN(blob.size == 0 || blob.write, kInvalidArgument,
                         "blob {} has {} bytes but no write function", label, blob.size);
  return Status::ok();
}

/// Packs `blobs` into one segment at 16-byte aligned offsets (no padding after
/// the last) and returns the SubsegmentOffsets list, whose entry 0 is the
/// reserved placeholder 0 and entry k the offset of blobs[k-1].
Result<std::vector<uint64_t>> pack_subsegments(const std::vector<Blob>& blobs, const char* what,
                                               SegmentPlan& segment) {
  std::vector<uint64_t> offsets{0};
  offsets.reserve(blobs.size() + 1);
  std::map<std::string, size_t> by_key;  // dedup_key -> index into segment.blobs
  uint64_t end = 0;
  for (size_t i = 0; i < blobs.size(); ++i) {
    const Blob& blob = blobs[i];
    std::string label = fmt::format("{}[{}]", what, i);
    HF2PTE_RETURN_IF_ERROR(check_blob(blob, label));
    if (!blob.dedup_key.empty()) {
      auto it = by_key.find(blob.dedup_key);
      if (it != by_key.end()) {
        const Placement& first = segment.blobs[it->second];
        HF2PTE_CHECK_OR_RETURN(first.blob->size == blob.size, kInvalidArgument,
                               "{} shares dedup_key '{}' with {} but differs in size; expected {} bytes, got {}",
                               label, blob.dedup_key, first.label, first.blob->size, blob.size);
        offsets.push_back(first.offset);
        continue;
      }
      by_key.emplace(blob.dedup_key, segment.blobs.size());
    }
    uint64_t offset = 0;
    HF2PTE_CHECK_OR_RETURN(align_up(end, kConstantAlignment, &offset) && !__builtin_add_overflow(offset, blob.size, &end),
                           kInvalidArgument, "{} segment too large at {}", what, label);
    segment.blobs.push_back({&blob, std::move(label), offset});
    offsets.push_back(offset);
  }
  segment.size = end;
  return offsets;
}

/// Rejects ProgramT shapes that flatc's Pack() would dereference as null, and
/// fields the writer owns. Pack() has no error path, so this is the only
/// place a malformed object tree can be turned into an error instead of a crash.
Status check_program(const efb::ProgramT& program) {
  HF2PTE_CHECK_OR_RETURN(program.segments.empty() && program.constant_segment == nullptr &&
                             program.mutable_data_segments.empty() && program.named_data.empty(),
                         kInvalidArgument,
                         "Program.segments, constant_segment, mutable_data_segments and named_data are filled by "
                         "the writer; expected them empty");
  // The runtime reads the legacy constant_buffer only when the constant
  // segment has no offsets, and we always write offsets: it would be ignored.
  HF2PTE_CHECK_OR_RETURN(program.constant_buffer.empty(), kInvalidArgument,
                         "legacy Program.constant_buffer is not written; expected constants in PteContents::constants, "
                         "got {} buffers",
                         program.constant_buffer.size());
  for (size_t i = 0; i < program.backend_delegate_data.size(); ++i) {
    HF2PTE_CHECK_OR_RETURN(program.backend_delegate_data[i] != nullptr, kInvalidArgument,
                           "backend_delegate_data[{}] is null", i);
  }
  for (size_t p = 0; p < program.execution_plan.size(); ++p) {
    const efb::ExecutionPlanT* plan = program.execution_plan[p].get();
    HF2PTE_CHECK_OR_RETURN(plan != nullptr, kInvalidArgument, "execution_plan[{}] is null", p);
    const std::string where = fmt::format("method '{}'", plan->name);
    for (size_t v = 0; v < plan->values.size(); ++v) {
      const efb::EValueT* value = plan->values[v].get();
      HF2PTE_CHECK_OR_RETURN(value != nullptr, kInvalidArgument, "value {} is null ({})", v, where);
      HF2PTE_CHECK_OR_RETURN(value->val.type == efb::KernelTypes::NONE || value->val.value != nullptr,
                             kInvalidArgument, "value {} has type {} but no payload ({})", v,
                             int(value->val.type), where);
    }
    for (size_t c = 0; c < plan->chains.size(); ++c) {
      const efb::ChainT* chain = plan->chains[c].get();
      HF2PTE_CHECK_OR_RETURN(chain != nullptr, kInvalidArgument, "chain {} is null ({})", c, where);
      for (size_t i = 0; i < chain->instructions.size(); ++i) {
        const efb::InstructionT* instruction = chain->instructions[i].get();
        HF2PTE_CHECK_OR_RETURN(instruction != nullptr, kInvalidArgument, "chain {} instruction {} is null ({})", c,
                               i, where);
        HF2PTE_CHECK_OR_RETURN(
            instruction->instr_args.type == efb::InstructionArguments::NONE || instruction->instr_args.value != nullptr,
            kInvalidArgument, "chain {} instruction {} has type {} but no payload ({})", c, i,
            int(instruction->instr_args.type), where);
      }
      for (size_t s = 0; s < chain->stacktrace.size(); ++s) {
        HF2PTE_CHECK_OR_RETURN(chain->stacktrace[s] != nullptr, kInvalidArgument, "chain {} stacktrace {} is null ({})",
                               c, s, where);
        for (const auto& frame : chain->stacktrace[s]->items) {
          HF2PTE_CHECK_OR_RETURN(frame != nullptr, kInvalidArgument, "chain {} stacktrace {} has a null frame ({})", c,
                                 s, where);
        }
      }
    }
    for (size_t o = 0; o < plan->operators.size(); ++o) {
      HF2PTE_CHECK_OR_RETURN(plan->operators[o] != nullptr, kInvalidArgument, "operator {} is null ({})", o, where);
    }
    for (size_t d = 0; d < plan->delegates.size(); ++d) {
      const efb::BackendDelegateT* delegate = plan->delegates[d].get();
      HF2PTE_CHECK_OR_RETURN(delegate != nullptr, kInvalidArgument, "delegate {} is null ({})", d, where);
      for (const auto& spec : delegate->compile_specs) {
        HF2PTE_CHECK_OR_RETURN(spec != nullptr, kInvalidArgument, "delegate {} has a null compile spec ({})", d,
                               where);
      }
    }
    for (size_t b = 0; b < plan->non_const_buffer_device.size(); ++b) {
      HF2PTE_CHECK_OR_RETURN(plan->non_const_buffer_device[b] != nullptr, kInvalidArgument,
                             "non_const_buffer_device[{}] is null ({})", b, where);
    }
  }
  return Status::ok();
}

/// Every data_buffer_idx must name a blob we are about to write: a dangling
/// index would only show up when the runtime loads the method.
Status check_data_references(const PteContents& contents) {
  for (const auto& plan : contents.program.execution_plan) {
    for (size_t v = 0; v < plan->values.size(); ++v) {
      const efb::TensorT* tensor = plan->values[v]->val.AsTensor();
      if (tensor == nullptr || tensor->data_buffer_idx == 0) continue;
      const bool planned = tensor->allocation_info != nullptr;
      const size_t count = planned ? contents.mutable_data.size() : contents.constants.size();
      HF2PTE_CHECK_OR_RETURN(tensor->data_buffer_idx <= count, kInvalidArgument,
                             "value {} data_buffer_idx out of range; expected <= {} ({} blobs), got {} (method '{}')",
                             v, count, planned ? "mutable_data" : "constants", tensor->data_buffer_idx, plan->name);
    }
    for (size_t d = 0; d < plan->delegates.size(); ++d) {
      const efb::BackendDelegateDataReferenceT* ref = plan->delegates[d]->processed.get();
      if (ref == nullptr || ref->location != efb::DataLocation::SEGMENT) continue;
      HF2PTE_CHECK_OR_RETURN(ref->index < contents.delegates.size(), kInvalidArgument,
                             "delegate {} segment reference out of range; expected < {} delegate blobs, got {} "
                             "(method '{}')",
                             d, contents.delegates.size(), ref->index, plan->name);
    }
  }
  return Status::ok();
}

/// Adds one whole-segment blob per unique dedup_key; returns its segment index.
Result<uint32_t> add_whole_segment(std::vector<SegmentPlan>& segments, std::map<std::string, uint32_t>& by_key,
                                   const Blob& blob, std::string label) {
  HF2PTE_RETURN_IF_ERROR(check_blob(blob, label));
  if (!blob.dedup_key.empty()) {
    auto it = by_key.find(blob.dedup_key);
    if (it != by_key.end()) {
      const Placement& first = segments[it->second].blobs.front();
      HF2PTE_CHECK_OR_RETURN(first.blob->size == blob.size, kInvalidArgument,
                             "{} shares dedup_key '{}' with {} but differs in size; expected {} bytes, got {}", label,
                             blob.dedup_key, first.label, first.blob->size, blob.size);
      return it->second;
    }
  }
  const auto index = uint32_t(segments.size());
  SegmentPlan segment;
  segment.size = blob.size;
  segment.blobs.push_back({&blob, std::move(label), 0});
  segments.push_back(std::move(segment));
  if (!blob.dedup_key.empty()) by_key.emplace(blob.dedup_key, index);
  return index;
}

/// Decides the segment layout, fills the writer-owned Program fields and
/// serializes the flatbuffer (with the eh00 header when there is segment data).
/// `contents` must outlive the Layout: placements point at its blobs.
Result<Layout> plan_layout(PteContents& contents) {
  efb::ProgramT& program = contents.program;
  HF2PTE_RETURN_IF_ERROR(check_program(program));
  HF2PTE_RETURN_IF_ERROR(check_data_references(contents));

  Layout layout;
  // Creation order as ExecuTorch writes it (pte-format.md §1): constants
  // (always, possibly empty), mutable data, delegate blobs, named blobs.
  layout.segments.emplace_back();
  HF2PTE_ASSIGN_OR_RETURN(std::vector<uint64_t> constant_offsets,
                          pack_subsegments(contents.constants, "constants", layout.segments.back()));
  program.constant_segment = std::make_unique<efb::SubsegmentOffsetsT>();
  program.constant_segment->segment_index = 0;
  program.constant_segment->offsets = std::move(constant_offsets);

  if (!contents.mutable_data.empty()) {
    layout.segments.emplace_back();
    HF2PTE_ASSIGN_OR_RETURN(std::vector<uint64_t> mutable_offsets,
                            pack_subsegments(contents.mutable_data, "mutable_data", layout.segments.back()));
    auto subsegments = std::make_unique<efb::SubsegmentOffsetsT>();
    subsegments->segment_index = uint32_t(layout.segments.size() - 1);
    subsegments->offsets = std::move(mutable_offsets);
    program.mutable_data_segments.push_back(std::move(subsegments));
  }

  std::map<std::string, uint32_t> delegate_keys;
  std::vector<uint32_t> delegate_segment(contents.delegates.size());
  for (size_t i = 0; i < contents.delegates.size(); ++i) {
    HF2PTE_ASSIGN_OR_RETURN(delegate_segment[i], add_whole_segment(layout.segments, delegate_keys,
                                                                   contents.delegates[i],
                                                                   fmt::format("delegates[{}]", i)));
  }
  for (auto& plan : program.execution_plan) {
    for (auto& delegate : plan->delegates) {
      efb::BackendDelegateDataReferenceT* ref = delegate->processed.get();
      if (ref != nullptr && ref->location == efb::DataLocation::SEGMENT) ref->index = delegate_segment[ref->index];
    }
  }

  std::map<std::string, uint32_t> named_keys;
  std::set<std::string_view> seen_names;
  for (const NamedBlob& named : contents.named) {
    HF2PTE_CHECK_OR_RETURN(!named.key.empty(), kInvalidArgument, "named blob with an empty key");
    HF2PTE_CHECK_OR_RETURN(seen_names.insert(named.key).second, kInvalidArgument, "duplicate named data key '{}'",
                           named.key);
    HF2PTE_ASSIGN_OR_RETURN(uint32_t index, add_whole_segment(layout.segments, named_keys, named.blob,
                                                              fmt::format("named '{}'", named.key)));
    auto entry = std::make_unique<efb::NamedDataT>();
    entry->key = named.key;
    entry->segment_index = index;
    program.named_data.push_back(std::move(entry));
  }

  // Segment i starts at align(end of segment i-1, 128); the first at 0.
  // Empty segments therefore share offsets ({0,0},{0,N} as upstream writes).
  uint64_t end = 0;
  for (SegmentPlan& segment : layout.segments) {
    HF2PTE_CHECK_OR_RETURN(align_up(end, kSegmentAlignment, &segment.offset) &&
                               !__builtin_add_overflow(segment.offset, segment.size, &end),
                           kInvalidArgument, "segment data too large");
    auto entry = std::make_unique<efb::DataSegmentT>();
    entry->offset = segment.offset;
    entry->size = segment.size;
    program.segments.push_back(std::move(entry));
  }
  layout.segment_data_size = end;

  flatbuffers::FlatBufferBuilder builder(64 * 1024);
  efb::FinishProgramBuffer(builder, efb::Program::Pack(builder, &program));
  std::span<const uint8_t> flatbuffer(builder.GetBufferPointer(), builder.GetSize());

  if (layout.segment_data_size == 0) {
    // No segment bytes: a plain flatbuffer, no eh00 (like upstream add.pte).
    layout.program.assign(flatbuffer.begin(), flatbuffer.end());
    layout.file_size = layout.program.size();
    return layout;
  }

  // Splice the header in after byte 8. Every flatbuffer offset is relative
  // except the root offset, which grows by the header length; 32 is a
  // multiple of the schema's largest force_align (16), so aligned vectors
  // stay aligned.
  const uint64_t program_size = flatbuffer.size() + kExtendedHeaderLength;
  HF2PTE_CHECK_OR_RETURN(align_up(program_size, kSegmentAlignment, &layout.segment_base_offset) &&
                             !__builtin_add_overflow(layout.segment_base_offset, layout.segment_data_size,
                                                     &layout.file_size),
                         kInvalidArgument, "segment data too large");
  layout.program.resize(size_t(program_size));
  uint8_t* out = layout.program.data();
  std::memcpy(out, flatbuffer.data(), kHeaderOffset);
  uint32_t root = 0;
  std::memcpy(&root, out, sizeof root);
  root += kExtendedHeaderLength;
  std::memcpy(out, &root, sizeof root);
  uint8_t* header = out + kHeaderOffset;
  std::memcpy(header, kExtendedHeaderMagic, 4);
  const uint32_t length = kExtendedHeaderLength;
  std::memcpy(header + 4, &length, 4);
  std::memcpy(header + 8, &program_size, 8);
  std::memcpy(header + 16, &layout.segment_base_offset, 8);
  std::memcpy(header + 24, &layout.segment_data_size, 8);
  std::memcpy(out + kHeaderOffset + kExtendedHeaderLength, flatbuffer.data() + kHeaderOffset,
              flatbuffer.size() - kHeaderOffset);
  return layout;
}

// ---------------------------------------------------------------------------
// Emission: the same byte stream for files and for memory.

/// Passes bytes through while holding a blob to its declared size.
class BlobSink final : public ByteSink {
 public:
  BlobSink(ByteSink& out, uint64_t limit, const std::string& label) : out_(out), limit_(limit), label_(label) {}
  Status write(const void* data, size_t size) override {
    HF2PTE_CHECK_OR_RETURN(size <= limit_ - written_, kInternal,
                           "blob {} wrote more than its declared size; expected {} bytes, got >= {}", label_, limit_,
                           written_ + size);
    written_ += size;
    return out_.write(data, size);
  }
  uint64_t written() const { return written_; }

 private:
  ByteSink& out_;
  uint64_t limit_;
  const std::string& label_;
  uint64_t written_ = 0;
};

class VectorSink final : public ByteSink {
 public:
  explicit VectorSink(std::vector<uint8_t>& out) : out_(out) {}
  Status write(const void* data, size_t size) override {
    const auto* bytes = static_cast<const uint8_t*>(data);
    out_.insert(out_.end(), bytes, bytes + size);
    return Status::ok();
  }

 private:
  std::vector<uint8_t>& out_;
};

/// Buffered writes to a file descriptor; large writes (mmapped weights) bypass the buffer.
class FileSink final : public ByteSink {
 public:
  FileSink(int fd, std::string display_path, const std::atomic<bool>* cancel)
      : fd_(fd), path_(std::move(display_path)), cancel_(cancel) {
    buffer_.reserve(kBufferSize);
  }
  Status write(const void* data, size_t size) override {
    if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) {
      return make_error(ErrorCode::kCancelled, "interrupted; nothing was written ({})", path_);
    }
    if (buffer_.size() + size > kBufferSize) HF2PTE_RETURN_IF_ERROR(flush());
    if (size >= kBufferSize) return write_all(static_cast<const uint8_t*>(data), size);
    const auto* bytes = static_cast<const uint8_t*>(data);
    buffer_.insert(buffer_.end(), bytes, bytes + size);
    return Status::ok();
  }
  Status flush() {
    Status status = write_all(buffer_.data(), buffer_.size());
    buffer_.clear();
    return status;
  }

 private:
  static constexpr size_t kBufferSize = size_t(1) << 20;

  Status write_all(const uint8_t* data, size_t size) {
    while (size > 0) {
      // Linux writes at most ~2 GiB per call; loop on short writes.
      ssize_t n = ::write(fd_, data, std::min<size_t>(size, size_t(1) << 30));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return make_error(ErrorCode::kIoError, "cannot write output: {} ({})",
                          n < 0 ? std::strerror(errno) : "no progress", path_);
      }
      data += n;
      size -= size_t(n);
    }
    return Status::ok();
  }

  int fd_;
  std::string path_;
  const std::atomic<bool>* cancel_;
  std::vector<uint8_t> buffer_;
};

/// Writes zeros until `position` reaches `target`.
Status pad_to(ByteSink& sink, uint64_t& position, uint64_t target) {
  static constexpr uint8_t kZeros[kSegmentAlignment] = {};
  HF2PTE_CHECK_OR_RETURN(position <= target, kInternal, "layout went backwards; expected <= {}, got {}", target,
                         position);
  while (position < target) {
    const size_t n = size_t(std::min<uint64_t>(target - position, sizeof kZeros));
    HF2PTE_RETURN_IF_ERROR(sink.write(kZeros, n));
    position += n;
  }
  return Status::ok();
}

Status emit(const Layout& layout, ByteSink& sink, const WriteOptions& options) {
  uint64_t position = 0;
  auto report = [&]() -> Status {
    if (!options.on_progress) return Status::ok();
    try {
      options.on_progress(WriteProgress{position, layout.file_size});
    } catch (const std::exception& e) {
      return make_error(ErrorCode::kInternal, "progress callback threw: {}", e.what());
    }
    return Status::ok();
  };

  HF2PTE_RETURN_IF_ERROR(sink.write(layout.program.data(), layout.program.size()));
  position = layout.program.size();
  HF2PTE_RETURN_IF_ERROR(report());
  for (const SegmentPlan& segment : layout.segments) {
    for (const Placement& placement : segment.blobs) {
      const Blob& blob = *placement.blob;
      HF2PTE_RETURN_IF_ERROR(pad_to(sink, position, layout.segment_base_offset + segment.offset + placement.offset));
      if (blob.size == 0 && !blob.write) continue;
      BlobSink blob_sink(sink, blob.size, placement.label);
      Status status;
      try {
        status = blob.write(blob_sink);
      } catch (const std::exception& e) {
        status = make_error(ErrorCode::kInternal, "blob {} threw: {}", placement.label, e.what());
      }
      HF2PTE_RETURN_IF_ERROR(status);
      HF2PTE_CHECK_OR_RETURN(blob_sink.written() == blob.size, kInternal,
                             "blob {} wrote fewer bytes than declared; expected {}, got {}", placement.label,
                             blob.size, blob_sink.written());
      position += blob.size;
      HF2PTE_RETURN_IF_ERROR(report());
    }
  }
  HF2PTE_CHECK_OR_RETURN(position == layout.file_size, kInternal, "wrote {} bytes; expected {}", position,
                         layout.file_size);
  return Status::ok();
}

/// Owns the temporary output: closes and unlinks it unless committed, so that
/// every early return (and any exception) leaves nothing behind.
class TempFile {
 public:
  TempFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  /// Closes the descriptor, reporting deferred write errors (NFS, quotas).
  Status close(const std::string& display_path) {
    int fd = fd_;
    fd_ = -1;
    HF2PTE_CHECK_OR_RETURN(::close(fd) == 0, kIoError, "cannot write output: {} ({})", std::strerror(errno),
                           display_path);
    return Status::ok();
  }
  void commit() { committed_ = true; }

 private:
  std::string path_;
  int fd_;
  bool committed_ = false;
};

WriteSummary summarize(const Layout& layout) {
  WriteSummary summary;
  summary.file_size = layout.file_size;
  summary.program_size = layout.program.size();
  summary.segment_data_size = layout.segment_data_size;
  return summary;
}

}  // namespace

Result<WriteSummary> write_pte(const std::string& path, PteContents contents, const WriteOptions& options) {
  namespace fs = std::filesystem;
  HF2PTE_ASSIGN_OR_RETURN(Layout layout, plan_layout(contents));
  if (options.on_layout) options.on_layout(summarize(layout));

  const fs::path destination(path);
  const std::string name = destination.filename().string();
  HF2PTE_CHECK_OR_RETURN(!name.empty() && name != "." && name != "..", kInvalidArgument,
                         "output path must name a file ({})", path);
  fs::path directory = destination.parent_path();
  if (directory.empty()) directory = ".";

  // Same directory as the destination so that rename() is atomic; hidden and
  // pid-tagged so concurrent exports never collide. The sequence number keeps
  // threads of one process apart.
  static std::atomic<uint64_t> sequence{0};
  std::string temp_path;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    temp_path = (directory / fmt::format(".{}.tmp.{}.{}", name, ::getpid(), sequence++)).string();
    fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  HF2PTE_CHECK_OR_RETURN(fd >= 0, kIoError, "cannot create output: {} ({})", std::strerror(errno), temp_path);
  TempFile temp(temp_path, fd);

  FileSink sink(temp.fd(), path, options.cancel);
  HF2PTE_RETURN_IF_ERROR(emit(layout, sink, options));
  HF2PTE_RETURN_IF_ERROR(sink.flush());
  HF2PTE_CHECK_OR_RETURN(::fsync(temp.fd()) == 0, kIoError, "cannot sync output: {} ({})", std::strerror(errno),
                         path);
  HF2PTE_RETURN_IF_ERROR(temp.close(path));
  HF2PTE_CHECK_OR_RETURN(::rename(temp.path().c_str(), path.c_str()) == 0, kIoError,
                         "cannot move output into place: {} ({})", std::strerror(errno), path);
  temp.commit();

  // Make the rename itself durable. Best effort: the file is complete either way.
  int dir_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    (void)::fsync(dir_fd);
    ::close(dir_fd);
  }
  return summarize(layout);
}

Result<std::vector<uint8_t>> serialize_pte(PteContents contents) {
  HF2PTE_ASSIGN_OR_RETURN(Layout layout, plan_layout(contents));
  std::vector<uint8_t> bytes;
  bytes.reserve(size_t(layout.file_size));
  VectorSink sink(bytes);
  HF2PTE_RETURN_IF_ERROR(emit(layout, sink, WriteOptions{}));
  return bytes;
}

}  // namespace hf2pte::pte
