// Opt-in placement of weights in transparent huge pages (`--huge-pages`):
// XNNPACK's fp32/fp16 FullyConnected filters and the large constant tensors
// of the portable kernels' programs (bf16 / fp16 / fp32 `--backend portable`).
// Decode streams every weight once per token; the mapped
// file and ordinary anonymous memory use 4 KiB pages, and over bench-1b's
// 4.1 GB of filters their page walks cost ~20 % when the host's bandwidth is
// high: 44.7-51.4 GB/s against 58.5-64.1 from huge pages, same process
// (docs/performance.md, session 5). The price is load time: the copy, and the
// kernel compacting memory to find the huge pages (bench-1b: 9.5 s instead of
// 0.5 s on a host with ~16 GB of page cache). So it is off by default.
//
// Filters are bump-allocated, 64-byte aligned, from 2 MiB-aligned chunks
// advised MADV_HUGEPAGE; a chunk is unmapped once no graph holds a block in it.
#pragma once

#include <cstddef>
#include <memory>

#include "core/status.h"

namespace hf2pte::rt {

/// Where XnnpackBackend::init leaves fp32/fp16 FullyConnected filters and
/// Method::load leaves constant tensors of at least kHugePageMinBytes.
enum class WeightPlacement {
  kInPlace,    ///< read from the program's mapped file (default: instant load)
  kHugePages,  ///< copied once into huge-page memory (slower load, faster decode on large models)
};
/// Smaller constants (norm weights, biases) stay in the mapped file.
inline constexpr size_t kHugePageMinBytes = size_t(1) << 20;
/// Process-wide; applies to programs loaded afterwards.
void set_weight_placement(WeightPlacement p);
WeightPlacement weight_placement();

/// One filter's storage: `data` is valid while the block (its chunk) is held.
struct WeightBlock {
  void* data = nullptr;
  std::shared_ptr<void> chunk;
};

/// Whether the kernel gives huge pages to memory advised MADV_HUGEPAGE
/// (/sys/kernel/mm/transparent_hugepage/enabled says always or madvise).
/// Without them a copy into "huge pages" is ordinary memory: load time for nothing.
bool transparent_huge_pages_available();

/// Fresh anonymous memory of at least `bytes`, 2 MiB-aligned and advised
/// MADV_HUGEPAGE (ordinary pages where the kernel has THP off), unmapped when
/// the last copy of `owner` goes: the weight store's chunks, the bench's
/// bandwidth probe.
struct HugePageMemory {
  void* data = nullptr;
  std::shared_ptr<void> owner;
};
Result<HugePageMemory> map_huge_pages(size_t bytes);

/// `bytes` of uninitialised weight storage. Thread-safe.
Result<WeightBlock> allocate_weights(size_t bytes);

}  // namespace hf2pte::rt
