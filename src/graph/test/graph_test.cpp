#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <utility>

#include "graph/constant.h"
#include "graph/graph.h"
#include "graph/shapes.h"

namespace hf2pte::graph {
namespace {

TEST(SymInt, SimplifiesAndBounds) {
  SymInt s = SymInt::dim("seq");
  DimRanges r{{"seq", {1, 512}}};
  EXPECT_EQ((s * 1).str(), "seq");
  EXPECT_EQ((s + 0).str(), "seq");
  EXPECT_EQ((s * 2 * 3).str(), "(seq * 6)");
  EXPECT_EQ((2 * s).str(), "(seq * 2)");
  EXPECT_EQ((s - s).str(), "0");
  EXPECT_EQ(((s + 1) - 1).str(), "seq");  // an end sliced back by its own offset
  EXPECT_EQ(((s + 3) - 1).str(), "(seq + 2)");
  EXPECT_EQ(((s + 1) - 1).evaluate({{"seq", 9}}), 9);
  EXPECT_TRUE((s * 2 + 1) == (SymInt::dim("seq") * 2 + 1));  // structural, not by identity
  EXPECT_FALSE((s * 2 + 1) == (s * 2 + 2));
  EXPECT_EQ((s * 2 + 1).hash(), (SymInt::dim("seq") * 2 + 1).hash());
  EXPECT_EQ((s * 4).upper_bound(r), 2048);
  EXPECT_EQ((s * 4).lower_bound(r), 4);
  EXPECT_EQ(ceildiv(s, 4).upper_bound(r), 128);
  EXPECT_EQ(floordiv(s * 3, 2).evaluate({{"seq", 5}}), 7);
  EXPECT_EQ(mod(SymInt(-7), SymInt(3)).constant_value(), 2);  // Python floor semantics
  EXPECT_FALSE(s.evaluate({}).has_value());
}

TEST(Graph, InfersShapesAndPrints) {
  Graph g;
  SymInt seq = g.add_dim("seq", 1, 16);
  ValueId x = g.add_input("x", TensorType{ScalarType::kFloat, {seq, 8}, {}});
  ValueId w = g.add_constant("w", ConstantData::from_bytes(ScalarType::kFloat, {4, 8}, std::vector<uint8_t>(128), "test"));
  auto y = g.add(OpId::Linear, {x, w}, "proj");
  ASSERT_TRUE(y.is_ok()) << y.status().message();
  EXPECT_EQ(g.type(*y).str(), "f32[seq, 4]");
  // Defaults are materialised: linear(input, weight, bias=None).
  EXPECT_EQ(g.nodes().back().args.size(), 3u);
  auto bad = g.add(OpId::MmOut, {x, x}, "bad");
  EXPECT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("node bad"), std::string::npos);
  g.set_outputs({*y});
  std::string text = g.to_string();
  EXPECT_NE(text.find("%proj: f32[seq, 4] = linear(input=%x, weight=%w, bias=None)"), std::string::npos) << text;
  EXPECT_EQ(g.dim_sources().at("seq").input, x);
}

TEST(Shapes, BroadcastAndSlice) {
  SymInt s = SymInt::dim("s");
  auto b = broadcast_shapes({s, 1, 8}, {4, 1});
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(b->at(0).str(), "s");
  EXPECT_EQ(b->at(1).str(), "4");
  EXPECT_FALSE(broadcast_shapes({3}, {4}).is_ok());
  Graph g;
  ValueId x = g.add_input("x", TensorType{ScalarType::kFloat, {2, 10}, {}});
  auto sl = g.add(OpId::SliceCopyTensorOut, {x, int64_t{1}, SymInt(-4), None{}}, "tail");
  ASSERT_TRUE(sl.is_ok()) << sl.status().message();
  EXPECT_EQ(g.type(*sl).str(), "f32[2, 4]");
}

TEST(Shapes, ScanAndRoutingOps) {
  Graph g;
  SymInt s = g.add_dim("s", 1, 8);
  ValueId x = g.add_input("x", TensorType{ScalarType::kFloat, {s, 3}, {}});
  ValueId i = g.add_input("i", TensorType{ScalarType::kLong, {s}, {}});
  for (OpId op : {OpId::ExpOut, OpId::Log1pOut}) {
    auto y = g.add(op, {x}, "y");
    ASSERT_TRUE(y.is_ok()) << y.status().message();
    EXPECT_EQ(g.type(*y).str(), "f32[s, 3]");
    auto yi = g.add(op, {i}, "yi");  // integer inputs give float results, as ATen's
    ASSERT_TRUE(yi.is_ok()) << yi.status().message();
    EXPECT_EQ(g.type(*yi).str(), "f32[s]");
  }
  auto c = g.add(OpId::ClampOut, {x, None{}, 1.5}, "c");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(g.type(*c).str(), "f32[s, 3]");
}

// The recipe's 2-D view: rows of row_width, a block, picked rows and columns,
// transposed, reshaped; and its transposed() twin is the exact transpose.
TEST(ConstantRecipe, PicksRowsAndColumnsThenTransposes) {
  std::vector<float> src(2 * 3 * 4);  // [2, 3, 4]: element (e, r, c) = 100 e + 10 r + c
  for (int e = 0; e < 2; ++e)
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 4; ++c) src[size_t(e * 12 + r * 4 + c)] = float(100 * e + 10 * r + c);
  auto bytes = std::make_shared<std::vector<float>>(src);
  ConstantRecipe r;
  r.source = TensorSource{"w", ScalarType::kFloat, {2, 3, 4},
                          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size() * 4),
                          bytes};
  auto read = [](const ConstantData& c) {
    std::vector<float> out;
    EXPECT_TRUE(c.write([&](const void* p, size_t n) {
                   const auto* f = static_cast<const float*>(p);
                   out.insert(out.end(), f, f + n / 4);
                   return Status::ok();
                 }).is_ok());
    return out;
  };
  // Expert 1's [3, 4] block, odd columns, transposed: [2, 3] = (c, r) -> 100 + 10 r + c.
  r.row_width = 4;
  r.row_begin = 3;
  r.row_end = 6;
  r.cols = {1, 3};
  r.transpose = true;
  ConstantData c = make_constant(r);
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(read(c), (std::vector<float>{101, 111, 121, 103, 113, 123}));
  ASSERT_TRUE(static_cast<bool>(c.transposed));
  ConstantData t = c.transposed();
  EXPECT_EQ(t.sizes, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(read(t), (std::vector<float>{101, 103, 111, 113, 121, 123}));
  EXPECT_NE(c.dedup_key, t.dedup_key);
  // Picked rows in a given order, reshaped.
  ConstantRecipe p;
  p.source = r.source;
  p.row_width = 4;
  p.rows = {5, 0};
  p.sizes = {1, 2, 4};
  ConstantData q = make_constant(p);
  EXPECT_EQ(q.sizes, (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(read(q), (std::vector<float>{120, 121, 122, 123, 0, 1, 2, 3}));
  EXPECT_FALSE(static_cast<bool>(q.transposed));  // reshaped: no 2-D twin
}

// Constants written as fp16 (--linear-weights fp16) from f32 and bf16
// checkpoints: IEEE round to nearest even, overflow to inf, subnormals, signed
// zero and NaN, the same whether the recipe streams whole runs (the tight
// convert loop) or picks rows (element by element).
// A source in memory (not a file mapping) keeps its bytes when streamed: a
// constant is written more than once (its SHA-256 key, then the file), and
// giving pages back after the first stream would zero them. 5 pages of f32,
// streamed twice each as a plain copy, converted to half, and transposed.
TEST(ConstantRecipe, InMemorySourceStreamsTheSameBytesTwice) {
  constexpr int64_t rows = 40, cols = 128;  // 20 KiB
  auto bytes = std::make_shared<std::vector<float>>(size_t(rows * cols));
  for (size_t i = 0; i < bytes->size(); ++i) (*bytes)[i] = float(i % 1000) - 500.0f;
  ConstantRecipe r;
  r.source = TensorSource{"w", ScalarType::kFloat, {rows, cols},
                          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size() * 4),
                          bytes};
  auto stream = [](const ConstantData& c) {
    std::vector<uint8_t> out;
    EXPECT_TRUE(c.write([&](const void* p, size_t n) {
                  out.insert(out.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
                  return Status::ok();
                }).is_ok());
    return out;
  };
  for (int form = 0; form < 3; ++form) {
    ConstantRecipe t = r;
    if (form >= 1) t.dtype = ScalarType::kHalf;
    if (form == 2) t.transpose = true;
    const ConstantData c = make_constant(t);
    const std::vector<uint8_t> first = stream(c), second = stream(c);
    ASSERT_EQ(first.size(), size_t(rows * cols) * (form == 0 ? 4 : 2)) << "form " << form;
    EXPECT_EQ(first, second) << "form " << form;
    // The last element written: (rows-1, cols-1), transposed or not, as the source holds it.
    const float last = (*bytes)[bytes->size() - 1];
    float got = 0;
    if (form == 0) {
      std::memcpy(&got, second.data() + second.size() - 4, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, second.data() + second.size() - 2, 2);
      got = half_to_float(h);
    }
    EXPECT_EQ(got, last) << "form " << form;
  }
}

TEST(ConstantRecipe, WritesHalfRoundedToNearestEven) {
  auto bits_of = [](float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  };
  const float inf = std::numeric_limits<float>::infinity();
  // f32 source values and the IEEE binary16 bits they round to.
  const std::vector<std::pair<float, uint16_t>> f32_cases = {
      {1.0f, 0x3C00},          {-2.0f, 0xC000},          {65504.0f, 0x7BFF},       {65520.0f, 0x7C00},
      {1.0f + 0x1p-11f, 0x3C00}, {1.0f + 0x3p-11f, 0x3C02}, {0x1p-24f, 0x0001},       {0x1p-25f, 0x0000},
      {0x3p-25f, 0x0002},      {-0.0f, 0x8000},          {inf, 0x7C00},            {-inf, 0xFC00},
      {0x1p-14f, 0x0400},      {1e-10f, 0x0000}};
  // bf16 source bits and the half bits.
  const std::vector<std::pair<uint16_t, uint16_t>> bf16_cases = {
      {0x3F80, 0x3C00}, {0xC000, 0xC000}, {0x4780, 0x7C00}, {0x3380, 0x0001}, {0x3300, 0x0000},
      {0x33C0, 0x0002}, {0x8000, 0x8000}, {0x3F81, 0x3C08}, {0x7F80, 0x7C00}};
  auto check = [](ScalarType dtype, std::vector<uint8_t> raw, size_t n, const std::vector<uint16_t>& want,
                  const std::vector<bool>& is_nan) {
    auto bytes = std::make_shared<std::vector<uint8_t>>(std::move(raw));
    ConstantRecipe r;
    r.source = TensorSource{"w", dtype, {int64_t(n), 1}, std::span<const uint8_t>(bytes->data(), bytes->size()), bytes};
    r.dtype = ScalarType::kHalf;
    for (bool picked : {false, true}) {
      ConstantRecipe t = r;
      if (picked) {
        for (size_t i = 0; i < n; ++i) t.rows.push_back(int64_t(i));
      }
      std::vector<uint16_t> out;
      ASSERT_TRUE(make_constant(t).write([&](const void* p, size_t len) {
                    const auto* h = static_cast<const uint16_t*>(p);
                    out.insert(out.end(), h, h + len / 2);
                    return Status::ok();
                  }).is_ok());
      ASSERT_EQ(out.size(), n);
      for (size_t i = 0; i < n; ++i) {
        if (is_nan[i]) {
          EXPECT_TRUE((out[i] & 0x7C00) == 0x7C00 && (out[i] & 0x3FF) != 0) << "element " << i << " picked " << picked;
        } else {
          EXPECT_EQ(out[i], want[i]) << "element " << i << " picked " << picked;
        }
      }
    }
  };
  {
    std::vector<uint8_t> raw;
    std::vector<uint16_t> want;
    std::vector<bool> nan;
    for (auto [f, h] : f32_cases) {
      const uint32_t b = bits_of(f);
      raw.insert(raw.end(), reinterpret_cast<const uint8_t*>(&b), reinterpret_cast<const uint8_t*>(&b) + 4);
      want.push_back(h);
      nan.push_back(false);
    }
    const uint32_t qnan = 0x7FC00001;
    raw.insert(raw.end(), reinterpret_cast<const uint8_t*>(&qnan), reinterpret_cast<const uint8_t*>(&qnan) + 4);
    want.push_back(0);
    nan.push_back(true);
    check(ScalarType::kFloat, raw, want.size(), want, nan);
  }
  {
    std::vector<uint8_t> raw;
    std::vector<uint16_t> want;
    std::vector<bool> nan;
    for (auto [b, h] : bf16_cases) {
      raw.push_back(uint8_t(b & 0xFF));
      raw.push_back(uint8_t(b >> 8));
      want.push_back(h);
      nan.push_back(false);
    }
    raw.push_back(0xC0);  // bf16 NaN 0x7FC0
    raw.push_back(0x7F);
    want.push_back(0);
    nan.push_back(true);
    check(ScalarType::kBFloat16, raw, want.size(), want, nan);
  }
}

}  // namespace
}  // namespace hf2pte::graph
