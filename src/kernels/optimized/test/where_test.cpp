// The optimized where.self_out (the attention mask) against the portable
// kernel on score tensors large enough to be split across the pool: runs of
// 64K elements inside one head's [L, S] mask and across heads, fp32 and f16.
#include <gtest/gtest.h>

#include "core/half.h"
#include "kernels/optimized/optimized_ops.h"
#include "kernels/optimized/thread_pool.h"
#include "kernels/portable/kernels.h"
#include "kernels/portable/test/op_test_util.h"

namespace hf2pte::kernels::testing {
namespace {

TEST(OptimizedWhere, LargeMasksAcrossThePoolMatchPortableKernel) {
  const std::vector<int64_t> shapes[] = {{1, 3, 300, 301}, {2, 40, 50}, {5, 7}};
  const int before = pool_threads();
  for (int threads : {1, 2, 3}) {
    set_pool_threads(threads);
    for (const auto& shape : shapes) {
      int64_t n = 1;
      for (int64_t s : shape) n *= s;
      const int64_t l = shape[shape.size() - 2], s = shape.back();
      std::vector<bool> mask_bits(static_cast<size_t>(l * s));
      for (int64_t i = 0; i < l; ++i) {
        for (int64_t j = 0; j < s; ++j) mask_bits[size_t(i * s + j)] = j <= i + (i % 5);
      }
      std::vector<float> scores(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) scores[size_t(i)] = float(i % 9973) * 0.25f - 7.0f;
      for (ScalarType t : {ScalarType::kFloat, ScalarType::kHalf}) {
        ArgArena a;
        auto* cond = a.tensor<bool>({l, s}, mask_bits);
        rt::EValue *self = nullptr, *other = nullptr;
        if (t == ScalarType::kFloat) {
          self = a.tensor<float>(shape, scores), other = a.tensor<float>({}, {-1e30f});
        } else {
          std::vector<Half> h(scores.begin(), scores.end());
          self = a.tensor<Half>(shape, h), other = a.tensor<Half>({}, {Half(-60000.0f)});
        }
        auto call = [&](auto kernel) {
          auto* out = a.out(t, shape);
          std::vector<rt::EValue*> args{cond, self, other, out, out};
          rt::KernelContext ctx;
          HF2PTE_EXPECT_OK(kernel(ctx, args));
          return t == ScalarType::kFloat ? values_of<float>(*out->tensor) : [&] {
            std::vector<float> f;
            for (Half v : values_of<Half>(*out->tensor)) f.push_back(float(v));
            return f;
          }();
        };
        EXPECT_EQ(call(&kernels::where_self_out), call(&kernels::WhereSelfOut))
            << "threads " << threads << " numel " << n << " dtype " << int(t);
      }
    }
  }
  set_pool_threads(before);
}

}  // namespace
}  // namespace hf2pte::kernels::testing
