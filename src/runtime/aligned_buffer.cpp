#include "runtime/aligned_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace hf2pte::rt {

AlignedBuffer::~AlignedBuffer() { release(); }

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void AlignedBuffer::release() {
  if (data_) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

Result<AlignedBuffer> AlignedBuffer::allocate(size_t size) {
  AlignedBuffer b;
  if (size == 0) return b;
  // MAP_NORESERVE is deliberately not used: with the default overcommit policy
  // the kernel then refuses sizes that cannot possibly be backed, which turns
  // an absurd arena size from a hostile file into a clean error.
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return make_error(ErrorCode::kOutOfRange, "cannot allocate {} bytes: {}", size, std::strerror(errno));
  }
  b.data_ = static_cast<uint8_t*>(p);
  b.size_ = size;
  return b;
}

}  // namespace hf2pte::rt
