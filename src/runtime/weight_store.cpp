#include "runtime/weight_store.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <mutex>

namespace hf2pte::rt {

namespace {

constexpr size_t kHugePage = size_t(2) << 20;
/// Address space reserved per chunk; pages are only backed once written.
constexpr size_t kChunkBytes = size_t(256) << 20;
constexpr size_t kAlignment = 64;

struct Chunk {
  uint8_t* base = nullptr;  ///< 2 MiB aligned
  std::shared_ptr<void> memory;
  size_t size = 0, used = 0;
};

Result<std::shared_ptr<Chunk>> new_chunk(size_t at_least) {
  auto c = std::make_shared<Chunk>();
  c->size = std::max(kChunkBytes, (at_least + kHugePage - 1) / kHugePage * kHugePage);
  HF2PTE_ASSIGN_OR_RETURN(HugePageMemory m, map_huge_pages(c->size));
  c->base = static_cast<uint8_t*>(m.data);
  c->memory = std::move(m.owner);
  return c;
}

std::atomic<WeightPlacement> g_placement{WeightPlacement::kInPlace};
std::mutex g_mu;
std::weak_ptr<Chunk> g_current;  ///< the chunk being filled

}  // namespace

Result<HugePageMemory> map_huge_pages(size_t bytes) {
  const size_t size = (std::max<size_t>(bytes, 1) + kHugePage - 1) / kHugePage * kHugePage;
  const size_t mapped = size + kHugePage;  // room to align the start
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return make_error(ErrorCode::kOutOfRange, "cannot reserve {} bytes for weights: {}", mapped, std::strerror(errno));
  }
  HugePageMemory m;
  m.data = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(p) + kHugePage - 1) / kHugePage * kHugePage);
  m.owner = std::shared_ptr<void>(p, [mapped](void* q) { ::munmap(q, mapped); });
  // Advice only: without transparent huge pages this is ordinary memory.
  ::madvise(m.data, size, MADV_HUGEPAGE);
  return m;
}

void set_weight_placement(WeightPlacement p) { g_placement.store(p); }

bool transparent_huge_pages_available() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(in, modes);
  return modes.find("[always]") != std::string::npos || modes.find("[madvise]") != std::string::npos;
}
WeightPlacement weight_placement() { return g_placement.load(); }

Result<WeightBlock> allocate_weights(size_t bytes) {
  std::lock_guard<std::mutex> lock(g_mu);
  const size_t need = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  std::shared_ptr<Chunk> c = g_current.lock();
  if (c == nullptr || c->size - c->used < need) {
    HF2PTE_ASSIGN_OR_RETURN(c, new_chunk(need));
    g_current = c;
  }
  WeightBlock b;
  b.data = c->base + c->used;
  c->used += need;
  b.chunk = std::move(c);
  return b;
}

}  // namespace hf2pte::rt
