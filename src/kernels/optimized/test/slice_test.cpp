// The optimized slice_copy against the portable kernel on copies large
// enough to be split across the pool: a decode step's K/V cache slice
// (many runs, chunks crossing run boundaries) and one long run (dim 0).
#include <gtest/gtest.h>

#include "kernels/optimized/optimized_ops.h"
#include "kernels/optimized/thread_pool.h"
#include "kernels/portable/kernels.h"
#include "kernels/portable/test/op_test_util.h"

namespace hf2pte::kernels::testing {
namespace {

struct Case {
  std::vector<int64_t> shape;
  int64_t dim, start, end;
};

TEST(OptimizedSlice, LargeCopiesAcrossThePoolMatchPortableKernel) {
  const Case cases[] = {
      {{1, 12, 1024, 64}, 2, 0, 301},   // K/V cache prefix: 12 runs of 301 x 64 floats
      {{1, 12, 1024, 64}, 2, 17, 1000}, // an offset start
      {{700, 300}, 0, 3, 690},          // one contiguous run
      {{3, 4, 5}, 1, 1, 3},             // small: stays on the calling thread
  };
  const int before = pool_threads();
  for (int threads : {1, 2, 3}) {
    set_pool_threads(threads);
    for (const Case& c : cases) {
      int64_t n = 1;
      for (int64_t s : c.shape) n *= s;
      std::vector<float> vals(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) vals[size_t(i)] = float(i % 9973) - 0.5f;
      ArgArena a;
      auto* self = a.tensor<float>(c.shape, vals);
      auto call = [&](auto kernel) {
        auto* out = a.out(ScalarType::kFloat, c.shape);
        std::vector<rt::EValue*> args{self, a.i(c.dim), a.i(c.start), a.i(c.end), a.i(1), out, out};
        rt::KernelContext ctx;
        HF2PTE_EXPECT_OK(kernel(ctx, args));
        return std::make_pair(std::vector<int64_t>(out->tensor->sizes().begin(), out->tensor->sizes().end()),
                              values_of<float>(*out->tensor));
      };
      const auto want = call(&kernels::SliceCopyTensorOut);
      const auto got = call(&kernels::slice_copy_out);
      EXPECT_EQ(got.first, want.first) << "threads " << threads << " dim " << c.dim;
      EXPECT_EQ(got.second, want.second) << "threads " << threads << " dim " << c.dim;
    }
  }
  set_pool_threads(before);
}

}  // namespace
}  // namespace hf2pte::kernels::testing
