// Storage for a subgraph's internal values while it runs. Values die at their
// last reader (XnnGraph::release_after), so one block per thread, reused by
// every run of every delegate on that thread, holds only what is live at once:
// a 511-token prefill of bench-1b needs tens of MB here instead of one buffer
// per value per delegate (4 GB), and no run after the first touches fresh pages.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

namespace hf2pte::xnn {

/// One allocation: `data` points into the block, or into an overflow buffer
/// that lives until the end of the run.
struct ScratchSpan {
  void* data = nullptr;
  uint64_t offset = 0, bytes = 0;
  bool in_block = false;
};

/// First-fit ranges in one 64-byte aligned block. A run that does not fit
/// takes overflow buffers and grows the block for the next run, so a repeated
/// run converges to one block and no allocation.
class ScratchArena {
 public:
  static constexpr uint64_t kAlignment = 64;

  void begin_run();
  ScratchSpan alloc(uint64_t bytes);
  void release(const ScratchSpan& s);
  /// Frees the overflow buffers; the next run's block covers what this one used.
  void end_run();

  uint64_t capacity() const { return capacity_; }

 private:
  struct Range {
    uint64_t offset, bytes;
  };
  struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
  };
  using Buffer = std::unique_ptr<void, FreeDeleter>;

  Buffer block_;
  uint64_t capacity_ = 0;
  std::vector<Range> free_;  ///< sorted by offset, coalesced
  std::vector<Buffer> overflow_;
  uint64_t overflow_bytes_ = 0;
};

/// The calling thread's arena (runs on one thread never overlap).
ScratchArena& thread_scratch();

}  // namespace hf2pte::xnn
