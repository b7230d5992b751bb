// A read-only memory mapping of a whole file. Weights are never copied into
// the heap: safetensors tensors and .pte segments are views into a mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace hf2pte {

class MappedFile {
 public:
  /// Maps `path` read-only. An empty file maps to an empty span.
  static Result<std::shared_ptr<MappedFile>> open(const std::string& path);
  /// Bytes already in memory, behind the same interface (tests and fuzzers).
  static std::shared_ptr<MappedFile> from_bytes(std::vector<uint8_t> bytes, std::string name);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }

  /// Tells the kernel we are done with [data, data+size) of some read-only file
  /// mapping: its pages leave our resident set (they stay in the page cache), so
  /// streaming a large checkpoint keeps peak RSS small. Only whole pages inside
  /// the range are released. Only for file mappings: on anonymous memory
  /// (from_bytes) MADV_DONTNEED would zero the pages (see is_mapped()).
  static void release_pages(const void* data, size_t size);
  /// True when the bytes are a file mapping (open), false for from_bytes.
  bool is_mapped() const { return mapped_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
  std::vector<uint8_t> owned_;  // from_bytes only; nothing is mapped then
  bool mapped_ = false;
};

}  // namespace hf2pte
