// Software prefetch for long read-only streams (decode's weight rows, the
// bandwidth probe). The hardware stream prefetchers do not cross a 4 KiB
// boundary, so each new page of a stream starts cold; touching the page that
// lies kStreamAhead bytes ahead, once per page, keeps the DRAM requests for
// the next pages in flight (docs/performance.md, "Page-ahead prefetch").
#pragma once

#include <cstddef>
#include <cstdint>

namespace hf2pte::kernels {

/// 16 pages: in alternating runs on a Zen 5 (bench-1b decode, 2 threads) 32-128
/// KiB all beat no prefetch by 10-15 %; 64 KiB sits in the middle.
inline constexpr std::size_t kStreamAhead = std::size_t(64) << 10;

/// Call once per `block` bytes read from `p` onward (a loop step): prefetches
/// kStreamAhead bytes ahead when this step starts a new 4 KiB page.
inline void prefetch_page_ahead(const void* p, std::size_t block) {
  if ((reinterpret_cast<std::uintptr_t>(p) & 4095u) < block) {
    __builtin_prefetch(static_cast<const char*>(p) + kStreamAhead, 0, 3);
  }
}

}  // namespace hf2pte::kernels
