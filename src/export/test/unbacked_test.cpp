// Data-dependent ("unbacked") sizes end to end (issue #3 item 2): aten::nonzero
// creates a fresh unbacked SymInt bounded by numel(self); the planner plans its
// out at the bound; the reference interpreter and the runtime bind it to the
// actual count, and later ops (a view using the count, index_select, sum) run
// at that size. Every expectation is computed here by plain loops over the
// inputs, never by our kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "export/interpreter.h"
#include "export/memory_plan.h"
#include "export/pipeline.h"
#include "export/stages.h"
#include "export/test/plan_check.h"
#include "graph/shapes.h"
#include "kernels/portable/kernels.h"
#include "pte/pte_writer.h"
#include "runtime/program.h"
#include "backends/xnnpack/runtime/xnnpack_backend.h"

namespace hf2pte::exp {
namespace {

namespace fb = executorch_flatbuffer;
using graph::Graph;
using graph::IntList;
using graph::SymInt;
using graph::TensorType;
using graph::ValueId;

constexpr int64_t kRows = 6, kWidth = 3;

ExportConfig portable() {
  ExportConfig c;
  c.backend = Backend::kPortable;
  c.validate = ExportConfig::Validate::kNever;
  return c;
}

/// forward(x f32[6, 3], mask[6]) -> (nz, rows, total):
///   nz = nonzero(detach(mask))        i64[u, 1]
///   idx = view_copy(nz, [u])          i64[u]     (the count as a runtime Int)
///   rows = index_select(x, 0, idx)    f32[u, 3]
///   total = sum(rows, [0])            f32[3]
/// detach is lowered away, so nonzero's input is rewired before verification.
graph::Program selected_rows_program(ScalarType mask_dtype) {
  graph::Program p;
  p.methods.emplace_back("forward");
  Graph& g = p.methods[0];
  auto x = g.add_input("x", TensorType{ScalarType::kFloat, {kRows, kWidth}, {}});
  auto mask = g.add_input("mask", TensorType{mask_dtype, {kRows}, {}});
  auto m = *g.add(OpId::Detach, {mask}, "mask.detach");
  auto nz = g.add(OpId::NonzeroOut, {m}, "nz");
  EXPECT_TRUE(nz.is_ok()) << nz.status().message();
  const SymInt u = g.type(*nz).sizes[0];
  auto idx = *g.add(OpId::ViewCopyOut, {*nz, IntList{u}}, "idx");
  auto rows = *g.add(OpId::IndexSelectOut, {x, int64_t{0}, idx}, "rows");
  auto total = g.add(OpId::SumIntListOut, {rows, IntList{0}}, "total");
  EXPECT_TRUE(total.is_ok()) << total.status().message();
  g.set_outputs({*nz, rows, *total});
  return p;
}

/// Writes `contents` into a fresh temp dir and loads "forward" with the portable kernels.
struct Loaded {
  std::filesystem::path dir;
  std::shared_ptr<rt::Program> program;
  std::unique_ptr<rt::Method> method;
  ~Loaded() { std::filesystem::remove_all(dir); }
};
std::unique_ptr<Loaded> write_and_load(pte::PteContents contents, const std::string& tag) {
  auto l = std::make_unique<Loaded>();
  l->dir = std::filesystem::temp_directory_path() / ("hf2pte_unbacked_test_" + tag);
  std::filesystem::create_directories(l->dir);
  const std::string path = (l->dir / "m.pte").string();
  auto w = pte::write_pte(path, std::move(contents));
  EXPECT_TRUE(w.is_ok()) << w.status().message();
  auto program = rt::Program::load(path);
  EXPECT_TRUE(program.is_ok()) << program.status().message();
  if (!program.is_ok()) return nullptr;
  l->program = *program;
  auto method = l->program->load_method("forward", portable_registry());
  EXPECT_TRUE(method.is_ok()) << method.status().message();
  if (!method.is_ok()) return nullptr;
  l->method = std::move(*method);
  return l;
}

/// The mask with exactly `k` non-zeros at random rows (f32: random non-zero
/// values, including NaN and -0.0 among the zeros/non-zeros; bool: true).
HostTensor random_mask(ScalarType dtype, int64_t k, std::mt19937& rng) {
  std::vector<int64_t> order(kRows);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  HostTensor t{dtype, {kRows}, {}};
  t.bytes.assign(size_t(kRows) * element_size(dtype), 0);
  for (int64_t i = 0; i < kRows; ++i) {
    const bool on = std::find(order.begin(), order.begin() + k, i) != order.begin() + k;
    if (dtype == ScalarType::kBool) t.bytes[size_t(i)] = on ? 1 : 0;
    if (dtype == ScalarType::kFloat) {
      const float nz = i % 3 == 0 ? std::numeric_limits<float>::quiet_NaN() : float(i) - 7.5f;
      t.data<float>()[i] = on ? nz : (i % 2 ? -0.0f : 0.0f);
    }
  }
  return t;
}

bool is_on(const HostTensor& mask, int64_t i) {
  if (mask.dtype == ScalarType::kBool) return mask.bytes[size_t(i)] != 0;
  const float v = mask.data<float>()[i];
  return std::isnan(v) || v != 0.0f;
}

/// Checks (nz, rows, total) against plain loops over the inputs.
void expect_selected_rows(const std::vector<HostTensor>& outs, const HostTensor& x, const HostTensor& mask,
                          int64_t k, const std::string& where) {
  ASSERT_EQ(outs.size(), 3u) << where;
  std::vector<int64_t> want_nz;
  std::vector<float> want_rows;
  std::vector<double> want_total(kWidth, 0.0);
  for (int64_t i = 0; i < kRows; ++i) {
    if (!is_on(mask, i)) continue;
    want_nz.push_back(i);
    for (int64_t j = 0; j < kWidth; ++j) {
      want_rows.push_back(x.data<float>()[i * kWidth + j]);
      want_total[size_t(j)] += x.data<float>()[i * kWidth + j];
    }
  }
  ASSERT_EQ(int64_t(want_nz.size()), k) << "test bug";
  EXPECT_EQ(outs[0].dtype, ScalarType::kLong) << where;
  EXPECT_EQ(outs[0].sizes, (std::vector<int64_t>{k, 1})) << where;
  ASSERT_EQ(outs[0].bytes.size(), size_t(k) * 8) << where;
  for (int64_t r = 0; r < k; ++r) EXPECT_EQ(outs[0].data<int64_t>()[r], want_nz[size_t(r)]) << where << " row " << r;
  EXPECT_EQ(outs[1].sizes, (std::vector<int64_t>{k, kWidth})) << where;
  ASSERT_EQ(outs[1].bytes.size(), want_rows.size() * 4) << where;
  if (!want_rows.empty()) {  // memcmp of 0 bytes may still not take null pointers
    EXPECT_EQ(0, std::memcmp(outs[1].bytes.data(), want_rows.data(), outs[1].bytes.size())) << where;
  }
  EXPECT_EQ(outs[2].sizes, (std::vector<int64_t>{kWidth})) << where;
  for (int64_t j = 0; j < kWidth; ++j) EXPECT_NEAR(outs[2].data<float>()[j], want_total[size_t(j)], 1e-5) << where;
}

HostTensor random_x(std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  std::vector<float> v(size_t(kRows * kWidth));
  for (auto& e : v) e = d(rng);
  return HostTensor::from(ScalarType::kFloat, {kRows, kWidth}, v);
}

TEST(Nonzero, ShapeFunctionMakesABoundedUnbackedSizeNamedAfterItsOutput) {
  Graph g;
  SymInt s = g.add_dim("seq", 1, 8);
  auto x = g.add_input("x", TensorType{ScalarType::kFloat, {s, 4, 5}, {}});
  auto nz = g.add(OpId::NonzeroOut, {x}, "nz");
  ASSERT_TRUE(nz.is_ok()) << nz.status().message();
  const TensorType t = g.type(*nz);  // a copy: adding nodes moves the values
  EXPECT_EQ(t.dtype, ScalarType::kLong);
  ASSERT_EQ(t.rank(), 2);
  EXPECT_EQ(t.sizes[0].kind(), SymInt::Kind::kUnbacked);
  EXPECT_EQ(t.sizes[0].str(), fmt::format("u{}", *nz));
  EXPECT_EQ(t.sizes[0].upper_bound(g.dims()), 8 * 4 * 5);  // numel(self) at seq's max
  EXPECT_EQ(t.sizes[1].str(), "3");
  // Two nonzero nodes get two symbols; re-inferring a node gives its own again.
  auto nz2 = *g.add(OpId::NonzeroOut, {x}, "nz2");
  EXPECT_FALSE(g.type(nz2).sizes[0] == t.sizes[0]);
  auto again = graph::infer_outputs(g, OpId::NonzeroOut, g.nodes()[0].args, *nz);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(std::get<TensorType>((*again)[0]).str(), t.str());
}

// The whole pipeline, the .pte written to disk, run in the runtime at 0, some
// and all non-zeros (in an order that shrinks and grows the planned outputs),
// and the unlowered graph in the reference interpreter on the same inputs.
TEST(Nonzero, SelectedRowsRunInTheRuntimeAndTheInterpreter) {
  for (ScalarType mask_dtype : {ScalarType::kBool, ScalarType::kFloat}) {
    graph::Program p = selected_rows_program(mask_dtype);
    const graph::Program unlowered = p;
    StageLog log;
    auto contents = run_pipeline(p, portable(), log);
    ASSERT_TRUE(contents.is_ok()) << contents.status().message();
    // The count reaches view_copy as an Int read from nonzero's out at runtime.
    const auto& ep = *contents->program.execution_plan[0];
    std::vector<std::string> ops;
    for (const auto& in : ep.chains[0]->instructions) {
      const auto& op = ep.operators[size_t(in->instr_args.AsKernelCall()->op_index)];
      ops.push_back(op->name + "." + op->overload);
    }
    EXPECT_EQ(ops, (std::vector<std::string>{"aten::nonzero.out", "aten::sym_size.int", "aten::view_copy.out",
                                             "aten::index_select.out", "aten::sum.IntList_out"}));
    auto loaded = write_and_load(std::move(*contents), std::string(scalar_type_name(mask_dtype)));
    ASSERT_NE(loaded, nullptr);
    GraphInterpreter ref(unlowered.methods[0], portable_registry());
    std::mt19937 rng(1234);
    for (int64_t k : {int64_t{2}, kRows, int64_t{0}, int64_t{1}, kRows, int64_t{0}, int64_t{4}}) {
      const HostTensor x = random_x(rng), mask = random_mask(mask_dtype, k, rng);
      const std::string where = std::string(scalar_type_name(mask_dtype)) + " k=" + std::to_string(k);
      ASSERT_TRUE(loaded->method->set_input(0, x).is_ok());
      ASSERT_TRUE(loaded->method->set_input(1, mask).is_ok());
      Status st = loaded->method->execute();
      ASSERT_TRUE(st.is_ok()) << where << ": " << st.message();
      std::vector<HostTensor> outs;
      for (size_t o = 0; o < 3; ++o) {
        auto t = loaded->method->output_tensor(o);
        ASSERT_TRUE(t.is_ok()) << t.status().message();
        outs.push_back(std::move(*t));
      }
      expect_selected_rows(outs, x, mask, k, "runtime " + where);
      auto r = ref.run({x, mask});
      ASSERT_TRUE(r.is_ok()) << where << ": " << r.status().message();
      expect_selected_rows(*r, x, mask, k, "interpreter " + where);
    }
  }
}

// nonzero of a 3-D input of every supported dtype as a program output: the
// coordinates in C order, computed here by three nested loops.
TEST(Nonzero, EveryDtypeThroughThePipeline) {
  const std::vector<int64_t> sizes{2, 3, 4};
  for (ScalarType dt : {ScalarType::kFloat, ScalarType::kInt, ScalarType::kLong, ScalarType::kBool}) {
    graph::Program p;
    p.methods.emplace_back("forward");
    Graph& g = p.methods[0];
    auto x = g.add_input("x", TensorType{dt, {2, 3, 4}, {}});
    auto nz = *g.add(OpId::NonzeroOut, {x}, "nz");
    g.set_outputs({nz});
    const graph::Program unlowered = p;
    StageLog log;
    auto contents = run_pipeline(p, portable(), log);
    ASSERT_TRUE(contents.is_ok()) << contents.status().message();
    auto loaded = write_and_load(std::move(*contents), "dtype" + std::to_string(int(dt)));
    ASSERT_NE(loaded, nullptr);
    GraphInterpreter ref(unlowered.methods[0], portable_registry());
    std::mt19937 rng(uint32_t(int(dt)) * 77u + 1u);
    for (double density : {0.0, 0.3, 1.0}) {
      HostTensor in{dt, sizes, {}};
      in.bytes.assign(24 * element_size(dt), 0);
      std::vector<bool> on(24);
      std::bernoulli_distribution pick(density);
      for (size_t i = 0; i < 24; ++i) {
        on[i] = pick(rng);
        switch (dt) {
          case ScalarType::kFloat:  // NaN counts as non-zero, -0.0 as zero
            in.data<float>()[i] = on[i] ? (i % 5 == 0 ? std::numeric_limits<float>::quiet_NaN() : float(i) + 0.25f)
                                        : (i % 2 ? -0.0f : 0.0f);
            break;
          case ScalarType::kInt: in.data<int32_t>()[i] = on[i] ? -int32_t(i) - 1 : 0; break;
          case ScalarType::kLong: in.data<int64_t>()[i] = on[i] ? (int64_t{1} << 40) + int64_t(i) : 0; break;
          default: in.bytes[i] = on[i] ? 1 : 0; break;
        }
      }
      std::vector<int64_t> want;
      for (int64_t a = 0; a < 2; ++a) {
        for (int64_t b = 0; b < 3; ++b) {
          for (int64_t c = 0; c < 4; ++c) {
            if (on[size_t((a * 3 + b) * 4 + c)]) want.insert(want.end(), {a, b, c});
          }
        }
      }
      const int64_t count = int64_t(want.size()) / 3;
      ASSERT_TRUE(loaded->method->set_input(0, in).is_ok());
      Status st = loaded->method->execute();
      ASSERT_TRUE(st.is_ok()) << st.message();
      auto out = loaded->method->output_tensor(0);
      ASSERT_TRUE(out.is_ok());
      auto r = ref.run({in});
      ASSERT_TRUE(r.is_ok()) << r.status().message();
      for (const HostTensor* t : {&*out, &(*r)[0]}) {
        EXPECT_EQ(t->sizes, (std::vector<int64_t>{count, 3})) << scalar_type_name(dt) << " density " << density;
        ASSERT_EQ(t->bytes.size(), want.size() * 8);
        EXPECT_EQ(0, want.empty() ? 0 : std::memcmp(t->bytes.data(), want.data(), t->bytes.size()))
            << scalar_type_name(dt) << " density " << density;
      }
      EXPECT_EQ(count == 24, density == 1.0);
      EXPECT_EQ(count == 0, density == 0.0);
    }
  }
}

// masked_select(x f32[4, 3], mask bool[4, 1]) -> [u] (whole rows, broadcast),
// then sum over it -> [] : runtime and interpreter against loops over x.
TEST(MaskedSelect, BroadcastRowsThroughThePipeline) {
  graph::Program p;
  p.methods.emplace_back("forward");
  Graph& g = p.methods[0];
  auto x = g.add_input("x", TensorType{ScalarType::kFloat, {4, 3}, {}});
  auto mask = g.add_input("mask", TensorType{ScalarType::kBool, {4, 1}, {}});
  auto sel = g.add(OpId::MaskedSelectOut, {x, mask}, "sel");
  ASSERT_TRUE(sel.is_ok()) << sel.status().message();
  EXPECT_EQ(g.type(*sel).str(), fmt::format("f32[u{}]", *sel));
  EXPECT_EQ(g.type(*sel).planning_bounds(g.dims()), (std::vector<int64_t>{12}));
  auto total = *g.add(OpId::SumIntListOut, {*sel, IntList{0}}, "total");
  g.set_outputs({*sel, total});
  const graph::Program unlowered = p;
  StageLog log;
  auto contents = run_pipeline(p, portable(), log);
  ASSERT_TRUE(contents.is_ok()) << contents.status().message();
  auto loaded = write_and_load(std::move(*contents), "masked_select");
  ASSERT_NE(loaded, nullptr);
  GraphInterpreter ref(unlowered.methods[0], portable_registry());
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (uint32_t bits : {0b0000u, 0b0101u, 0b1111u, 0b1000u}) {
    std::vector<float> xv(12);
    for (auto& v : xv) v = d(rng);
    HostTensor xt = HostTensor::from(ScalarType::kFloat, {4, 3}, xv);
    HostTensor mt{ScalarType::kBool, {4, 1}, std::vector<uint8_t>(4)};
    std::vector<float> want;
    double want_total = 0;
    for (int64_t i = 0; i < 4; ++i) {
      mt.bytes[size_t(i)] = (bits >> i) & 1u;
      if (!mt.bytes[size_t(i)]) continue;
      for (int64_t j = 0; j < 3; ++j) want.push_back(xv[size_t(i * 3 + j)]), want_total += xv[size_t(i * 3 + j)];
    }
    ASSERT_TRUE(loaded->method->set_input(0, xt).is_ok());
    ASSERT_TRUE(loaded->method->set_input(1, mt).is_ok());
    Status st = loaded->method->execute();
    ASSERT_TRUE(st.is_ok()) << st.message();
    auto a = loaded->method->output_tensor(0), b = loaded->method->output_tensor(1);
    ASSERT_TRUE(a.is_ok() && b.is_ok());
    auto r = ref.run({xt, mt});
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    for (const auto& [sel_out, sum_out] : {std::pair{&*a, &*b}, std::pair{&(*r)[0], &(*r)[1]}}) {
      EXPECT_EQ(sel_out->sizes, (std::vector<int64_t>{int64_t(want.size())})) << bits;
      ASSERT_EQ(sel_out->bytes.size(), want.size() * 4);
      EXPECT_EQ(0, want.empty() ? 0 : std::memcmp(sel_out->bytes.data(), want.data(), want.size() * 4)) << bits;
      EXPECT_TRUE(sum_out->sizes.empty());
      EXPECT_NEAR(sum_out->data<float>()[0], want_total, 1e-5) << bits;
    }
  }
}


// The out of nonzero is planned at its bound: numel(self) rows of rank int64s.
TEST(Nonzero, OutIsPlannedAtTheBoundAndNothingOverlaps) {
  Graph g;
  auto x = g.add_input("x", TensorType{ScalarType::kFloat, {4, 5, 6}, {}});
  auto nz = *g.add(OpId::NonzeroOut, {x}, "nz");
  g.set_outputs({nz});
  auto plan = plan_memory(g, ExportConfig{});
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  EXPECT_EQ(plan->sum_of_sizes, 4u * 5 * 6 * 4 + 4u * 5 * 6 * 3 * 8);  // x + out at [120, 3] i64
  EXPECT_EQ(g.type(nz).planning_bounds(g.dims()), (std::vector<int64_t>{120, 3}));

  graph::Program p = selected_rows_program(ScalarType::kBool);
  StageLog log;
  auto contents = run_pipeline(p, portable(), log);
  ASSERT_TRUE(contents.is_ok()) << contents.status().message();
  const auto& ep = *contents->program.execution_plan[0];
  const auto& nz_call = *ep.chains[0]->instructions[0]->instr_args.AsKernelCall();
  const auto* out = ep.values[size_t(nz_call.args[1])]->val.AsTensor();
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->sizes, (std::vector<int32_t>{kRows, 1}));  // 6 rows x rank 1 x 8 bytes
  EXPECT_EQ(out->shape_dynamism, fb::TensorShapeDynamism::DYNAMIC_BOUND);
  expect_no_live_overlap(ep);
}

// Item 5: without a bound (an unbounded dim in numel) the verifier rejects
// the size with its existing message; bounded, the same graph verifies.
TEST(Nonzero, VerifierNeedsABound) {
  for (bool bounded : {true, false}) {
    graph::Program p;
    p.methods.emplace_back("forward");
    Graph& g = p.methods[0];
    SymInt s = g.add_dim("seq", 1, bounded ? 16 : graph::DimRange::kUnbounded);
    auto x = g.add_input("x", TensorType{ScalarType::kFloat, {s}, {}});
    auto nz = *g.add(OpId::NonzeroOut, {x}, "layers.0.nz");
    g.set_outputs({nz});
    ExportConfig c = portable();
    StageLog log;
    Status st = verify_program(p, c, log);
    if (bounded) {
      EXPECT_TRUE(st.is_ok()) << st.message();
    } else {
      ASSERT_FALSE(st.is_ok());
      for (const char* part : {"data-dependent size u", "no declared upper bound", "node layers.0.nz",
                               "op aten::nonzero.out", "layer layers.0,"}) {
        EXPECT_NE(st.message().find(part), std::string::npos) << part << " missing in: " << st.message();
      }
    }
  }
}

/// The emitted program with nonzero's out rewritten by `edit` (a hostile file).
pte::PteContents hostile(const std::function<void(fb::TensorT&)>& edit) {
  graph::Program p = selected_rows_program(ScalarType::kBool);
  StageLog log;
  auto contents = run_pipeline(p, portable(), log);
  EXPECT_TRUE(contents.is_ok()) << contents.status().message();
  auto& ep = *contents->program.execution_plan[0];
  const auto& nz_call = *ep.chains[0]->instructions[0]->instr_args.AsKernelCall();
  edit(*ep.values[size_t(nz_call.args[1])]->val.AsTensor());
  return std::move(*contents);
}

// A file claiming a nonzero out smaller than the data needs: an error naming
// the op, never a write past the planned bytes; counts that fit still run.
TEST(Nonzero, HostileOutTooSmallIsAnError) {
  auto loaded = write_and_load(hostile([](fb::TensorT& t) { t.sizes = {2, 1}; }), "hostile_small");
  ASSERT_NE(loaded, nullptr);
  std::mt19937 rng(7);
  for (int64_t k : {int64_t{3}, int64_t{2}, kRows, int64_t{0}}) {
    const HostTensor x = random_x(rng), mask = random_mask(ScalarType::kBool, k, rng);
    ASSERT_TRUE(loaded->method->set_input(0, x).is_ok());
    ASSERT_TRUE(loaded->method->set_input(1, mask).is_ok());
    Status st = loaded->method->execute();
    if (k > 2) {
      ASSERT_FALSE(st.is_ok()) << "k=" << k;
      EXPECT_NE(st.message().find("aten::nonzero.out: out"), std::string::npos) << st.message();
      EXPECT_NE(st.message().find("planned capacity"), std::string::npos) << st.message();
    } else {
      ASSERT_TRUE(st.is_ok()) << "k=" << k << ": " << st.message();
      auto nz = loaded->method->output_tensor(0);
      ASSERT_TRUE(nz.is_ok());
      EXPECT_EQ(nz->sizes, (std::vector<int64_t>{k, 1}));
    }
  }
  // A float out or a static one is refused too.
  auto wrong = write_and_load(hostile([](fb::TensorT& t) { t.scalar_type = fb::ScalarType::FLOAT; }), "hostile_dtype");
  ASSERT_NE(wrong, nullptr);
  std::mt19937 rng2(8);
  ASSERT_TRUE(wrong->method->set_input(0, random_x(rng2)).is_ok());
  ASSERT_TRUE(wrong->method->set_input(1, random_mask(ScalarType::kBool, 3, rng2)).is_ok());
  Status st = wrong->method->execute();
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("out must be i64"), std::string::npos) << st.message();
}

// With the default backend, elementwise consumers of the selected rows are
// delegated to XNNPACK, whose runner reshapes to the inputs' current shapes:
// (rows + rows) * rows at every count, against a loop over x and the mask.
TEST(Nonzero, DelegatedConsumersRunAtTheCount) {
  graph::Program p = selected_rows_program(ScalarType::kBool);
  Graph& g = p.methods[0];
  const std::vector<ValueId> outs = g.outputs();
  auto twice = *g.add(OpId::AddOut, {outs[1], outs[1]}, "twice");
  auto cube = *g.add(OpId::MulOut, {twice, outs[1]}, "cube");
  g.set_outputs({outs[0], cube});
  ExportConfig c;
  c.backend = Backend::kXnnpack;
  StageLog log;
  auto contents = run_pipeline(p, c, log);
  ASSERT_TRUE(contents.is_ok()) << contents.status().message();
  int delegates = 0;
  for (const auto& in : contents->program.execution_plan[0]->chains[0]->instructions) {
    delegates += in->instr_args.AsDelegateCall() != nullptr;
  }
  EXPECT_EQ(delegates, 1);
  ASSERT_TRUE(xnn::register_xnnpack_backend().is_ok());
  auto loaded = write_and_load(std::move(*contents), "xnnpack");
  ASSERT_NE(loaded, nullptr);
  std::mt19937 rng(3);
  for (int64_t k : {int64_t{2}, kRows, int64_t{0}, int64_t{3}}) {
    const HostTensor x = random_x(rng), mask = random_mask(ScalarType::kBool, k, rng);
    ASSERT_TRUE(loaded->method->set_input(0, x).is_ok());
    ASSERT_TRUE(loaded->method->set_input(1, mask).is_ok());
    Status st = loaded->method->execute();
    ASSERT_TRUE(st.is_ok()) << st.message();
    auto out = loaded->method->output_tensor(1);
    ASSERT_TRUE(out.is_ok());
    ASSERT_EQ(out->sizes, (std::vector<int64_t>{k, kWidth}));
    int64_t r = 0;
    for (int64_t i = 0; i < kRows; ++i) {
      if (!mask.bytes[size_t(i)]) continue;
      for (int64_t j = 0; j < kWidth; ++j) {
        const float v = x.data<float>()[i * kWidth + j];
        EXPECT_FLOAT_EQ(out->data<float>()[r * kWidth + j], 2 * v * v) << "k=" << k;
      }
      ++r;
    }
  }
}

}  // namespace
}  // namespace hf2pte::exp
