#include "pte/pte_file.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include <flatbuffers/flatbuffers.h>

namespace hf2pte::pte {
namespace efb = executorch_flatbuffer;

namespace {

static_assert(std::endian::native == std::endian::little, "the .pte header is read with memcpy: little-endian hosts only");

constexpr size_t kIdentifierOffset = 4;
constexpr size_t kHeaderOffset = 8;
// A header this long holds magic, length, program_size and segment_base_offset;
// segment_data_size follows only from length 32 on (pte-format.md §1).
constexpr uint32_t kMinHeaderLength = 24;
constexpr uint32_t kHeaderLengthWithDataSize = 32;
// The flatbuffer must start 16-aligned: `[ubyte] (force_align: 16)` vectors
// and the verifier's alignment checks are relative to the buffer start.
constexpr uintptr_t kBufferAlignment = 16;

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// The 4 identifier bytes as text, non-printable bytes as \xNN.
std::string printable(std::span<const uint8_t> bytes) {
  std::string out;
  for (uint8_t c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out.push_back(char(c));
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

template <typename T>
bool aligned(const flatbuffers::Vector<T>* v) {
  return v == nullptr || reinterpret_cast<uintptr_t>(v->data()) % alignof(T) == 0;
}

/// The 2.0.8 verifier aligns a vector's length prefix to 4 but never checks
/// that 8-byte elements are 8-aligned. Reading a misaligned int64 is undefined
/// behaviour (harmless on x86/arm64, fatal on strict-alignment cores, flagged
/// by UBSan), so the 8-byte vectors of the schema are checked here.
Status check_wide_vectors(const efb::Program& program, const std::string& name) {
  const char* bad = nullptr;
  if (const auto* constants = program.constant_segment(); constants && !aligned(constants->offsets())) {
    bad = "constant_segment.offsets";
  }
  if (const auto* list = program.mutable_data_segments()) {
    for (const efb::SubsegmentOffsets* s : *list) {
      if (!aligned(s->offsets())) bad = "mutable_data_segments.offsets";
    }
  }
  if (const auto* plans = program.execution_plan()) {
    for (const efb::ExecutionPlan* plan : *plans) {
      if (!aligned(plan->non_const_buffer_sizes())) bad = "non_const_buffer_sizes";
      const auto* values = plan->values();
      if (values == nullptr) continue;
      for (const efb::EValue* value : *values) {
        if (const auto* ints = value->val_as_IntList(); ints && !aligned(ints->items())) bad = "IntList items";
        if (const auto* doubles = value->val_as_DoubleList(); doubles && !aligned(doubles->items())) {
          bad = "DoubleList items";
        }
      }
    }
  }
  HF2PTE_CHECK_OR_RETURN(bad == nullptr, kInvalidProgram, "misaligned 8-byte vector: {} ({})", bad ? bad : "", name);
  return Status::ok();
}

}  // namespace

Result<std::shared_ptr<PteFile>> PteFile::open(const std::string& path) {
  HF2PTE_ASSIGN_OR_RETURN(auto mapping, MappedFile::open(path));
  std::shared_ptr<PteFile> file(new PteFile());
  file->bytes_ = mapping->bytes();  // mmap is page-aligned, so also 16-aligned
  file->mapping_ = std::move(mapping);
  file->name_ = path;
  HF2PTE_RETURN_IF_ERROR(file->init());
  return file;
}

void PteFile::release_pages(std::span<const uint8_t> bytes) const {
  if (mapping_ != nullptr && mapping_->is_mapped()) MappedFile::release_pages(bytes.data(), bytes.size());
}

Result<std::shared_ptr<PteFile>> PteFile::from_bytes(std::vector<uint8_t> bytes, std::string name) {
  std::shared_ptr<PteFile> file(new PteFile());
  file->name_ = std::move(name);
  auto address = reinterpret_cast<uintptr_t>(bytes.data());
  if (address % kBufferAlignment == 0) {
    file->owned_ = std::move(bytes);
    file->bytes_ = file->owned_;
  } else {
    // operator new gives 16-aligned storage on our targets, but the standard
    // only promises alignof(max_align_t): over-allocate and place the bytes
    // at the first aligned address inside the buffer.
    file->owned_.resize(bytes.size() + kBufferAlignment - 1);
    auto base = reinterpret_cast<uintptr_t>(file->owned_.data());
    size_t pad = size_t((kBufferAlignment - base % kBufferAlignment) % kBufferAlignment);
    std::memcpy(file->owned_.data() + pad, bytes.data(), bytes.size());
    file->bytes_ = std::span<const uint8_t>(file->owned_.data() + pad, bytes.size());
  }
  HF2PTE_RETURN_IF_ERROR(file->init());
  return file;
}

Status PteFile::init() {
  const size_t file_size = bytes_.size();
  const uint8_t* data = bytes_.data();
  HF2PTE_CHECK_OR_RETURN(file_size >= kHeaderOffset, kInvalidProgram,
                         "file too small for a .pte; expected >= {} bytes, got {} ({})", kHeaderOffset, file_size,
                         name_);

  // Identifier first: it gives the most useful message for non-.pte input.
  std::span<const uint8_t> id = bytes_.subspan(kIdentifierOffset, 4);
  if (std::memcmp(id.data(), kFileIdentifier, 4) != 0) {
    if (id[0] == 'E' && id[1] == 'T') {
      return make_error(ErrorCode::kInvalidProgram,
                        "incompatible ExecuTorch program version: expected file identifier {}, got '{}' ({})",
                        kFileIdentifier, printable(id), name_);
    }
    return make_error(ErrorCode::kInvalidProgram,
                      "not an ExecuTorch program: expected file identifier {}, got '{}' ({})", kFileIdentifier,
                      printable(id), name_);
  }

  size_t program_size = file_size;
  if (file_size >= kHeaderOffset + 4 && std::memcmp(data + kHeaderOffset, kExtendedHeaderMagic, 4) == 0) {
    HF2PTE_CHECK_OR_RETURN(file_size >= kHeaderOffset + kMinHeaderLength, kInvalidProgram,
                           "truncated eh00 header; expected >= {} bytes, got {} ({})",
                           kHeaderOffset + kMinHeaderLength, file_size, name_);
    header_.present = true;
    header_.length = load_u32(data + kHeaderOffset + 4);
    HF2PTE_CHECK_OR_RETURN(header_.length >= kMinHeaderLength, kInvalidProgram,
                           "eh00 header length too small; expected >= {}, got {} ({})", kMinHeaderLength,
                           header_.length, name_);
    // header_.length is a u32 and file_size a size_t: the sum cannot overflow.
    const uint64_t header_end = uint64_t(kHeaderOffset) + header_.length;
    HF2PTE_CHECK_OR_RETURN(header_end <= file_size, kInvalidProgram,
                           "eh00 header length {} runs past the end of the file; expected <= {}, got {} ({})",
                           header_.length, file_size - kHeaderOffset, header_.length, name_);
    header_.program_size = load_u64(data + kHeaderOffset + 8);
    header_.segment_base_offset = load_u64(data + kHeaderOffset + 16);
    if (header_.length >= kHeaderLengthWithDataSize) header_.segment_data_size = load_u64(data + kHeaderOffset + 24);

    HF2PTE_CHECK_OR_RETURN(header_.program_size >= header_end, kInvalidProgram,
                           "eh00 program_size too small; expected >= {} (end of the header), got {} ({})",
                           header_end, header_.program_size, name_);
    HF2PTE_CHECK_OR_RETURN(header_.program_size <= file_size, kInvalidProgram,
                           "eh00 program_size exceeds the file; expected <= {}, got {} ({})", file_size,
                           header_.program_size, name_);
    if (header_.segment_base_offset != 0 || header_.segment_data_size != 0) {
      HF2PTE_CHECK_OR_RETURN(header_.segment_base_offset >= header_.program_size, kInvalidProgram,
                             "eh00 segment_base_offset overlaps the program; expected >= {}, got {} ({})",
                             header_.program_size, header_.segment_base_offset, name_);
      // base >= program_size >= 32 here, so a data size with base 0 is also caught above.
      uint64_t segments_end = 0;
      bool overflow =
          __builtin_add_overflow(header_.segment_base_offset, header_.segment_data_size, &segments_end);
      HF2PTE_CHECK_OR_RETURN(!overflow && segments_end <= file_size, kInvalidProgram,
                             "eh00 segment data [{}, +{}) runs past the end of the file; expected end <= {} ({})",
                             header_.segment_base_offset, header_.segment_data_size, file_size, name_);
    }
    program_size = size_t(header_.program_size);
  }

  // The verifier asserts (aborts in debug builds) on buffers of 2 GiB or more.
  HF2PTE_CHECK_OR_RETURN(program_size < FLATBUFFERS_MAX_BUFFER_SIZE, kInvalidProgram,
                         "program flatbuffer too large; expected < {} bytes, got {} ({})",
                         uint64_t(FLATBUFFERS_MAX_BUFFER_SIZE), program_size, name_);
  HF2PTE_CHECK_OR_RETURN(reinterpret_cast<uintptr_t>(data) % kBufferAlignment == 0, kInternal,
                         "program bytes are not 16-byte aligned in memory ({})", name_);

  flatbuffers::Verifier::Options options;
  // Every table costs at least 4 bytes, so a bound proportional to the size
  // admits any honest program (large LLM plans have many tables) while still
  // capping the work a file with shared (DAG) subtables can cause.
  options.max_tables = flatbuffers::uoffset_t(std::max<size_t>(1'000'000, program_size / 4));
  flatbuffers::Verifier verifier(data, program_size, options);
  HF2PTE_CHECK_OR_RETURN(efb::VerifyProgramBuffer(verifier), kInvalidProgram,
                         "program flatbuffer failed verification ({})", name_);
  program_ = efb::GetProgram(data);
  return check_wide_vectors(*program_, name_);
}

Result<std::span<const uint8_t>> PteFile::segment(uint32_t index) const {
  const auto* segments = program_->segments();
  const uint32_t count = segments != nullptr ? segments->size() : 0;
  HF2PTE_CHECK_OR_RETURN(index < count, kInvalidProgram, "segment {} out of range; expected < {} ({})", index,
                         count, name_);
  const efb::DataSegment* segment = segments->Get(index);
  const uint64_t offset = segment->offset();
  const uint64_t size = segment->size();
  if (size == 0) return std::span<const uint8_t>();
  HF2PTE_CHECK_OR_RETURN(header_.present && header_.segment_base_offset != 0, kInvalidProgram,
                         "segment {} has {} bytes but the file has no segment data (no eh00 header) ({})", index,
                         size, name_);
  uint64_t start = 0;
  uint64_t end = 0;
  bool overflow = __builtin_add_overflow(header_.segment_base_offset, offset, &start) ||
                  __builtin_add_overflow(start, size, &end);
  HF2PTE_CHECK_OR_RETURN(!overflow && end <= bytes_.size(), kInvalidProgram,
                         "segment {} (offset {}, size {}) runs past the end of the file; expected end <= {} ({})",
                         index, offset, size, bytes_.size(), name_);
  return bytes_.subspan(size_t(start), size_t(size));
}

namespace {

/// Bytes [offsets[k], offsets[k] + nbytes) of the segment that `subsegments` names.
Result<std::span<const uint8_t>> subsegment_bytes(const PteFile& file, const efb::SubsegmentOffsets& subsegments,
                                                  uint32_t k, size_t nbytes, const char* what) {
  const auto* offsets = subsegments.offsets();
  const uint32_t count = offsets != nullptr ? offsets->size() : 0;
  HF2PTE_CHECK_OR_RETURN(k < count, kInvalidProgram, "{} {} out of range; expected < {} ({})", what, k, count,
                         file.path());
  auto segment = file.segment(subsegments.segment_index());
  if (!segment) return segment.status().with_context(fmt::format("{} {}", what, k));
  const uint64_t offset = offsets->Get(k);
  HF2PTE_CHECK_OR_RETURN(offset <= segment->size() && nbytes <= segment->size() - offset, kInvalidProgram,
                         "{} {} (offset {}, {} bytes) runs past the end of segment {}; expected end <= {} ({})",
                         what, k, offset, nbytes, subsegments.segment_index(), segment->size(), file.path());
  return segment->subspan(size_t(offset), nbytes);
}

}  // namespace

Result<std::span<const uint8_t>> PteFile::constant_data(uint32_t data_buffer_idx, size_t nbytes) const {
  HF2PTE_CHECK_OR_RETURN(data_buffer_idx != 0, kInvalidProgram,
                         "constant 0 is the reserved placeholder, not data ({})", name_);
  const efb::SubsegmentOffsets* constants = program_->constant_segment();
  // The runtime's rule: the constant segment wins whenever it has offsets;
  // only files without them use the legacy inline constant_buffer.
  if (constants != nullptr && constants->offsets() != nullptr && constants->offsets()->size() > 0) {
    return subsegment_bytes(*this, *constants, data_buffer_idx, nbytes, "constant");
  }
  const auto* buffers = program_->constant_buffer();
  const uint32_t count = buffers != nullptr ? buffers->size() : 0;
  HF2PTE_CHECK_OR_RETURN(data_buffer_idx < count, kInvalidProgram,
                         "constant {} out of range; expected < {} ({})", data_buffer_idx, count, name_);
  const auto* storage = buffers->Get(data_buffer_idx)->storage();
  const size_t size = storage != nullptr ? storage->size() : 0;
  HF2PTE_CHECK_OR_RETURN(nbytes <= size, kInvalidProgram,
                         "constant {} too small; expected >= {} bytes, got {} ({})", data_buffer_idx, nbytes, size,
                         name_);
  if (nbytes == 0) return std::span<const uint8_t>();
  return std::span<const uint8_t>(storage->data(), nbytes);
}

Result<std::span<const uint8_t>> PteFile::mutable_data(uint32_t data_buffer_idx, size_t nbytes) const {
  HF2PTE_CHECK_OR_RETURN(data_buffer_idx != 0, kInvalidProgram,
                         "mutable data 0 is the reserved placeholder, not data ({})", name_);
  const auto* mutable_segments = program_->mutable_data_segments();
  HF2PTE_CHECK_OR_RETURN(mutable_segments != nullptr && mutable_segments->size() > 0, kInvalidProgram,
                         "mutable data {} requested but the program has no mutable data segment ({})",
                         data_buffer_idx, name_);
  return subsegment_bytes(*this, *mutable_segments->Get(0), data_buffer_idx, nbytes, "mutable data");
}

Result<std::span<const uint8_t>> PteFile::named_data(std::string_view key) const {
  if (const auto* entries = program_->named_data()) {
    for (const efb::NamedData* entry : *entries) {
      if (entry->key() == nullptr || entry->key()->string_view() != key) continue;
      auto segment = this->segment(entry->segment_index());
      if (!segment) return segment.status().with_context(fmt::format("named data '{}'", key));
      return segment;
    }
  }
  return make_error(ErrorCode::kNotFound, "named data '{}' not found ({})", key, name_);
}

Result<std::span<const uint8_t>> PteFile::delegate_data(const efb::BackendDelegateDataReference& ref) const {
  switch (ref.location()) {
    case efb::DataLocation::INLINE: {
      const auto* inline_data = program_->backend_delegate_data();
      const uint32_t count = inline_data != nullptr ? inline_data->size() : 0;
      HF2PTE_CHECK_OR_RETURN(ref.index() < count, kInvalidProgram,
                             "inline delegate data {} out of range; expected < {} ({})", ref.index(), count, name_);
      const auto* bytes = inline_data->Get(ref.index())->data();
      if (bytes == nullptr) return std::span<const uint8_t>();
      return std::span<const uint8_t>(bytes->data(), bytes->size());
    }
    case efb::DataLocation::SEGMENT: {
      auto segment = this->segment(ref.index());
      if (!segment) return segment.status().with_context("delegate data");
      return segment;
    }
  }
  return make_error(ErrorCode::kInvalidProgram, "unknown delegate data location {}; expected 0 (INLINE) or 1 (SEGMENT) ({})",
                    int(ref.location()), name_);
}

}  // namespace hf2pte::pte
