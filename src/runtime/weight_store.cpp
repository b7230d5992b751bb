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
  void* mapping = nullptr;
  size_t mapped = 0, size = 0, used = 0;
  ~Chunk() {
    if (mapping != nullptr) ::munmap(mapping, mapped);
  }
};

Result<std::shared_ptr<Chunk>> new_chunk(size_t at_least) {
  auto c = std::make_shared<Chunk>();
  c->size = std::max(kChunkBytes, (at_least + kHugePage - 1) / kHugePage * kHugePage);
  c->mapped = c->size + kHugePage;  // room to align the start
  void* p = ::mmap(nullptr, c->mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return make_error(ErrorCode::kOutOfRange, "cannot reserve {} bytes for weights: {}", c->mapped, std::strerror(errno));
  }
  c->mapping = p;
  c->base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + kHugePage - 1) / kHugePage * kHugePage);
  // Advice only: without transparent huge pages this is ordinary memory.
  ::madvise(c->base, c->size, MADV_HUGEPAGE);
  return c;
}

std::atomic<WeightPlacement> g_placement{WeightPlacement::kInPlace};
std::mutex g_mu;
std::weak_ptr<Chunk> g_current;  ///< the chunk being filled

}  // namespace

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
