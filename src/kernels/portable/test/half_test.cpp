// f16 / bf16 through the kernels (docs/decisions.md, "Half-precision programs"):
// every result is computed in f32 (or double, as the kernel does for f32) from
// exactly widened inputs and rounded once to the out's 16-bit type, so the
// expected values below are the double results rounded the same way
// (T(float(x))): equality, not a tolerance. Plus ATen's promotion with 16-bit
// types and the conversions of _to_dim_order_copy, ties and NaN included.
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "kernels/portable/dtype_dispatch.h"
#include "kernels/portable/test/op_test_util.h"

namespace hf2pte::kernels::testing {
namespace {

using F = std::vector<float>;
constexpr auto kF32 = ScalarType::kFloat;
constexpr auto kBF16 = ScalarType::kBFloat16;
constexpr auto kF16 = ScalarType::kHalf;

/// `x` rounded to T once, as a float (what a kernel's 16-bit out holds).
template <typename T>
float r(double x) {
  return float(T(float(x)));
}

/// The values of a 16-bit out, widened (exact).
template <typename T>
F widened(const rt::EValue* e) {
  F out;
  for (T v : values_of<T>(*e->tensor)) out.push_back(float(v));
  return out;
}

template <typename T>
std::vector<T> of(const F& v) {
  return std::vector<T>(v.begin(), v.end());
}

class HalfTest : public OpTest {};

// bf16: add, mul (tensor and scalar), sub, div, neg, rsqrt, sigmoid; each value
// once rounded from the f32 (add/mul) or double (rsqrt/sigmoid) result.
TEST_P(HalfTest, Bf16ArithmeticRoundsOnce) {
  const F xa{1.5f, -2.25f, 3.0f, 0.1f}, xb{0.0078125f, 4.0f, -1.1f, 7.0f};
  // Inputs are bf16 already: 0.1 and -1.1 round on the way in.
  F ra, rb;
  for (float v : xa) ra.push_back(r<BFloat16>(v));
  for (float v : xb) rb.push_back(r<BFloat16>(v));
  auto* A = a.tensor<BFloat16>({4}, of<BFloat16>(xa));
  auto* B = a.tensor<BFloat16>({4}, of<BFloat16>(xb));
  auto* sum = a.out(kBF16, {4});
  HF2PTE_EXPECT_OK(run("aten::add.out", {A, B, a.i(1), sum, sum}));
  auto* prod = a.out(kBF16, {4});
  HF2PTE_EXPECT_OK(run("aten::mul.out", {A, B, prod, prod}));
  auto* scaled = a.out(kBF16, {4});
  HF2PTE_EXPECT_OK(run("aten::mul.Scalar_out", {A, a.d(0.3), scaled, scaled}));
  auto* rs = a.out(kBF16, {4});
  HF2PTE_EXPECT_OK(run("aten::rsqrt.out", {B, rs, rs}));
  auto* sg = a.out(kBF16, {4});
  HF2PTE_EXPECT_OK(run("aten::sigmoid.out", {A, sg, sg}));
  F e_sum, e_prod, e_scaled, e_rs, e_sg;
  for (size_t i = 0; i < 4; ++i) {
    e_sum.push_back(r<BFloat16>(ra[i] + rb[i]));
    e_prod.push_back(r<BFloat16>(ra[i] * rb[i]));
    e_scaled.push_back(r<BFloat16>(ra[i] * float(0.3)));
    e_rs.push_back(r<BFloat16>(1.0 / std::sqrt(double(rb[i]))));
    e_sg.push_back(r<BFloat16>(1.0 / (1.0 + std::exp(-double(ra[i])))));
  }
  EXPECT_EQ(widened<BFloat16>(sum), e_sum);
  EXPECT_EQ(widened<BFloat16>(prod), e_prod);
  EXPECT_EQ(widened<BFloat16>(scaled), e_scaled);
  // rsqrt of the negative entry is NaN.
  auto got_rs = widened<BFloat16>(rs);
  for (size_t i = 0; i < 4; ++i) {
    if (std::isnan(e_rs[i])) EXPECT_TRUE(std::isnan(got_rs[i]));
    else EXPECT_EQ(got_rs[i], e_rs[i]) << i;
  }
  EXPECT_EQ(widened<BFloat16>(sg), e_sg);
}

// The broadcasts 16-bit LLM graphs make, on tensors past one block (512) and
// past the threading threshold (65536 elements): a per-row scale [M, 1] (the
// norm's rsqrt), a per-column weight [N] (the norm's weight), RoPE's table
// [1, 1, S, D] against [1, H, S, D], a scalar-shaped tensor, and a residual
// add / sub of equal shapes; each element the f32 result rounded once.
TEST_P(HalfTest, Bf16BroadcastPatternsRoundOnce) {
  const int64_t M = 96, N = 1030, H = 4, S = 40, D = 64;
  auto values = [](int64_t n, float scale, float shift) {
    F v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = r<BFloat16>(std::sin(0.37 * double(i) + shift) * scale);
    return v;
  };
  const F x = values(M * N, 3.0f, 0.1f), y = values(M * N, 0.5f, 1.3f), row = values(M, 2.0f, 0.7f),
          col = values(N, 1.5f, 2.1f), q = values(H * S * D, 1.0f, 0.3f), table = values(S * D, 1.0f, 0.9f);
  auto* X = a.tensor<BFloat16>({M, N}, of<BFloat16>(x));
  auto* Y = a.tensor<BFloat16>({M, N}, of<BFloat16>(y));
  auto* Row = a.tensor<BFloat16>({M, 1}, of<BFloat16>(row));
  auto* Col = a.tensor<BFloat16>({N}, of<BFloat16>(col));
  auto* Q = a.tensor<BFloat16>({1, H, S, D}, of<BFloat16>(q));
  auto* Table = a.tensor<BFloat16>({1, 1, S, D}, of<BFloat16>(table));
  auto* One = a.tensor<BFloat16>({1, 1}, of<BFloat16>({0.75f}));
  struct Case {
    const char* op;
    rt::EValue *lhs, *rhs;
    std::vector<int64_t> shape;
    std::function<float(int64_t)> want;  // f32 result at flat index i
  };
  const Case cases[] = {
      {"aten::mul.out", X, Row, {M, N}, [&](int64_t i) { return x[size_t(i)] * row[size_t(i / N)]; }},
      {"aten::mul.out", Col, X, {M, N}, [&](int64_t i) { return col[size_t(i % N)] * x[size_t(i)]; }},
      {"aten::mul.out", Q, Table, {1, H, S, D}, [&](int64_t i) { return q[size_t(i)] * table[size_t(i % (S * D))]; }},
      {"aten::mul.out", One, X, {M, N}, [&](int64_t i) { return 0.75f * x[size_t(i)]; }},
      {"aten::add.out", X, Y, {M, N}, [&](int64_t i) { return x[size_t(i)] + y[size_t(i)]; }},
      {"aten::sub.out", Y, Row, {M, N}, [&](int64_t i) { return y[size_t(i)] - row[size_t(i / N)]; }},
  };
  for (const Case& c : cases) {
    auto* out = a.out(kBF16, c.shape);
    const bool has_alpha = std::string(c.op) != "aten::mul.out";
    if (has_alpha) {
      HF2PTE_EXPECT_OK(run(c.op, {c.lhs, c.rhs, a.i(1), out, out}));
    } else {
      HF2PTE_EXPECT_OK(run(c.op, {c.lhs, c.rhs, out, out}));
    }
    const F got = widened<BFloat16>(out);
    ASSERT_EQ(got.size(), size_t(out->tensor->numel())) << c.op;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], r<BFloat16>(c.want(int64_t(i)))) << c.op << " at " << i;
    }
  }
}

// ATen promotion: bf16 + f32 -> f32, bf16 + f16 -> f32, bf16 * 2.0 stays bf16,
// i64 + bf16 -> bf16; where() and comparisons on 16-bit inputs.
TEST_P(HalfTest, PromotionWithSixteenBitTypes) {
  auto* A = a.tensor<BFloat16>({2}, of<BFloat16>({1.5f, 3.0f}));
  auto* B32 = a.tensor<float>({2}, {0.25f, 1e-3f});
  auto* H = a.tensor<Half>({2}, of<Half>({0.5f, 2.0f}));
  auto* out32 = a.out(kF32, {2});
  HF2PTE_EXPECT_OK(run("aten::add.out", {A, B32, a.i(1), out32, out32}));
  EXPECT_TRUE(tensor_matches<float>(out32, {2}, {1.75f, 3.001f}, 1e-7));  // no bf16 rounding of 3.001
  auto* mixed = a.out(kF32, {2});
  HF2PTE_EXPECT_OK(run("aten::add.out", {A, H, a.i(1), mixed, mixed}));
  EXPECT_TRUE(tensor_matches<float>(mixed, {2}, {2.0f, 5.0f}));
  auto* twice = a.out(kBF16, {2});
  HF2PTE_EXPECT_OK(run("aten::mul.Scalar_out", {A, a.d(2.0), twice, twice}));
  EXPECT_EQ(widened<BFloat16>(twice), (F{3.0f, 6.0f}));
  auto* I = a.tensor<int64_t>({2}, {1, 257});
  auto* ib = a.out(kBF16, {2});
  HF2PTE_EXPECT_OK(run("aten::add.out", {I, A, a.i(1), ib, ib}));
  EXPECT_EQ(widened<BFloat16>(ib), (F{2.5f, r<BFloat16>(260.0)}));  // 260 is representable; 257+3 exactly
  auto* le = a.out(ScalarType::kBool, {2});
  HF2PTE_EXPECT_OK(run("aten::le.Tensor_out", {A, H, le, le}));
  EXPECT_TRUE(tensor_matches<bool>(le, {2}, {false, false}));
  auto* cond = a.tensor<bool>({2}, {true, false});
  auto* ninf = a.tensor<BFloat16>({}, of<BFloat16>({-std::numeric_limits<float>::infinity()}));
  auto* w = a.out(kBF16, {2});
  HF2PTE_EXPECT_OK(run("aten::where.self_out", {cond, A, ninf, w, w}));
  EXPECT_EQ(widened<BFloat16>(w), (F{1.5f, -std::numeric_limits<float>::infinity()}));
}

// _to_dim_order_copy: f32 -> bf16 / f16 round to nearest even (ties to even),
// NaN stays NaN, overflow to f16 gives inf; widening back is exact.
TEST_P(HalfTest, ConversionsRoundToNearestEven) {
  // 1 + 2^-8 is halfway between bf16's 1 and 1 + 2^-7: ties to even gives 1;
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6.
  const float tie_down = 1.0f + 0x1p-8f, tie_up = 1.0f + 3 * 0x1p-8f;
  auto* x = a.tensor<float>({5}, {tie_down, tie_up, std::numeric_limits<float>::quiet_NaN(), 70000.0f, -0.0f});
  auto* b = a.out(kBF16, {5});
  HF2PTE_EXPECT_OK(run("dim_order_ops::_to_dim_order_copy.out", {x, a.b(false), a.none(), b, b}));
  auto gb = widened<BFloat16>(b);
  EXPECT_EQ(gb[0], 1.0f);
  EXPECT_EQ(gb[1], 1.0f + 0x1p-6f);
  EXPECT_TRUE(std::isnan(gb[2]));
  EXPECT_EQ(gb[3], 70144.0f);  // nearest bf16 of 70000
  EXPECT_TRUE(std::signbit(gb[4]));
  auto* h = a.out(kF16, {5});
  HF2PTE_EXPECT_OK(run("dim_order_ops::_to_dim_order_copy.out", {x, a.b(false), a.none(), h, h}));
  auto gh = widened<Half>(h);
  EXPECT_EQ(gh[0], 1.00390625f);  // 1 + 2^-8 is exact in f16
  EXPECT_TRUE(std::isnan(gh[2]));
  EXPECT_TRUE(std::isinf(gh[3]));  // beyond f16's 65504
  auto* back = a.out(kF32, {5});
  HF2PTE_EXPECT_OK(run("dim_order_ops::_to_dim_order_copy.out", {b, a.b(false), a.none(), back, back}));
  auto gback = values_of<float>(*back->tensor);
  EXPECT_EQ(gback[0], gb[0]);
  EXPECT_EQ(gback[3], gb[3]);
  // bf16 -> f16 goes through f32: 70144 overflows f16.
  auto* bh = a.out(kF16, {5});
  HF2PTE_EXPECT_OK(run("dim_order_ops::_to_dim_order_copy.out", {b, a.b(false), a.none(), bh, bh}));
  EXPECT_TRUE(std::isinf(widened<Half>(bh)[3]));
}

// mm / bmm / addmm in bf16: double accumulation of exactly widened operands,
// one rounding per element; mixed dtypes are refused.
TEST_P(HalfTest, Bf16MatmulMatchesDoubleReference) {
  const int64_t M = 3, K = 40, N = 5;
  F av, bv, bias;
  for (int64_t i = 0; i < M * K; ++i) av.push_back(r<BFloat16>(std::sin(0.7 * double(i))));
  for (int64_t i = 0; i < K * N; ++i) bv.push_back(r<BFloat16>(std::cos(0.3 * double(i))));
  for (int64_t i = 0; i < N; ++i) bias.push_back(r<BFloat16>(0.1 * double(i)));
  auto* A = a.tensor<BFloat16>({M, K}, of<BFloat16>(av));
  auto* B = a.tensor<BFloat16>({K, N}, of<BFloat16>(bv));
  auto* Bias = a.tensor<BFloat16>({N}, of<BFloat16>(bias));
  F expect, expect_b;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += double(av[size_t(i * K + k)]) * double(bv[size_t(k * N + j)]);
      expect.push_back(r<BFloat16>(float(acc)));
      expect_b.push_back(r<BFloat16>(float(acc + double(bias[size_t(j)]))));
    }
  }
  auto* mm = a.out(kBF16, {M, N});
  HF2PTE_EXPECT_OK(run("aten::mm.out", {A, B, mm, mm}));
  EXPECT_EQ(widened<BFloat16>(mm), expect);
  auto* addmm = a.out(kBF16, {M, N});
  HF2PTE_EXPECT_OK(run("aten::addmm.out", {Bias, A, B, a.i(1), a.i(1), addmm, addmm}));
  EXPECT_EQ(widened<BFloat16>(addmm), expect_b);
  auto* A3 = a.tensor<BFloat16>({1, M, K}, of<BFloat16>(av));
  auto* B3 = a.tensor<BFloat16>({1, K, N}, of<BFloat16>(bv));
  auto* bmm = a.out(kBF16, {1, M, N});
  HF2PTE_EXPECT_OK(run("aten::bmm.out", {A3, B3, bmm, bmm}));
  EXPECT_EQ(widened<BFloat16>(bmm), expect);
  auto* B32 = a.tensor<float>({K, N}, bv);
  auto* bad = a.out(kBF16, {M, N});
  HF2PTE_EXPECT_ERROR(run("aten::mm.out", {A, B32, bad, bad}), kNotSupported, "expected one dtype");
}

// Decode shapes (M = 1, long K, bias) for bf16 and f16: within one unit in the
// last place of the double result (the optimized set sums in f32 order).
TEST_P(HalfTest, SixteenBitGemvWithinOneUlp) {
  const int64_t K = 700, N = 70;
  auto check = [&](auto tag, ScalarType dt, double ulp) {
    using T = typename decltype(tag)::type;
    F xv, wv, bv;
    for (int64_t i = 0; i < K; ++i) xv.push_back(r<T>(std::sin(0.37 * double(i))));
    for (int64_t i = 0; i < K * N; ++i) wv.push_back(r<T>(std::cos(0.11 * double(i)) * 0.1));
    for (int64_t i = 0; i < N; ++i) bv.push_back(r<T>(0.01 * double(i)));
    auto* X = a.tensor<T>({1, K}, of<T>(xv));
    auto* W = a.tensor<T>({K, N}, of<T>(wv));
    auto* Bias = a.tensor<T>({N}, of<T>(bv));
    auto* out = a.out(dt, {1, N});
    HF2PTE_EXPECT_OK(run("aten::addmm.out", {Bias, X, W, a.i(1), a.i(1), out, out}));
    auto got = widened<T>(out);
    ASSERT_EQ(got.size(), size_t(N));
    for (int64_t n = 0; n < N; ++n) {
      double acc = bv[size_t(n)];
      for (int64_t k = 0; k < K; ++k) acc += double(xv[size_t(k)]) * double(wv[size_t(k * N + n)]);
      EXPECT_LE(std::fabs(got[size_t(n)] - acc), ulp * std::max(1.0, std::fabs(acc))) << n;
    }
  };
  check(kernels::TypeTag<BFloat16>{}, kBF16, 0x1p-7);
  check(kernels::TypeTag<Half>{}, kF16, 0x1p-10);
}

// softmax and mean of bf16 rows: double accumulation, one rounding.
TEST_P(HalfTest, Bf16SoftmaxAndMean) {
  const F x{0.5f, -1.0f, 2.0f, 0.0f, -std::numeric_limits<float>::infinity(), 1.0f};
  auto* X = a.tensor<BFloat16>({2, 3}, of<BFloat16>(x));
  auto* sm = a.out(kBF16, {2, 3});
  HF2PTE_EXPECT_OK(run("aten::_softmax.out", {X, a.i(-1), a.b(false), sm, sm}));
  F expect;
  for (int row = 0; row < 2; ++row) {
    double m = -INFINITY, s = 0;
    for (int j = 0; j < 3; ++j) m = std::max(m, double(x[size_t(row * 3 + j)]));
    for (int j = 0; j < 3; ++j) s += std::exp(double(x[size_t(row * 3 + j)]) - m);
    for (int j = 0; j < 3; ++j) expect.push_back(r<BFloat16>(float(std::exp(double(x[size_t(row * 3 + j)]) - m) / s)));
  }
  EXPECT_EQ(widened<BFloat16>(sm), expect);
  auto* Y = a.tensor<BFloat16>({2, 3}, of<BFloat16>({1, 2, 4, 0.5f, 0.25f, 0.125f}));
  auto* mean = a.out(kBF16, {2});
  HF2PTE_EXPECT_OK(run("aten::mean.out", {Y, a.int_list({-1}), a.b(false), a.none(), mean, mean}));
  EXPECT_EQ(widened<BFloat16>(mean), (F{r<BFloat16>(7.0 / 3), r<BFloat16>(0.875 / 3)}));
}

// Data movement on 16-bit tensors: embedding rows, index_put_ into a cache,
// cat and permute copy the bits unchanged.
TEST_P(HalfTest, Bf16DataMovement) {
  const F w{1, 2, 3, 4, 5, 6};
  auto* W = a.tensor<BFloat16>({3, 2}, of<BFloat16>(w));
  auto* idx = a.tensor<int64_t>({2}, {2, 0});
  auto* emb = a.out(kBF16, {2, 2});
  HF2PTE_EXPECT_OK(run("aten::embedding.out", {W, idx, a.i(-1), a.b(false), a.b(false), emb, emb}));
  EXPECT_EQ(widened<BFloat16>(emb), (F{5, 6, 1, 2}));
  auto* cache = a.tensor<BFloat16>({3, 2}, of<BFloat16>({0, 0, 0, 0, 0, 0}));
  auto* pos = a.tensor<int64_t>({1}, {1});
  auto* val = a.tensor<BFloat16>({1, 2}, of<BFloat16>({7, 8}));
  HF2PTE_EXPECT_OK(run("aten::index_put_", {cache, a.opt_tensor_list({pos}), val, a.b(false), cache}));
  EXPECT_EQ(widened<BFloat16>(cache), (F{0, 0, 7, 8, 0, 0}));
  auto* c = a.out(kBF16, {3, 4});
  HF2PTE_EXPECT_OK(run("aten::cat.out", {a.tensor_list({W, W}), a.i(1), c, c}));
  EXPECT_EQ(widened<BFloat16>(c), (F{1, 2, 1, 2, 3, 4, 3, 4, 5, 6, 5, 6}));
  auto* p = a.out(kBF16, {2, 3});
  HF2PTE_EXPECT_OK(run("aten::permute_copy.out", {W, a.int_list({1, 0}), p, p}));
  EXPECT_EQ(widened<BFloat16>(p), (F{1, 3, 5, 2, 4, 6}));
}

// f16 arithmetic keeps 11 significant bits: 1 + 2^-10 survives an add that
// bf16 would round away.
TEST_P(HalfTest, Fp16KeepsElevenBits) {
  auto* A = a.tensor<Half>({1}, of<Half>({1.0f}));
  auto* B = a.tensor<Half>({1}, of<Half>({0x1p-10f}));
  auto* out = a.out(kF16, {1});
  HF2PTE_EXPECT_OK(run("aten::add.out", {A, B, a.i(1), out, out}));
  EXPECT_EQ(widened<Half>(out), (F{1.0f + 0x1p-10f}));
  auto* Ab = a.tensor<BFloat16>({1}, of<BFloat16>({1.0f}));
  auto* Bb = a.tensor<BFloat16>({1}, of<BFloat16>({0x1p-10f}));
  auto* outb = a.out(kBF16, {1});
  HF2PTE_EXPECT_OK(run("aten::add.out", {Ab, Bb, a.i(1), outb, outb}));
  EXPECT_EQ(widened<BFloat16>(outb), (F{1.0f}));
}

HF2PTE_INSTANTIATE_OP_TESTS(HalfTest);

}  // namespace
}  // namespace hf2pte::kernels::testing
