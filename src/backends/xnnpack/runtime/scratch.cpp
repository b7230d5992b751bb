#include "backends/xnnpack/runtime/scratch.h"

#include <algorithm>

namespace hf2pte::xnn {

namespace {

uint64_t round_up(uint64_t n) { return (n + ScratchArena::kAlignment - 1) / ScratchArena::kAlignment * ScratchArena::kAlignment; }

}  // namespace

void ScratchArena::begin_run() {
  free_.clear();
  if (capacity_ > 0) free_.push_back({0, capacity_});
  overflow_.clear();
  overflow_bytes_ = 0;
}

ScratchSpan ScratchArena::alloc(uint64_t bytes) {
  const uint64_t n = round_up(std::max<uint64_t>(bytes, 1));
  for (size_t i = 0; i < free_.size(); ++i) {
    Range& r = free_[i];
    if (r.bytes < n) continue;
    ScratchSpan s{static_cast<uint8_t*>(block_.get()) + r.offset, r.offset, n, true};
    r.offset += n, r.bytes -= n;
    if (r.bytes == 0) free_.erase(free_.begin() + std::ptrdiff_t(i));
    return s;
  }
  overflow_.emplace_back(std::aligned_alloc(kAlignment, n));
  if (overflow_.back() == nullptr) throw std::bad_alloc();
  overflow_bytes_ += n;
  return ScratchSpan{overflow_.back().get(), 0, n, false};
}

void ScratchArena::release(const ScratchSpan& s) {
  if (!s.in_block || s.bytes == 0) return;  // overflow buffers go at end_run
  auto it = std::lower_bound(free_.begin(), free_.end(), s.offset,
                             [](const Range& r, uint64_t off) { return r.offset < off; });
  it = free_.insert(it, Range{s.offset, s.bytes});
  if (auto next = it + 1; next != free_.end() && it->offset + it->bytes == next->offset) {
    it->bytes += next->bytes;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = it - 1;
    if (prev->offset + prev->bytes == it->offset) {
      prev->bytes += it->bytes;
      free_.erase(it);
    }
  }
}

void ScratchArena::end_run() {
  if (overflow_bytes_ > 0) {
    // Enough for this run's allocations even if none had reused a range.
    capacity_ += overflow_bytes_;
    block_ = Buffer(std::aligned_alloc(kAlignment, capacity_));
    if (block_ == nullptr) throw std::bad_alloc();
  }
  overflow_.clear();
  overflow_bytes_ = 0;
  free_.clear();
}

ScratchArena& thread_scratch() {
  thread_local ScratchArena arena;
  return arena;
}

}  // namespace hf2pte::xnn
