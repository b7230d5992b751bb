// embedding / index_select / index_put_: index dtypes and shapes, the KV-cache
// update pattern, accumulation, broadcasting and bad indices.
#include "kernels/portable/test/op_test_util.h"

namespace hf2pte::kernels::testing {
namespace {

using F = std::vector<float>;
constexpr auto kF32 = ScalarType::kFloat;
constexpr auto kI64 = ScalarType::kLong;

class IndexingTest : public OpTest {
 protected:
  // 4 rows of width 2: row r = [10 r, 10 r + 1].
  rt::EValue* table() { return a.tensor<float>({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31}); }
  std::vector<rt::EValue*> emb_args(rt::EValue* w, rt::EValue* idx, rt::EValue* out) {
    return {w, idx, a.i(-1), a.b(false), a.b(false), out, out};
  }
};

TEST_P(IndexingTest, EmbeddingInt64Matrix) {
  auto* out = a.out(kF32, {2, 2, 2});
  HF2PTE_EXPECT_OK(run("aten::embedding.out",
                       emb_args(table(), a.tensor<int64_t>({2, 2}, {3, 0, 1, 3}), out)));
  EXPECT_TRUE(tensor_matches<float>(out, {2, 2, 2}, {30, 31, 0, 1, 10, 11, 30, 31}, tol()));
}

TEST_P(IndexingTest, EmbeddingInt32AndZeroDimIndices) {
  auto* out = a.out(kF32, {3, 2});
  HF2PTE_EXPECT_OK(
      run("aten::embedding.out", emb_args(table(), a.tensor<int32_t>({3}, {2, 2, 1}), out)));
  EXPECT_TRUE(tensor_matches<float>(out, {3, 2}, {20, 21, 20, 21, 10, 11}, tol()));
  auto* out0 = a.out(kF32, {2});
  HF2PTE_EXPECT_OK(
      run("aten::embedding.out", emb_args(table(), a.tensor<int64_t>({}, {1}), out0)));
  EXPECT_TRUE(tensor_matches<float>(out0, {2}, {10, 11}, tol()));
  // int64 weights copy too.
  auto* outi = a.out(kI64, {1, 2});
  HF2PTE_EXPECT_OK(run("aten::embedding.out",
                       emb_args(a.tensor<int64_t>({2, 2}, {5, 6, 7, 8}),
                                a.tensor<int64_t>({1}, {1}), outi)));
  EXPECT_TRUE(tensor_matches<int64_t>(outi, {1, 2}, {7, 8}));
}

TEST_P(IndexingTest, EmbeddingBadIndex) {
  auto* out = a.out(kF32, {2, 2});
  HF2PTE_EXPECT_ERROR(
      run("aten::embedding.out", emb_args(table(), a.tensor<int64_t>({2}, {1, 4}), out)),
      kOutOfRange, "aten::embedding.out: index value 4 out of range; expected in [0, 4)");
  HF2PTE_EXPECT_ERROR(
      run("aten::embedding.out", emb_args(table(), a.tensor<int64_t>({2}, {-1, 0}), out)),
      kOutOfRange, "value -1");
  HF2PTE_EXPECT_ERROR(
      run("aten::embedding.out", emb_args(table(), a.tensor<float>({2}, {1, 0}), out)),
      kNotSupported, "indices has dtype f32");
  HF2PTE_EXPECT_ERROR(run("aten::embedding.out",
                          emb_args(a.tensor<float>({4}, {1, 2, 3, 4}),
                                   a.tensor<int64_t>({2}, {1, 0}), out)),
                      kInvalidArgument, "weight must have rank 2");
  // Capacity: out planned for one row only.
  auto* small = a.out(kF32, {1, 2});
  HF2PTE_EXPECT_ERROR(
      run("aten::embedding.out", emb_args(table(), a.tensor<int64_t>({2}, {1, 0}), small)),
      kOutOfRange, "aten::embedding.out");
}

TEST_P(IndexingTest, IndexSelect) {
  auto* out = a.out(kF32, {3, 2});
  HF2PTE_EXPECT_OK(run("aten::index_select.out",
                       {table(), a.i(0), a.tensor<int64_t>({3}, {3, 3, 0}), out, out}));
  EXPECT_TRUE(tensor_matches<float>(out, {3, 2}, {30, 31, 30, 31, 0, 1}, tol()));
  auto* cols = a.out(kF32, {4, 1});
  HF2PTE_EXPECT_OK(run("aten::index_select.out",
                       {table(), a.i(-1), a.tensor<int32_t>({1}, {1}), cols, cols}));
  EXPECT_TRUE(tensor_matches<float>(cols, {4, 1}, {1, 11, 21, 31}, tol()));
  auto* bools = a.out(ScalarType::kBool, {2});
  HF2PTE_EXPECT_OK(run("aten::index_select.out",
                       {a.tensor<bool>({3}, {true, false, true}), a.i(0),
                        a.tensor<int64_t>({2}, {1, 2}), bools, bools}));
  EXPECT_TRUE(tensor_matches<bool>(bools, {2}, {false, true}));
}

TEST_P(IndexingTest, IndexSelectErrors) {
  auto* out = a.out(kF32, {1, 2});
  HF2PTE_EXPECT_ERROR(run("aten::index_select.out",
                          {table(), a.i(0), a.tensor<int64_t>({1}, {4}), out, out}),
                      kOutOfRange, "index value 4 out of range; expected in [0, 4)");
  HF2PTE_EXPECT_ERROR(run("aten::index_select.out",
                          {table(), a.i(2), a.tensor<int64_t>({1}, {0}), out, out}),
                      kInvalidArgument, "dim 2 out of range");
  HF2PTE_EXPECT_ERROR(run("aten::index_select.out",
                          {table(), a.i(0), a.tensor<int64_t>({1, 1}, {0}), out, out}),
                      kInvalidArgument, "index must be a vector");
  auto* outi = a.out(kI64, {1, 2});
  HF2PTE_EXPECT_ERROR(run("aten::index_select.out",
                          {table(), a.i(0), a.tensor<int64_t>({1}, {0}), outi, outi}),
                      kInvalidArgument, "same dtype");
}

TEST_P(IndexingTest, IndexPutKvCacheUpdate) {
  // cache [1, 2, 4, 2] (batch, heads, max_seq, head_dim), zeros; write
  // values [1, 2, 2, 2] at positions [1, 3] of dim 2: cache[None, None, pos] = v.
  auto* cache = a.tensor<float>({1, 2, 4, 2}, F(16, 0));
  auto* values = a.tensor<float>({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto* ret = a.none();
  HF2PTE_EXPECT_OK(run("aten::index_put_",
                       {cache, a.opt_tensor_list({nullptr, nullptr, a.tensor<int64_t>({2}, {1, 3})}),
                        values, a.b(false), ret}));
  EXPECT_TRUE(tensor_matches<float>(cache, {1, 2, 4, 2},
                                    {0, 0, 1, 2, 0, 0, 3, 4, 0, 0, 5, 6, 0, 0, 7, 8}, tol()));
  // The return slot holds self.
  ASSERT_EQ(ret->tag, rt::Tag::kTensor);
  EXPECT_EQ(ret->tensor, cache->tensor);
}

TEST_P(IndexingTest, IndexPutAccumulateAndNegative) {
  auto* self = a.tensor<float>({4}, {1, 1, 1, 1});
  HF2PTE_EXPECT_OK(run("aten::index_put_",
                       {self, a.opt_tensor_list({a.tensor<int64_t>({3}, {0, -1, 0})}),
                        a.tensor<float>({3}, {10, 20, 30}), a.b(true), self}));
  EXPECT_TRUE(tensor_matches<float>(self, {4}, {41, 1, 1, 21}, tol()));
  // Without accumulate, values broadcast: one value for every index.
  auto* si = a.tensor<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  HF2PTE_EXPECT_OK(run("aten::index_put_", {si, a.opt_tensor_list({a.tensor<int64_t>({1}, {1})}),
                                            a.tensor<int64_t>({}, {0}), a.b(false), si}));
  EXPECT_TRUE(tensor_matches<int64_t>(si, {2, 3}, {1, 2, 3, 0, 0, 0}));
}

TEST_P(IndexingTest, IndexPutBroadcastIndicesAndNonAdjacent) {
  // Two adjacent index tensors broadcast together: rows [[0],[1]] x cols [2, 0].
  auto* m = a.tensor<float>({2, 3}, F(6, 0));
  HF2PTE_EXPECT_OK(run("aten::index_put_",
                       {m, a.opt_tensor_list({a.tensor<int64_t>({2, 1}, {0, 1}),
                                              a.tensor<int64_t>({2}, {2, 0})}),
                        a.tensor<float>({2, 2}, {1, 2, 3, 4}), a.b(false), m}));
  EXPECT_TRUE(tensor_matches<float>(m, {2, 3}, {2, 0, 1, 4, 0, 3}, tol()));
  // Non-adjacent indices [i, None, k] on [2, 2, 3]: the index dims go first,
  // so the indexed shape is [2 (pairs), 2 (dim 1)].
  auto* t = a.tensor<float>({2, 2, 3}, F(12, 0));
  HF2PTE_EXPECT_OK(run("aten::index_put_",
                       {t, a.opt_tensor_list({a.tensor<int64_t>({2}, {0, 1}), nullptr,
                                              a.tensor<int64_t>({2}, {1, 2})}),
                        a.tensor<float>({2, 2}, {1, 2, 3, 4}), a.b(false), t}));
  // (0, j, 1) = [1, 2][j]; (1, j, 2) = [3, 4][j].
  EXPECT_TRUE(tensor_matches<float>(t, {2, 2, 3}, {0, 1, 0, 0, 2, 0, 0, 0, 3, 0, 0, 4}, tol()));
}

TEST_P(IndexingTest, IndexPutErrors) {
  auto* self = a.tensor<float>({2, 2}, F(4, 0));
  HF2PTE_EXPECT_ERROR(run("aten::index_put_",
                          {self, a.opt_tensor_list({nullptr, a.tensor<int64_t>({1}, {2})}),
                           a.tensor<float>({1}, {1}), a.b(false), self}),
                      kOutOfRange, "aten::index_put_: index value 2 out of range; expected in [-2, 2)");
  HF2PTE_EXPECT_ERROR(run("aten::index_put_",
                          {self, a.opt_tensor_list({a.tensor<int64_t>({1}, {0})}),
                           a.tensor<float>({3}, {1, 2, 3}), a.b(false), self}),
                      kInvalidArgument, "values of shape [3] cannot be broadcast to indexed shape [1, 2]");
  HF2PTE_EXPECT_ERROR(run("aten::index_put_",
                          {self, a.opt_tensor_list({a.tensor<int64_t>({2}, {0, 1}),
                                                    a.tensor<int64_t>({3}, {0, 1, 1})}),
                           a.tensor<float>({1}, {1}), a.b(false), self}),
                      kInvalidArgument, "cannot be broadcast");
  HF2PTE_EXPECT_ERROR(run("aten::index_put_",
                          {self, a.opt_tensor_list({nullptr, nullptr, a.tensor<int64_t>({1}, {0})}),
                           a.tensor<float>({1}, {1}), a.b(false), self}),
                      kInvalidArgument, "too many indices");
  HF2PTE_EXPECT_ERROR(run("aten::index_put_",
                          {self, a.opt_tensor_list({a.tensor<int64_t>({1}, {0})}),
                           a.tensor<int64_t>({1}, {1}), a.b(false), self}),
                      kInvalidArgument, "same dtype");
  HF2PTE_EXPECT_ERROR(run("aten::index_put_",
                          {self, a.opt_tensor_list({a.tensor<bool>({2}, {true, false})}),
                           a.tensor<float>({1}, {1}), a.b(false), self}),
                      kNotSupported, "boolean mask");
  // Nothing was written by the failed calls.
  EXPECT_TRUE(tensor_matches<float>(self, {2, 2}, {0, 0, 0, 0}, tol()));
}

HF2PTE_INSTANTIATE_OP_TESTS(IndexingTest);

}  // namespace
}  // namespace hf2pte::kernels::testing
