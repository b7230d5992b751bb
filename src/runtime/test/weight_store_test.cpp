// The huge-page weight store: blocks are 64-byte aligned, disjoint and keep
// their bytes while held, also across chunks and for a block larger than a
// chunk; the placement switch is process-wide.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/weight_store.h"

namespace hf2pte::rt {
namespace {

TEST(WeightStore, BlocksAreAlignedDisjointAndKeepTheirBytes) {
  std::vector<WeightBlock> blocks;
  std::vector<size_t> sizes = {1, 63, 64, 4096, 3 << 20, 100};
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto b = allocate_weights(sizes[i]);
    ASSERT_TRUE(b.is_ok()) << b.status().message();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data) % 64, 0u);
    std::memset(b->data, int(i + 1), sizes[i]);
    blocks.push_back(*b);
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto* p = static_cast<const uint8_t*>(blocks[i].data);
    for (size_t j = 0; j < sizes[i]; j += 997) ASSERT_EQ(p[j], uint8_t(i + 1)) << "block " << i << " overwritten";
    ASSERT_EQ(p[sizes[i] - 1], uint8_t(i + 1));
  }
}

TEST(WeightStore, ABlockLargerThanAChunkGetsItsOwn) {
  const size_t big = (size_t(256) << 20) + 12345;  // past the 256 MiB chunk reservation
  auto b = allocate_weights(big);
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  auto* p = static_cast<uint8_t*>(b->data);
  p[0] = 7;
  p[big - 1] = 9;  // only these pages are touched
  auto next = allocate_weights(16);
  ASSERT_TRUE(next.is_ok());
  EXPECT_TRUE(static_cast<uint8_t*>(next->data) >= p + big || static_cast<uint8_t*>(next->data) + 16 <= p);
  EXPECT_EQ(p[0], 7);
  EXPECT_EQ(p[big - 1], 9);
}

TEST(WeightStore, PlacementIsInPlaceUnlessAsked) {
  EXPECT_EQ(weight_placement(), WeightPlacement::kInPlace);
  set_weight_placement(WeightPlacement::kHugePages);
  EXPECT_EQ(weight_placement(), WeightPlacement::kHugePages);
  set_weight_placement(WeightPlacement::kInPlace);
}

}  // namespace
}  // namespace hf2pte::rt
