// batched_gemm_f32 against a double reference at the shapes that pick each
// path: M = 1 GEMV, M in 2..8 with K, N >= 32 (one GEMV per row), narrow
// heads and M > 8 (sgemm), with and without trans_b; B contiguous, and B's
// batches apart by more than their size (a KV cache's written rows read in
// place, b_stride).
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/optimized/gemm.h"

namespace hf2pte::kernels {
namespace {

TEST(BatchedGemm, EveryPathMatchesDoubleReference) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  struct Shape {
    int64_t batch, M, N, K;
  };
  const Shape shapes[] = {{3, 1, 40, 64}, {2, 2, 512, 64}, {4, 8, 33, 48}, {2, 2, 512, 8}, {2, 9, 40, 40}, {1, 4, 31, 64}};
  for (const Shape& s : shapes) {
    for (int64_t pad : {int64_t{0}, int64_t{37}})
    for (bool trans_b : {false, true}) {
      const int64_t bs = s.K * s.N + pad;  // elements from one batch of B to the next
      std::vector<float> a(static_cast<size_t>(s.batch * s.M * s.K)), b(static_cast<size_t>(s.batch * bs));
      for (auto& x : a) x = dist(gen);
      for (auto& x : b) x = dist(gen);
      std::vector<float> c(static_cast<size_t>(s.batch * s.M * s.N), -7.0f);
      batched_gemm_f32(s.batch, s.M, s.N, s.K, a.data(), b.data(), trans_b, c.data(), bs);
      for (int64_t i = 0; i < s.batch; ++i) {
        for (int64_t m = 0; m < s.M; ++m) {
          for (int64_t n = 0; n < s.N; ++n) {
            double want = 0;
            for (int64_t k = 0; k < s.K; ++k) {
              const float bv = trans_b ? b[size_t(i * bs + n * s.K + k)] : b[size_t(i * bs + k * s.N + n)];
              want += double(a[size_t((i * s.M + m) * s.K + k)]) * double(bv);
            }
            ASSERT_NEAR(c[size_t((i * s.M + m) * s.N + n)], want, 1e-4)
                << "batch " << s.batch << " M " << s.M << " N " << s.N << " K " << s.K << " trans_b " << trans_b
                << " pad " << pad << " at " << i << "," << m << "," << n;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace hf2pte::kernels
