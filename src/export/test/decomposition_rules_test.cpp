// Decomposition rules (items 5-18): every rule runs a small graph through the
// reference interpreter before the rewrite (the graph op's direct
// implementation) and after it (portable kernels) on random inputs; results
// must match, exactly the expected rules must fire, and the rewritten graph text
// must match its golden dump in golden/ (HF2PTE_UPDATE_GOLDEN=1 rewrites them).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <type_traits>

#include "export/decompositions.h"
#include "export/interpreter.h"
#include "export/pipeline.h"
#include "export/validate.h"
#include "pte/pte_writer.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::exp {
namespace {

using graph::Graph;
using graph::IntList;
using graph::None;
using graph::SymInt;
using graph::TensorType;
using graph::ValueId;

TensorType f32(std::vector<SymInt> sizes) { return TensorType{ScalarType::kFloat, std::move(sizes), {}}; }

/// Random inputs for every graph input: f32 uniform in [-2, 2) (or the small
/// integer grid `grid` when set, to force ties), i64 in [0, 4), bool fair coins.
std::vector<HostTensor> random_inputs(const Graph& g, const std::map<std::string, int64_t>& dims, uint64_t seed,
                                      bool grid = false) {
  std::mt19937_64 gen(seed);
  std::vector<HostTensor> out;
  for (ValueId v : g.inputs()) {
    const TensorType& t = g.type(v);
    HostTensor h;
    h.dtype = t.dtype;
    for (const auto& s : t.sizes) h.sizes.push_back(*s.evaluate(dims));
    const int64_t n = h.numel();
    h.bytes.assign(size_t(n) * element_size(t.dtype), 0);
    for (int64_t i = 0; i < n; ++i) {
      switch (t.dtype) {
        case ScalarType::kFloat:
          h.data<float>()[i] = grid ? float(int64_t(gen() % 9)) : std::uniform_real_distribution<float>(-2, 2)(gen);
          break;
        case ScalarType::kLong: h.data<int64_t>()[i] = int64_t(gen() % 4); break;
        case ScalarType::kBool: h.bytes[size_t(i)] = uint8_t(gen() % 2); break;
        default: ADD_FAILURE() << "no random " << scalar_type_name(t.dtype);
      }
    }
    out.push_back(std::move(h));
  }
  return out;
}

Result<std::vector<HostTensor>> interpret(const Graph& g, const std::vector<HostTensor>& inputs) {
  GraphInterpreter interp(g, portable_registry());
  return interp.run(inputs);
}

double element(const HostTensor& t, int64_t i) {
  switch (t.dtype) {
    case ScalarType::kFloat: return t.data<float>()[i];
    case ScalarType::kLong: return double(t.data<int64_t>()[i]);
    case ScalarType::kInt: return t.data<int32_t>()[i];
    case ScalarType::kBool: return t.bytes[size_t(i)] ? 1 : 0;
    default: return NAN;
  }
}

/// Same dtype and shape, floats within `tol` (NaN matches NaN), integers exact.
void expect_same(const HostTensor& want, const HostTensor& got, double tol, const std::string& what) {
  ASSERT_EQ(int(want.dtype), int(got.dtype)) << what;
  ASSERT_EQ(want.sizes, got.sizes) << what;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = element(want, i), b = element(got, i);
    if ((std::isnan(a) && std::isnan(b)) || a == b) continue;
    if (want.dtype == ScalarType::kFloat) {
      ASSERT_NEAR(a, b, tol * std::max(1.0, std::abs(a))) << what << " element " << i;
    } else {
      ASSERT_EQ(a, b) << what << " element " << i;
    }
  }
}

/// Compares `text` with golden/<name>.txt, or rewrites it under HF2PTE_UPDATE_GOLDEN=1.
void expect_golden(const std::string& name, const std::string& text) {
  const std::filesystem::path path = std::filesystem::path(HF2PTE_SOURCE_DIR) / "src/export/test/golden" / (name + ".txt");
  const char* update = std::getenv("HF2PTE_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << text;
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in.good()) << "missing golden " << path << " (run with HF2PTE_UPDATE_GOLDEN=1 to create it)";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(want.str(), text) << "graph text differs from " << path << " (HF2PTE_UPDATE_GOLDEN=1 rewrites it)";
}

struct Check {
  std::map<std::string, int> fired;       ///< exactly these rules, this often
  std::string golden;                     ///< golden file name ("" = none)
  std::map<std::string, int64_t> dims{};  ///< values of symbolic dims for the run
  double tol = 1e-5;
  bool grid = false;                      ///< integer-valued float inputs (ties)
  Backend backend = Backend::kPortable;
};

/// Runs `g` before and after the backend's rules on two random input sets.
void check_rules(Graph g, const Check& c) {
  Graph before = g;
  auto counts = rewrite_to_fixed_point(g, decomposition_rules(c.backend));
  ASSERT_TRUE(counts.is_ok()) << counts.status().message();
  EXPECT_EQ(*counts, (RuleCounts(c.fired.begin(), c.fired.end()))) << g.to_string();
  for (const auto& n : g.nodes()) EXPECT_TRUE(op_info(n.op).has_kernel) << "left unlowered: " << n.name;
  for (uint64_t seed : {1u, 2u}) {
    auto inputs = random_inputs(before, c.dims, seed, c.grid);
    auto want = interpret(before, inputs);
    ASSERT_TRUE(want.is_ok()) << want.status().message();
    auto got = interpret(g, inputs);
    ASSERT_TRUE(got.is_ok()) << got.status().message() << "\n" << g.to_string();
    ASSERT_EQ(want->size(), got->size());
    for (size_t i = 0; i < want->size(); ++i) {
      expect_same((*want)[i], (*got)[i], c.tol, "output " + std::to_string(i) + "\n" + g.to_string());
    }
  }
  if (!c.golden.empty()) expect_golden(c.golden, g.to_string());
}

/// Sets every output of a node as the graph's outputs.
void output_all(Graph& g, Result<std::vector<ValueId>> outs) {
  ASSERT_TRUE(outs.is_ok()) << outs.status().message();
  g.set_outputs(*outs);
}

// ---- items 5-6: split / chunk ----

TEST(DecompositionRules, SplitBecomesNarrows) {
  Graph g;
  auto x = g.add_input("x", f32({4, 10}));
  output_all(g, g.add_node(OpId::SplitTensor, {x, SymInt(3), int64_t{1}}, "split"));
  ASSERT_EQ(g.outputs().size(), 4u);  // 3, 3, 3, 1
  check_rules(g, {{{"split_to_narrow", 1}}, "split_to_narrow"});
}

TEST(DecompositionRules, SplitWithSizesBecomesNarrows) {
  Graph g;
  auto x = g.add_input("x", f32({5, 3}));
  output_all(g, g.add_node(OpId::SplitWithSizes, {x, IntList{1, 4}, int64_t{0}}, "split"));
  check_rules(g, {{{"split_to_narrow", 1}}, "split_with_sizes_to_narrow"});
}

TEST(DecompositionRules, ChunkUsesCeilSizedPieces) {
  Graph g;
  auto x = g.add_input("x", f32({2, 7}));
  output_all(g, g.add_node(OpId::Chunk, {x, int64_t{3}, int64_t{-1}}, "chunk"));
  ASSERT_EQ(g.outputs().size(), 3u);  // ceil(7/3) = 3: 3, 3, 1
  EXPECT_EQ(g.type(g.outputs()[2]).str(), "f32[2, 1]");
  check_rules(g, {{{"chunk_to_narrow", 1}}, "chunk_to_narrow"});
}

TEST(DecompositionRules, SplitAlongASymbolicDimIsANamedError) {
  // The seed leaves a SymInt split alone; here split is graph-only, so building it fails by name.
  Graph g;
  SymInt seq = g.add_dim("seq", 1, 8);
  auto x = g.add_input("x", f32({seq, 4}));
  auto parts = g.add_node(OpId::SplitTensor, {x, SymInt(2), int64_t{0}}, "split");
  ASSERT_FALSE(parts.is_ok());
  EXPECT_NE(parts.status().message().find("split along symbolic dim seq"), std::string::npos) << parts.status().message();
  // Along a constant dim of the same tensor it is fine, on the cuda rule set too.
  output_all(g, g.add_node(OpId::SplitTensor, {x, SymInt(3), int64_t{1}}, "split"));
  check_rules(g, {{{"split_to_narrow", 1}}, "", {{"seq", 3}}, 1e-5, false, Backend::kCuda});
}

// ---- item 7: topk ----

TEST(DecompositionRules, TopkLargestOnLastDim) {
  Graph g;
  auto x = g.add_input("x", f32({3, 7}));
  output_all(g, g.add_node(OpId::Topk, {x, SymInt(3), int64_t{-1}, true, true}, "topk"));
  check_rules(g, {{{"topk_to_argsort_gather", 1}}, "topk_to_argsort_gather"});
}

TEST(DecompositionRules, TopkSmallestOnInnerDim) {
  Graph g;
  auto x = g.add_input("x", f32({6, 2, 3}));
  output_all(g, g.add_node(OpId::Topk, {x, SymInt(2), int64_t{0}, false, true}, "topk"));
  check_rules(g, {{{"topk_to_argsort_gather", 1}}, ""});
}

// ---- item 8: detach ----

TEST(DecompositionRules, DetachIsIdentity) {
  Graph g;
  auto x = g.add_input("x", f32({2, 3}));
  auto d = g.add(OpId::Detach, {x}, "d");
  auto y = g.add(OpId::NegOut, {*d}, "y");
  g.set_outputs({*y});
  check_rules(g, {{{"detach_to_identity", 1}}, "detach_to_identity"});
}

// ---- item 9: avg_pool2d ----

Graph avg_pool(std::vector<SymInt> in, IntList k, IntList s, IntList p, bool include_pad, graph::Arg divisor,
               bool ceil_mode = false) {
  Graph g;
  auto x = g.add_input("x", f32(std::move(in)));
  auto y = g.add(OpId::AvgPool2d, {x, k, s, p, ceil_mode, include_pad, divisor}, "pool");
  EXPECT_TRUE(y.is_ok()) << y.status().message();
  g.set_outputs({*y});
  return g;
}

TEST(DecompositionRules, AvgPoolBecomesDepthwiseConv) {
  check_rules(avg_pool({2, 3, 7, 7}, {3, 3}, {2, 2}, {1, 1}, true, None{}), {{{"avg_pool2d_to_depthwise_conv", 1}}, "avg_pool2d_to_depthwise_conv"});
}

TEST(DecompositionRules, AvgPoolExcludingPaddingDividesByWindowCounts) {
  check_rules(avg_pool({1, 2, 6, 5}, {3, 2}, {1, 2}, {1, 1}, false, None{}), {{{"avg_pool2d_to_depthwise_conv", 1}}, "avg_pool2d_count_exclude_pad"});
}

TEST(DecompositionRules, AvgPoolHonoursDivisorOverride) {
  check_rules(avg_pool({3, 5, 5}, {2, 2}, {}, {0, 0}, true, int64_t{3}), {{{"avg_pool2d_to_depthwise_conv", 1}}, ""});
}

TEST(DecompositionRules, AvgPoolKernelIsClampedToThePaddedInput) {
  // A 5x5 window over a 2x2 input padded by 1 (4x4): clamped to 4x4, one output.
  Graph g = avg_pool({1, 2, 2, 2}, {5, 5}, {1, 1}, {1, 1}, true, None{});
  EXPECT_EQ(g.type(g.outputs()[0]).str(), "f32[1, 2, 1, 1]");
  check_rules(g, {{{"avg_pool2d_to_depthwise_conv", 1}}, ""});
  auto out = interpret(g, {HostTensor::from<float>(ScalarType::kFloat, {1, 2, 2, 2}, {1, 2, 3, 4, 8, 8, 8, 8})});
  ASSERT_TRUE(out.is_ok());
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[0], 10.0f / 16.0f);  // padding counts: sum / 16
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[1], 32.0f / 16.0f);
}

TEST(DecompositionRules, AvgPoolCeilModeExtendsTheInput) {
  // 6x6, k 3, s 2: ceil_mode gives 3x3 (floor: 2x2); the last window passes the input.
  for (bool include_pad : {true, false}) {
    for (int64_t p : {0, 1}) {
      Graph g = avg_pool({1, 2, 6, 6}, {3, 3}, {2, 2}, {p, p}, include_pad, None{}, true);
      SCOPED_TRACE(::testing::Message() << "count_include_pad=" << include_pad << " padding=" << p);
      EXPECT_EQ(g.type(g.outputs()[0]).str(), p == 0 ? "f32[1, 2, 3, 3]" : "f32[1, 2, 4, 4]");
      check_rules(g, {{{"avg_pool2d_to_depthwise_conv", 1}}, include_pad && p == 1 ? "avg_pool2d_ceil_mode" : ""});
    }
  }
  // With divisor_override the extension only adds zeros to the sums.
  check_rules(avg_pool({2, 7, 7}, {2, 2}, {2, 2}, {0, 0}, true, int64_t{4}, true), {{{"avg_pool2d_to_depthwise_conv", 1}}, ""});
}

// ---- items 10-11: bucketize / searchsorted ----

/// Boundaries [1, 3, 3, 5, 7] (a repeated boundary) against integer-valued inputs: ties everywhere.
ValueId tied_boundaries(Graph& g) {
  std::vector<float> b{1, 3, 3, 5, 7};
  std::vector<uint8_t> bytes(b.size() * 4);
  std::memcpy(bytes.data(), b.data(), bytes.size());
  return g.add_constant("b", graph::ConstantData::from_bytes(ScalarType::kFloat, {5}, bytes, "boundaries"));
}

TEST(DecompositionRules, BucketizeWithTiesLeftAndRight) {
  for (bool right : {false, true}) {
    for (bool int32 : {false, true}) {
      Graph g;
      auto x = g.add_input("x", f32({4, 6}));
      auto y = g.add(OpId::BucketizeTensor, {x, tied_boundaries(g), int32, right}, "bucket");
      ASSERT_TRUE(y.is_ok()) << y.status().message();
      EXPECT_EQ(g.type(*y).dtype, int32 ? ScalarType::kInt : ScalarType::kLong);
      g.set_outputs({*y});
      SCOPED_TRACE(::testing::Message() << "right=" << right << " out_int32=" << int32);
      check_rules(g, {{{"bucketize_to_compare_sum", 1}},
                      right && int32 ? "bucketize_right_int32" : right ? "" : int32 ? "" : "bucketize_left",
                      {}, 0, /*grid=*/true});
    }
  }
}

TEST(DecompositionRules, SearchsortedOneAndTwoDimensional) {
  // Sorted rows cannot come from random inputs, so the sequence is a constant.
  for (bool right : {false, true}) {
    Graph g;
    std::vector<float> rows{0, 1, 1, 4, 8, 2, 2, 2, 3, 5};
    std::vector<uint8_t> bytes(rows.size() * 4);
    std::memcpy(bytes.data(), rows.data(), bytes.size());
    auto s2 = g.add_constant("rows", graph::ConstantData::from_bytes(ScalarType::kFloat, {2, 5}, bytes, "sorted rows"));
    auto v2 = g.add_input("v2", f32({2, 6}));
    auto v1 = g.add_input("v1", f32({3, 2}));
    auto a = g.add(OpId::SearchsortedTensor, {s2, v2, false, right}, "rows");
    auto b = g.add(OpId::SearchsortedTensor, {tied_boundaries(g), v1, true, right}, "shared");
    ASSERT_TRUE(a.is_ok() && b.is_ok());
    g.set_outputs({*a, *b});
    SCOPED_TRACE(::testing::Message() << "right=" << right);
    check_rules(g, {{{"searchsorted_to_compare_sum", 2}}, right ? "searchsorted_right" : "", {}, 0, true});
  }
}

ValueId f32_constant(Graph& g, const std::string& name, std::vector<int64_t> sizes, const std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * 4);
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return g.add_constant(name, graph::ConstantData::from_bytes(ScalarType::kFloat, std::move(sizes), bytes, name));
}

TEST(DecompositionRules, SearchsortedMatchesTheTorchDocumentationExample) {
  // torch.searchsorted's documented example: rows [[1,3,5,7,9],[2,4,6,8,10]], values
  // [[3,6,9],[3,6,9]] -> [[1,3,4],[1,2,4]]; right -> [[2,3,5],[1,3,4]]; the 1-D row
  // [1,3,5,7,9] -> [[1,3,4],[1,3,4]] (bucketize of the values gives the same).
  const std::vector<float> rows{1, 3, 5, 7, 9, 2, 4, 6, 8, 10}, values{3, 6, 9, 3, 6, 9};
  for (bool lowered : {false, true}) {
    Graph g;
    auto s2 = f32_constant(g, "rows", {2, 5}, rows);
    auto s1 = f32_constant(g, "row", {5}, {1, 3, 5, 7, 9});
    auto v = g.add_input("v", f32({2, 3}));
    g.set_outputs({*g.add(OpId::SearchsortedTensor, {s2, v, false, false}, "left"),
                   *g.add(OpId::SearchsortedTensor, {s2, v, false, true}, "right"),
                   *g.add(OpId::SearchsortedTensor, {s1, v, true, false}, "shared"),
                   *g.add(OpId::BucketizeTensor, {v, s1, false, false}, "bucket")});
    if (lowered) {
      ASSERT_TRUE(rewrite_to_fixed_point(g, decomposition_rules(Backend::kPortable)).is_ok());
    }
    auto out = interpret(g, {HostTensor::from<float>(ScalarType::kFloat, {2, 3}, values)});
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    auto ints = [](const HostTensor& t) {
      std::vector<int64_t> r;
      for (int64_t i = 0; i < t.numel(); ++i) r.push_back(int64_t(element(t, i)));
      return r;
    };
    SCOPED_TRACE(lowered ? "lowered" : "reference");
    EXPECT_EQ(ints((*out)[0]), (std::vector<int64_t>{1, 3, 4, 1, 2, 4}));
    EXPECT_EQ(ints((*out)[1]), (std::vector<int64_t>{2, 3, 5, 1, 3, 4}));
    EXPECT_EQ((*out)[2].dtype, ScalarType::kInt);
    EXPECT_EQ(ints((*out)[2]), (std::vector<int64_t>{1, 3, 4, 1, 3, 4}));
    EXPECT_EQ(ints((*out)[3]), (std::vector<int64_t>{1, 3, 4, 1, 3, 4}));
  }
}

// ---- item 12: adaptive_avg_pool2d ----

Graph adaptive(std::vector<SymInt> in, int64_t oh, int64_t ow) {
  Graph g;
  auto x = g.add_input("x", f32(std::move(in)));
  auto y = g.add(OpId::AdaptiveAvgPool2d, {x, IntList{oh, ow}}, "pool");
  EXPECT_TRUE(y.is_ok()) << y.status().message();
  g.set_outputs({*y});
  return g;
}

TEST(DecompositionRules, AdaptivePoolNonDivisibleWindows) {
  for (int64_t s : {7, 13}) {
    for (int64_t o : {2, 3, 6}) {
      SCOPED_TRACE(::testing::Message() << s << "x" << s << " -> " << o << "x" << o);
      check_rules(adaptive({2, 3, s, s}, o, o),
                  {{{"adaptive_avg_pool2d_to_windows", 1}}, s == 7 && o == 3 ? "adaptive_avg_pool2d_7_to_3" : ""});
    }
  }
}

TEST(DecompositionRules, AdaptivePoolDivisibleBecomesAvgPoolThenConv) {
  // Two rules in sequence: the avg_pool2d the first emits is lowered by the second.
  check_rules(adaptive({1, 2, 6, 9}, 3, 3),
              {{{"adaptive_avg_pool2d_to_avg_pool2d", 1}, {"avg_pool2d_to_depthwise_conv", 1}}, "adaptive_avg_pool2d_divisible"});
  // Negative: a non-divisible width keeps the divisible rule from firing.
  check_rules(adaptive({1, 2, 6, 7}, 3, 3), {{{"adaptive_avg_pool2d_to_windows", 1}}, ""});
}

TEST(DecompositionRules, AdaptivePoolWithSymbolicSizeIsLeftAlone) {
  Graph g;
  SymInt h = g.add_dim("h", 2, 16);
  auto x = g.add_input("x", f32({1, 2, h, 8}));
  g.set_outputs({*g.add(OpId::AdaptiveAvgPool2d, {x, IntList{2, 2}}, "pool")});
  auto counts = rewrite_to_fixed_point(g, decomposition_rules(Backend::kPortable));
  ASSERT_TRUE(counts.is_ok());
  EXPECT_TRUE(counts->empty());
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0].op, OpId::AdaptiveAvgPool2d);
}

TEST(DecompositionRules, AdaptivePoolWindowsByHand) {
  // 5 -> 3 cells on one row: windows [0, 2), [1, 4), [3, 5) of 0..4 -> means 0.5, 2, 3.5.
  for (bool lowered : {false, true}) {
    Graph g = adaptive({1, 1, 1, 5}, 1, 3);
    if (lowered) {
      ASSERT_TRUE(rewrite_to_fixed_point(g, decomposition_rules(Backend::kPortable)).is_ok());
    }
    auto out = interpret(g, {HostTensor::from<float>(ScalarType::kFloat, {1, 1, 1, 5}, {0, 1, 2, 3, 4})});
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    EXPECT_EQ(std::vector<float>((*out)[0].data<float>(), (*out)[0].data<float>() + 3), (std::vector<float>{0.5f, 2.0f, 3.5f}));
  }
}

// ---- item 13: cummax / cummin ----

TEST(DecompositionRules, CummaxAndCumminOnFloats) {
  Graph g;
  auto x = g.add_input("x", f32({3, 6, 2}));
  auto mx = g.add_node(OpId::Cummax, {x, int64_t{1}}, "cmax");
  auto mn = g.add_node(OpId::Cummin, {x, int64_t{-2}}, "cmin");
  ASSERT_TRUE(mx.is_ok() && mn.is_ok());
  g.set_outputs({(*mx)[0], (*mx)[1], (*mn)[0], (*mn)[1]});
  check_rules(g, {{{"cummax_to_masked_amax", 1}, {"cummin_to_masked_amin", 1}}, "cummax_cummin_f32"});
}

TEST(DecompositionRules, CummaxAndCumminKeepInfinities) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  Graph g;
  auto x = g.add_input("x", f32({5}));
  auto mx = *g.add_node(OpId::Cummax, {x, int64_t{0}}, "cmax");
  auto mn = *g.add_node(OpId::Cummin, {x, int64_t{0}}, "cmin");
  g.set_outputs({mx[0], mx[1], mn[0], mn[1]});
  Graph lowered = g;
  ASSERT_TRUE(rewrite_to_fixed_point(lowered, decomposition_rules(Backend::kPortable)).is_ok());
  const auto in = HostTensor::from<float>(ScalarType::kFloat, {5}, {-kInf, -kInf, 1, kInf, 2});
  auto want = interpret(g, {in});
  auto got = interpret(lowered, {in});
  ASSERT_TRUE(want.is_ok() && got.is_ok());
  for (size_t i = 0; i < 4; ++i) expect_same((*want)[i], (*got)[i], 0, "output " + std::to_string(i));
  EXPECT_EQ((*got)[0].data<float>()[0], -kInf);  // not finfo.min
  EXPECT_EQ((*got)[2].data<float>()[4], -kInf);
}

TEST(DecompositionRules, CummaxOnIntsWithTiesTakesTheLastIndex) {
  Graph g;
  auto x = g.add_input("x", TensorType{ScalarType::kLong, {4, 9}, {}});  // values in [0, 4): many ties
  auto mx = g.add_node(OpId::Cummax, {x, int64_t{-1}}, "cmax");
  auto mn = g.add_node(OpId::Cummin, {x, int64_t{0}}, "cmin");
  ASSERT_TRUE(mx.is_ok() && mn.is_ok());
  g.set_outputs({(*mx)[0], (*mx)[1], (*mn)[0], (*mn)[1]});
  check_rules(g, {{{"cummax_to_masked_amax", 1}, {"cummin_to_masked_amin", 1}}, ""});
  // The interpreter's scan itself: [1, 3, 3, 0] -> values [1, 3, 3, 3], indices [0, 1, 2, 2].
  Graph h;
  auto y = h.add_input("y", TensorType{ScalarType::kLong, {4}, {}});
  output_all(h, h.add_node(OpId::Cummax, {y, int64_t{0}}, "c"));
  auto out = interpret(h, {HostTensor::from<int64_t>(ScalarType::kLong, {4}, {1, 3, 3, 0})});
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(std::vector<int64_t>((*out)[1].data<int64_t>(), (*out)[1].data<int64_t>() + 4), (std::vector<int64_t>{0, 1, 2, 2}));
}

// ---- item 14: bernoulli ----

double mean_of(const HostTensor& t) {
  double s = 0;
  for (int64_t i = 0; i < t.numel(); ++i) s += t.data<float>()[i];
  return s / double(t.numel());
}

TEST(DecompositionRules, BernoulliDrawsWithProbabilityP) {
  for (double p : {0.0, 0.3, 1.0}) {
    Graph g;
    auto x = g.add_input("x", f32({100, 200}));
    g.set_outputs({*g.add(OpId::BernoulliP, {x, p}, "coin")});
    Graph before = g;
    auto counts = rewrite_to_fixed_point(g, decomposition_rules(Backend::kPortable));
    ASSERT_TRUE(counts.is_ok());
    EXPECT_EQ(*counts, (RuleCounts{{"bernoulli_to_rand_lt", 1}}));
    auto inputs = random_inputs(before, {}, 3);
    for (const Graph* which : {&before, &g}) {
      auto out = interpret(*which, inputs);
      ASSERT_TRUE(out.is_ok()) << out.status().message();
      for (int64_t i = 0; i < (*out)[0].numel(); ++i) {
        float v = (*out)[0].data<float>()[i];
        ASSERT_TRUE(v == 0.0f || v == 1.0f) << v;
      }
      // 20000 draws: the standard error is <= 0.0035, so 0.02 is > 5 sigma.
      EXPECT_NEAR(mean_of((*out)[0]), p, 0.02) << "p=" << p;
    }
    if (p == 0.3) expect_golden("bernoulli_to_rand_lt", g.to_string());
  }
}

TEST(DecompositionRules, BernoulliOfAProbabilityTensor) {
  Graph g;
  auto x = g.add_input("x", f32({64, 64}));
  g.set_outputs({*g.add(OpId::Bernoulli, {x}, "coin")});
  Graph before = g;
  ASSERT_TRUE(rewrite_to_fixed_point(g, decomposition_rules(Backend::kPortable)).is_ok());
  // Probabilities of exactly 0 and 1 make the draw deterministic: y == x.
  auto inputs = random_inputs(before, {}, 4);
  for (int64_t i = 0; i < inputs[0].numel(); ++i) inputs[0].data<float>()[i] = float(i % 3 == 0);
  for (const Graph* which : {&before, &g}) {
    auto out = interpret(*which, inputs);
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    expect_same(inputs[0], (*out)[0], 0, "bernoulli(x in {0, 1})");
  }
}

// ---- item 17: expand ----

TEST(DecompositionRules, ExpandOfASizeOneDimIsMaterialised) {
  Graph g;
  auto x = g.add_input("x", f32({3, 1}));
  auto e = g.add(OpId::Expand, {x, IntList{2, -1, 4}}, "e");
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  EXPECT_EQ(g.type(*e).str(), "f32[2, 3, 4]");
  g.set_outputs({*e});
  check_rules(g, {{{"expand_to_copy", 1}}, "expand_to_copy"});
}

TEST(DecompositionRules, ExpandWithoutBroadcastIsTheInput) {
  Graph g;
  auto x = g.add_input("x", f32({3, 4}));
  auto e = g.add(OpId::Expand, {x, IntList{3, -1}}, "e");
  g.set_outputs({*g.add(OpId::NegOut, {*e}, "y")});
  // expand_to_copy must not fire: no expand_copy appears.
  check_rules(g, {{{"expand_without_broadcast_is_identity", 1}}, "expand_without_broadcast"});
}

// ---- item 18: reshape / view of strided values ----

TEST(DecompositionRules, ReshapeAfterTransposeClonesContiguousFirst) {
  Graph g;
  auto x = g.add_input("x", f32({2, 3, 4}));
  auto t = g.add(OpId::TransposeInt, {x, int64_t{1}, int64_t{2}}, "t");
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(g.type(*t).str(), "f32[2, 4, 3]{0,2,1}");  // a strided view of x
  auto r = g.add(OpId::Reshape, {*t, IntList{2, -1}}, "r");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  g.set_outputs({*r});
  check_rules(g, {{{"permute_view_to_copy", 1}, {"reshape_clones_noncontiguous", 1}}, "reshape_after_transpose"});
}

TEST(DecompositionRules, ViewAfterPermuteAndStridedOutputs) {
  Graph g;
  auto x = g.add_input("x", f32({2, 3, 4, 5}));
  auto p = g.add(OpId::Permute, {x, IntList{0, 2, 3, 1}}, "p");  // NCHW -> NHWC view
  ASSERT_TRUE(p.is_ok());
  auto v = g.add(OpId::View, {*p, IntList{-1, 3}}, "v");
  ASSERT_TRUE(v.is_ok()) << v.status().message();
  g.set_outputs({*v, *p});  // the strided view itself is an output too
  check_rules(g, {{{"permute_view_to_copy", 1}, {"reshape_clones_noncontiguous", 1}}, ""});
}

TEST(DecompositionRules, ReshapeOfContiguousInputNeedsNoClone) {
  Graph g;
  auto x = g.add_input("x", f32({2, 3, 4}));
  g.set_outputs({*g.add(OpId::Reshape, {x, IntList{6, 4}}, "r")});
  check_rules(g, {{{"reshape_to_view_copy", 1}}, "reshape_contiguous"});
}

TEST(DecompositionRules, StridedInputsAreMadeContiguousBeforeKernelsReadThem) {
  Graph g;
  auto x = g.add_input("x", f32({2, 3, 5}));
  auto t = *g.add(OpId::TransposeInt, {x, int64_t{1}, int64_t{2}}, "t");  // f32[2, 5, 3]{0,2,1}
  auto b = tied_boundaries(g);
  std::vector<ValueId> outs;
  auto add = [&](auto r) {
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    if constexpr (std::is_same_v<std::decay_t<decltype(*r)>, ValueId>) outs.push_back(*r);
    else outs.insert(outs.end(), r->begin(), r->end());
  };
  add(g.add_node(OpId::Topk, {t, SymInt(2), int64_t{-1}, true, true}, "topk"));
  add(g.add(OpId::BucketizeTensor, {t, b, false, true}, "bucketize"));
  add(g.add(OpId::SearchsortedTensor, {b, t, true, false}, "searchsorted"));
  add(g.add(OpId::AdaptiveAvgPool2d, {t, IntList{2, 2}}, "adaptive"));
  add(g.add(OpId::AvgPool2d, {t, IntList{2, 2}, IntList{1, 1}, IntList{0, 0}, false, true, None{}}, "pool"));
  add(g.add_node(OpId::Cummax, {t, int64_t{1}}, "cummax"));
  add(g.add_node(OpId::SplitTensor, {t, SymInt(2), int64_t{1}}, "split"));
  add(g.add(OpId::Expand, {t, IntList{2, 2, 5, 3}}, "expand"));
  auto same = g.add(OpId::Expand, {t, IntList{-1, 5, 3}}, "same");
  ASSERT_TRUE(same.is_ok());
  EXPECT_EQ(g.type(*same).str(), "f32[2, 5, 3]{0,2,1}");  // a view keeps the layout
  add(same);
  add(g.add(OpId::Detach, {t}, "detach"));
  g.set_outputs(outs);
  check_rules(g, {{{"permute_view_to_copy", 1}, {"topk_to_argsort_gather", 1}, {"bucketize_to_compare_sum", 1},
                   {"searchsorted_to_compare_sum", 1}, {"adaptive_avg_pool2d_to_windows", 1},
                   {"avg_pool2d_to_depthwise_conv", 1}, {"cummax_to_masked_amax", 1}, {"split_to_narrow", 1},
                   {"expand_to_copy", 1}, {"expand_without_broadcast_is_identity", 1}, {"detach_to_identity", 1}},
                  ""});
  // After the rewrite only _to_dim_order_copy reads a strided value (what upstream kernels require).
  Graph lowered = g;
  ASSERT_TRUE(rewrite_to_fixed_point(lowered, decomposition_rules(Backend::kPortable)).is_ok());
  for (const auto& n : lowered.nodes()) {
    if (n.op == OpId::ToDimOrderCopyOut) continue;
    for (const auto& a : n.args) {
      if (const auto* v = std::get_if<ValueId>(&a)) {
        EXPECT_TRUE(lowered.type(*v).dim_order.empty()) << n.name << " reads strided %" << lowered.value(*v).name;
      }
    }
  }
}

// ---- item 16: sdpa ----

struct SdpaCase {
  const char* name;
  bool causal = false;
  std::optional<TensorType> mask;
};

TEST(DecompositionRules, SdpaMathFormWithGqaCausalMasksAndDv) {
  // q [2, 4, 5, 8] with 2 kv heads (groups of 2), v has Dv = 3 != D = 8.
  const SdpaCase cases[] = {
      {"sdpa_gqa_causal", true, std::nullopt},
      {"", false, TensorType{ScalarType::kBool, {5, 6}, {}}},
      {"", false, TensorType{ScalarType::kFloat, {1, 4, 5, 6}, {}}},  // per head
      {"sdpa_gqa_float_mask_per_batch", false, TensorType{ScalarType::kFloat, {2, 1, 5, 6}, {}}},
      {"", false, TensorType{ScalarType::kBool, {2, 4, 5, 6}, {}}},  // per batch and head
  };
  for (const auto& c : cases) {
    Graph g;
    auto q = g.add_input("q", f32({2, 4, 5, 8}));
    auto k = g.add_input("k", f32({2, 2, 6, 8}));
    auto v = g.add_input("v", f32({2, 2, 6, 3}));
    graph::Arg mask = None{};
    ValueId keep_diag = -1;
    if (c.mask) {
      mask = g.add_input("mask", *c.mask);
      if (c.mask->dtype == ScalarType::kBool) {
        // Keep column 0 always so no row is fully masked (that would be NaN on both sides).
        std::vector<uint8_t> col0(6, 0);
        col0[0] = 1;
        keep_diag = g.add_constant("col0", graph::ConstantData::from_bytes(ScalarType::kBool, {6}, col0, "column 0"));
      }
    }
    if (keep_diag >= 0) {
      auto any = g.add(OpId::WhereSelfOut, {keep_diag, keep_diag, std::get<ValueId>(mask)}, "mask_or_col0");
      ASSERT_TRUE(any.is_ok()) << any.status().message();
      mask = *any;
    }
    auto o = g.add(OpId::ScaledDotProductAttention, {q, k, v, mask, 0.0, c.causal, None{}, true}, "attn");
    ASSERT_TRUE(o.is_ok()) << o.status().message();
    EXPECT_EQ(g.type(*o).str(), "f32[2, 4, 5, 3]");
    g.set_outputs({*o});
    SCOPED_TRACE(::testing::Message() << "causal=" << c.causal << " mask=" << (c.mask ? c.mask->str() : "none"));
    check_rules(g, {{{"sdpa_to_math", 1}}, c.name, {}, 1e-5});
  }
}

TEST(DecompositionRules, SdpaOnTransposedInputsClonesThemContiguous) {
  // [B, S, H, D] projections viewed as [B, H, S, D] (the usual transpose(1, 2)).
  Graph g;
  auto q = g.add_input("q", f32({1, 5, 4, 8}));
  auto k = g.add_input("k", f32({1, 5, 2, 8}));
  auto qt = *g.add(OpId::TransposeInt, {q, int64_t{1}, int64_t{2}}, "qt");
  auto kt = *g.add(OpId::TransposeInt, {k, int64_t{1}, int64_t{2}}, "kt");
  auto o = g.add(OpId::ScaledDotProductAttention, {qt, kt, kt, None{}, 0.0, true, 0.5, true}, "attn");
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  g.set_outputs({*o});
  check_rules(g, {{{"permute_view_to_copy", 2}, {"sdpa_to_math", 1}}, "sdpa_transposed_inputs"});
}

TEST(DecompositionRules, SdpaCausalWithSymbolicLengthIsANamedError) {
  Graph g;
  SymInt s = g.add_dim("seq", 1, 8);
  auto q = g.add_input("q", f32({1, 2, s, 4}));
  auto o = g.add(OpId::ScaledDotProductAttention, {q, q, q, None{}, 0.0, true}, "attn");
  g.set_outputs({*o});
  auto counts = rewrite_to_fixed_point(g, decomposition_rules(Backend::kPortable));
  ASSERT_FALSE(counts.is_ok());
  EXPECT_NE(counts.status().message().find("is_causal"), std::string::npos) << counts.status().message();
}

// ---- symbolic sizes (the LLM case) ----

TEST(DecompositionRules, RulesKeepSymbolicSizes) {
  Graph g;
  SymInt seq = g.add_dim("seq", 1, 16);
  auto x = g.add_input("x", f32({seq, 4, 3}));
  auto bucket = *g.add(OpId::BucketizeTensor, {x, tied_boundaries(g), false, true}, "bucket");
  auto top = *g.add_node(OpId::Topk, {x, SymInt(2), int64_t{-1}, false, true}, "topk");
  auto cm = *g.add_node(OpId::Cummin, {x, int64_t{1}}, "cummin");
  auto parts = *g.add_node(OpId::SplitWithSizes, {x, IntList{1, 3}, int64_t{1}}, "split");
  auto t = *g.add(OpId::TransposeInt, {x, int64_t{0}, int64_t{2}}, "t");
  auto flat = *g.add(OpId::Reshape, {t, IntList{3, -1}}, "flat");
  auto wide = *g.add(OpId::Expand, {*g.add(OpId::View, {x, IntList{seq, 1, 12}}, "v"), IntList{-1, 2, -1}}, "wide");
  EXPECT_EQ(g.type(flat).str(), "f32[3, (seq * 4)]");
  g.set_outputs({bucket, top[0], top[1], cm[0], cm[1], parts[0], parts[1], flat, wide});
  for (int64_t n : {1, 5, 16}) {
    SCOPED_TRACE(::testing::Message() << "seq=" << n);
    check_rules(g, {{{"bucketize_to_compare_sum", 1},
                     {"topk_to_argsort_gather", 1},
                     {"cummin_to_masked_amin", 1},
                     {"split_to_narrow", 1},
                     {"permute_view_to_copy", 1},
                     {"reshape_clones_noncontiguous", 1},
                     {"reshape_to_view_copy", 1},
                     {"expand_to_copy", 1}},
                    n == 5 ? "symbolic_sizes" : "", {{"seq", n}}});
  }
}

// Every rule alone on a graph holding one or two of every source op: it fires
// exactly on its own matches and leaves every other node alone.
TEST(DecompositionRules, EachRuleFiresOnlyOnItsOwnMatches) {
  Graph g;
  auto x = g.add_input("x", f32({1, 2, 6, 6}));
  auto q = g.add_input("q", f32({1, 2, 3, 4}));
  auto b = tied_boundaries(g);
  std::vector<ValueId> outs;
  auto keep = [&](Result<std::vector<ValueId>> r) {
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    outs.insert(outs.end(), r->begin(), r->end());
  };
  auto keep1 = [&](Result<ValueId> r) {
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    outs.push_back(*r);
  };
  keep(g.add_node(OpId::SplitTensor, {x, SymInt(4), int64_t{3}}, "split"));
  keep(g.add_node(OpId::SplitWithSizes, {x, IntList{1, 1}, int64_t{1}}, "split_sizes"));
  keep(g.add_node(OpId::Chunk, {x, int64_t{2}, int64_t{2}}, "chunk"));
  keep(g.add_node(OpId::Topk, {x, SymInt(2), int64_t{-1}, true, true}, "topk"));
  keep1(g.add(OpId::Detach, {x}, "detach"));
  keep1(g.add(OpId::ToCopy, {x, ScalarType::kBFloat16}, "cast"));
  keep1(g.add(OpId::ToCopy, {x, ScalarType::kFloat}, "same_dtype_cast"));
  keep1(g.add(OpId::AvgPool2d, {x, IntList{2, 2}, IntList{2, 2}, IntList{0, 0}, false, true, None{}}, "pool"));
  keep1(g.add(OpId::AdaptiveAvgPool2d, {x, IntList{3, 3}}, "adaptive_even"));
  keep1(g.add(OpId::AdaptiveAvgPool2d, {x, IntList{4, 4}}, "adaptive_odd"));
  keep1(g.add(OpId::BucketizeTensor, {x, b, false, false}, "bucketize"));
  keep1(g.add(OpId::SearchsortedTensor, {b, x, false, true}, "searchsorted"));
  keep(g.add_node(OpId::Cummax, {x, int64_t{3}}, "cummax"));
  keep(g.add_node(OpId::Cummin, {x, int64_t{3}}, "cummin"));
  keep1(g.add(OpId::Bernoulli, {x}, "bernoulli"));
  keep1(g.add(OpId::BernoulliP, {x, 0.25}, "bernoulli_p"));
  keep1(g.add(OpId::Expand, {x, IntList{3, 2, 6, 6}}, "expand_broadcast"));
  keep1(g.add(OpId::Expand, {x, IntList{1, -1, 6, 6}}, "expand_same"));
  auto t = *g.add(OpId::TransposeInt, {x, int64_t{2}, int64_t{3}}, "transpose");
  auto p = *g.add(OpId::Permute, {x, IntList{0, 1, 3, 2}}, "permute");
  keep1(g.add(OpId::Reshape, {t, IntList{2, 36}}, "reshape_strided"));
  keep1(g.add(OpId::View, {p, IntList{2, 36}}, "view_strided"));
  keep1(g.add(OpId::Reshape, {x, IntList{2, 36}}, "reshape_contiguous"));
  keep1(g.add(OpId::ScaledDotProductAttention, {q, q, q, None{}, 0.0, true}, "sdpa"));
  g.set_outputs(outs);
  const std::map<std::string, int> expected = {
      {"split_to_narrow", 2}, {"chunk_to_narrow", 1}, {"topk_to_argsort_gather", 1}, {"detach_to_identity", 1},
      {"avg_pool2d_to_depthwise_conv", 1}, {"adaptive_avg_pool2d_to_avg_pool2d", 1}, {"adaptive_avg_pool2d_to_windows", 2},
      {"bucketize_to_compare_sum", 1}, {"searchsorted_to_compare_sum", 1}, {"cummax_to_masked_amax", 1},
      {"cummin_to_masked_amin", 1}, {"bernoulli_to_rand_lt", 2}, {"expand_to_copy", 1},
      {"expand_without_broadcast_is_identity", 1}, {"reshape_clones_noncontiguous", 2}, {"reshape_to_view_copy", 1},
      {"permute_view_to_copy", 2}, {"sdpa_to_math", 1}, {"linear_to_mm", 0}, {"rms_norm_to_primitives", 0},
      {"silu_to_sigmoid_mul", 0}, {"to_copy_to_dim_order_copy", 2}};
  // (_to_windows alone also takes the divisible pool: it is correct for any size, the
  // divisible rule only comes first.)
  for (const auto& rule : decomposition_rules(Backend::kCuda)) {
    Graph one = g;
    auto counts = rewrite_to_fixed_point(one, {rule});
    ASSERT_TRUE(counts.is_ok()) << rule.name << ": " << counts.status().message();
    ASSERT_TRUE(expected.count(rule.name)) << "no expectation for " << rule.name;
    const int want = expected.at(rule.name);
    EXPECT_EQ(counts->count(rule.name) ? counts->at(rule.name) : 0, want) << rule.name;
    EXPECT_LE(counts->size(), 1u) << rule.name;
  }
  // All together: every graph op is lowered.
  auto counts = rewrite_to_fixed_point(g, decomposition_rules(Backend::kPortable));
  ASSERT_TRUE(counts.is_ok()) << counts.status().message();
  for (const auto& n : g.nodes()) EXPECT_TRUE(op_info(n.op).has_kernel) << n.name;
  EXPECT_EQ(counts->at("adaptive_avg_pool2d_to_windows"), 1);
  EXPECT_EQ(counts->at("avg_pool2d_to_depthwise_conv"), 2);  // the explicit one and the adaptive one
}

TEST(DecompositionRules, DriverReportsRulesThatNeverSettle) {
  // neg -> neg(neg(neg)) fires on its own output forever: an error naming the rule.
  Graph g;
  auto x = g.add_input("x", f32({2}));
  g.set_outputs({*g.add(OpId::NegOut, {x}, "n")});
  std::vector<Rule> loop{{"neg_forever", [](Graph& gg, const graph::Node& n) -> Result<std::optional<std::vector<ValueId>>> {
                            if (n.op != OpId::NegOut) return std::optional<std::vector<ValueId>>{};
                            HF2PTE_ASSIGN_OR_RETURN(ValueId a, gg.add(OpId::NegOut, {n.args[0]}, n.name));
                            return std::optional<std::vector<ValueId>>{std::vector<ValueId>{a}};
                          }}};
  auto counts = rewrite_to_fixed_point(g, loop, 4);
  ASSERT_FALSE(counts.is_ok());
  EXPECT_NE(counts.status().message().find("fixed point in 4 passes (neg_forever)"), std::string::npos) << counts.status().message();
}

// ---- rule sets ----

TEST(DecompositionRules, SetsFollowTheSeedAndTheKernelTable) {
  auto names = [](Backend b) {
    std::vector<std::string> out;
    for (const auto& s : decomposition_rule_sets(b)) out.push_back(s.name);
    return out;
  };
  EXPECT_EQ(names(Backend::kCuda), (std::vector<std::string>{"fused", "all", "cuda-only"}));
  // hf2pte has no kernel row for the cuda-only sources, so every backend needs them.
  EXPECT_EQ(names(Backend::kPortable), (std::vector<std::string>{"fused", "all", "cuda-only"}));
  EXPECT_EQ(names(Backend::kXnnpack), (std::vector<std::string>{"fused", "all", "cuda-only"}));
  // Every rule name is unique, and a graph of kernel ops only fires nothing.
  std::set<std::string> seen;
  for (const auto& r : decomposition_rules(Backend::kCuda)) EXPECT_TRUE(seen.insert(r.name).second) << r.name;
  Graph g;
  auto x = g.add_input("x", f32({2, 3}));
  auto s = g.add(OpId::SliceCopyTensorOut, {x, int64_t{1}, SymInt(0), SymInt(2), int64_t{1}}, "narrow");
  g.set_outputs({*g.add(OpId::ExpandCopyOut, {*s, IntList{4, 2, 2}}, "e")});
  auto counts = rewrite_to_fixed_point(g, decomposition_rules(Backend::kCuda));
  ASSERT_TRUE(counts.is_ok());
  EXPECT_TRUE(counts->empty());
}

}  // namespace
}  // namespace hf2pte::exp

namespace hf2pte::exp {
namespace {

// ---- end to end: the lowered ops emit, load and run in our runtime ----

TEST(DecompositionRules, LoweredProgramRunsInTheRuntime) {
  graph::Program p;
  p.methods.emplace_back("forward");
  Graph& g = p.methods[0];
  auto x = g.add_input("x", f32({1, 2, 7, 7}));
  auto pooled = *g.add(OpId::AdaptiveAvgPool2d, {x, IntList{3, 3}}, "adaptive");          // windows
  auto even = *g.add(OpId::AdaptiveAvgPool2d, {x, IntList{7, 1}}, "even");                // -> avg_pool2d -> conv
  auto parts = *g.add_node(OpId::Chunk, {pooled, int64_t{2}, int64_t{-1}}, "chunk");      // narrows
  auto top = *g.add_node(OpId::Topk, {x, SymInt(2), int64_t{-1}, true, true}, "topk");    // argsort + gather
  auto cm = *g.add_node(OpId::Cummax, {x, int64_t{2}}, "cummax");                          // masked amax
  auto t = *g.add(OpId::TransposeInt, {*g.add(OpId::Detach, {x}, "d"), int64_t{2}, int64_t{3}}, "t");
  auto flat = *g.add(OpId::Reshape, {t, IntList{2, -1}}, "flat");                          // clone + view
  auto big = *g.add(OpId::Expand, {*g.add(OpId::View, {even, IntList{2, 7, 1}}, "ev"), IntList{2, 7, 3}}, "big");
  auto bucket = *g.add(OpId::BucketizeTensor, {x, f32_constant(g, "edges", {3}, {-0.5f, 0.0f, 0.5f}), true, false}, "bucket");
  // p = 1 and p = 0 make bernoulli deterministic, so rand.out is emitted and run too.
  auto ones = *g.add(OpId::BernoulliP, {x, 1.0}, "ones");
  auto zeros = *g.add(OpId::BernoulliP, {x, 0.0}, "zeros");
  g.set_outputs({parts[0], parts[1], top[0], top[1], cm[0], cm[1], flat, big, bucket, ones, zeros});
  // A second method with a symbolic dim: sizes become sym_size + prim ops at runtime.
  p.methods.emplace_back("symbolic");
  Graph& h = p.methods[1];
  SymInt seq = h.add_dim("seq", 1, 16);
  auto y = h.add_input("y", f32({seq, 4, 3}));
  auto ht = *h.add_node(OpId::Topk, {y, SymInt(2), int64_t{-1}, false, true}, "topk");
  auto hc = *h.add_node(OpId::Cummax, {y, int64_t{1}}, "cummax");
  auto hf = *h.add(OpId::Reshape, {*h.add(OpId::TransposeInt, {y, int64_t{0}, int64_t{2}}, "t"), IntList{3, -1}}, "flat");
  auto hw = *h.add(OpId::Expand, {*h.add(OpId::View, {y, IntList{seq, 1, 12}}, "v"), IntList{-1, 2, -1}}, "wide");
  auto hb = *h.add(OpId::SearchsortedTensor, {f32_constant(h, "edges", {3}, {-0.5f, 0.0f, 0.5f}), y, false, true}, "ss");
  h.set_outputs({ht[0], ht[1], hc[0], hc[1], hf, hw, hb});
  const graph::Program unlowered = p;

  ExportConfig config;
  config.backend = Backend::kPortable;
  StageLog log;
  auto contents = run_pipeline(p, config, log);
  ASSERT_TRUE(contents.is_ok()) << contents.status().message();
  bool logged = false;
  for (const auto& note : log.notes) logged |= note.find("topk_to_argsort_gather x1 [cuda-only]") != std::string::npos;
  EXPECT_TRUE(logged) << ::testing::PrintToString(log.notes);
  const auto path = std::filesystem::temp_directory_path() / "hf2pte_decomposition_rules_test.pte";
  ASSERT_TRUE(pte::write_pte(path.string(), std::move(*contents)).is_ok());
  auto v = validate_export(unlowered, path.string());
  std::filesystem::remove(path);
  ASSERT_TRUE(v.is_ok()) << v.status().message();
  EXPECT_TRUE(v->ok) << v->message << "\n" << v->report.dump(2);
  EXPECT_EQ(v->report["forward"]["outputs"].size(), 11u) << v->report.dump(2);
  EXPECT_EQ(v->report["symbolic"]["outputs"].size(), 7u) << v->report.dump(2);
}

}  // namespace
}  // namespace hf2pte::exp
