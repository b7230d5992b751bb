// AlignedBuffer: zero-initialised, 64-byte aligned memory owned by a Method
// (planned arenas, copies of unplanned inputs).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"

namespace hf2pte::rt {

/// Move-only owner of an anonymous memory mapping. Pages are zero-filled by the
/// kernel on first touch, so a large arena costs nothing until it is used and a
/// hostile size fails at mapping time (an error value) instead of faulting in
/// a memset.
class AlignedBuffer {
 public:
  /// Alignment every buffer satisfies (mappings are page-aligned, which is more).
  static constexpr size_t kAlignment = 64;

  AlignedBuffer() = default;
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  /// Allocates `size` zeroed bytes. `size` 0 gives an empty buffer with a null
  /// pointer. Fails with kOutOfRange when the memory cannot be obtained.
  static Result<AlignedBuffer> allocate(size_t size);

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release();

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace hf2pte::rt
