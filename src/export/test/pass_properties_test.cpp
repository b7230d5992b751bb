// Properties the seed's ExecuTorch-internals patches guarantee (issue 3, item 6),
// checked on our own passes: empty-tensor pruning in cat, non-finite constants
// through serialization, mutable buffers never constant, constants in the
// order of their placeholders.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "export/exporter.h"
#include "export/interpreter.h"
#include "export/pipeline.h"
#include "export/stages.h"
#include "kernels/portable/kernels.h"
#include "pte/inspect.h"
#include "pte/pte_file.h"
#include "pte/pte_writer.h"
#include "pte/program_generated.h"

namespace hf2pte::exp {
namespace {

namespace efb = executorch_flatbuffer;
using graph::Graph;
using graph::SymInt;
using graph::TensorType;
using graph::ValueId;

TensorType f32(std::vector<SymInt> sizes) { return TensorType{ScalarType::kFloat, std::move(sizes), {}}; }

HostTensor filled(std::vector<int64_t> sizes, float start) {
  HostTensor h;
  h.dtype = ScalarType::kFloat;
  h.sizes = std::move(sizes);
  h.bytes.resize(size_t(h.numel()) * sizeof(float));
  for (int64_t i = 0; i < h.numel(); ++i) h.data<float>()[i] = start + float(i);
  return h;
}

int count_op(const Graph& g, OpId op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node.op == op;
  return n;
}

size_t cat_inputs(const Graph& g) {
  for (const auto& node : g.nodes()) {
    if (node.op == OpId::CatOut) return std::get<graph::TensorList>(node.args[0]).size();
  }
  return 0;
}

Result<std::vector<HostTensor>> interpret(const Graph& g, const std::vector<HostTensor>& inputs) {
  GraphInterpreter interp(g, portable_registry());
  return interp.run(inputs);
}

TEST(PassProperties, CatDropsProvablyEmptyInputsAndKeepsUnknownOnes) {
  graph::Program p;
  p.methods.emplace_back("forward");
  Graph& g = p.methods[0];
  SymInt n = g.add_dim("n", 0, 8);  // may be 0 at runtime, but is not provably 0
  auto a = g.add_input("a", f32({2, 3}));
  auto e = g.add_input("empty", f32({0, 3}));
  auto b = g.add_input("b", f32({n, 3}));
  auto y = *g.add(OpId::CatOut, {graph::TensorList{a, e, b}, int64_t{0}}, "cat");
  g.set_outputs({y});
  const Graph before = g;
  StageLog log;
  ASSERT_TRUE(run_node_fixes(p, ExportConfig{}, log).is_ok());
  EXPECT_EQ(cat_inputs(g), 2u) << g.to_string();  // the empty one is gone, the symbolic one kept
  const std::vector<HostTensor> in = {filled({2, 3}, 0), filled({0, 3}, 0), filled({4, 3}, 100)};
  auto want = interpret(before, in), got = interpret(g, in);
  ASSERT_TRUE(want.is_ok() && got.is_ok());
  EXPECT_EQ((*want)[0].sizes, (*got)[0].sizes);
  EXPECT_EQ((*want)[0].bytes, (*got)[0].bytes);
}

TEST(PassProperties, CatOfOnlyEmptyInputsBecomesAnEmptyConstant) {
  graph::Program p;
  p.methods.emplace_back("forward");
  Graph& g = p.methods[0];
  auto e1 = g.add_input("e1", f32({0, 3}));
  auto e2 = g.add_input("e2", f32({0, 3}));
  auto y = *g.add(OpId::CatOut, {graph::TensorList{e1, e2}, int64_t{0}}, "cat");
  g.set_outputs({y});
  StageLog log;
  ASSERT_TRUE(run_node_fixes(p, ExportConfig{}, log).is_ok());
  EXPECT_EQ(count_op(g, OpId::CatOut), 0) << g.to_string();
  auto got = interpret(g, {filled({0, 3}, 0), filled({0, 3}, 0)});
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_EQ((*got)[0].sizes, (std::vector<int64_t>{0, 3}));
}

TEST(PassProperties, CatWithoutEmptyInputsIsLeftAlone) {
  graph::Program p;
  p.methods.emplace_back("forward");
  Graph& g = p.methods[0];
  auto a = g.add_input("a", f32({2, 3}));
  auto b = g.add_input("b", f32({1, 3}));
  g.set_outputs({*g.add(OpId::CatOut, {graph::TensorList{a, b}, int64_t{0}}, "cat")});
  const std::string before = g.to_string();
  StageLog log;
  ASSERT_TRUE(run_node_fixes(p, ExportConfig{}, log).is_ok());
  EXPECT_EQ(g.to_string(), before);
}

TEST(PassProperties, ProvablyNegativeSymbolicSliceStartBecomesSizePlusStart) {
  // x[-n:] with n in [1, 8] on an 8-row input: the start is provably negative.
  graph::Program p;
  p.methods.emplace_back("forward");
  Graph& g = p.methods[0];
  SymInt n = g.add_dim("n", 1, 8);
  auto x = g.add_input("x", f32({8, 4}));
  auto y = *g.add(OpId::SliceCopyTensorOut, {x, int64_t{0}, SymInt(0) - n, graph::None{}, int64_t{1}}, "tail");
  g.set_outputs({y});
  StageLog log;
  ASSERT_TRUE(run_node_fixes(p, ExportConfig{}, log).is_ok());
  const auto& node = g.nodes().back();
  ASSERT_EQ(node.op, OpId::SliceCopyTensorOut);
  const auto& start = std::get<SymInt>(node.args[2]);
  EXPECT_EQ(start.lower_bound(g.dims()), 0) << start.str();  // 8 - n >= 0
  // The output holds exactly n rows: its size is n wherever n lies in its range.
  for (int64_t v : {1, 3, 8}) {
    EXPECT_EQ(g.type(g.outputs()[0]).sizes[0].evaluate({{"n", v}}), v) << g.to_string();
    EXPECT_EQ(start.evaluate({{"n", v}}), 8 - v);
  }
  // A start that may be non-negative is left alone.
  graph::Program q;
  q.methods.emplace_back("forward");
  Graph& h = q.methods[0];
  SymInt m = h.add_dim("m", 0, 8);
  auto hx = h.add_input("x", f32({8, 4}));
  h.set_outputs({*h.add(OpId::SliceCopyTensorOut, {hx, int64_t{0}, m, graph::None{}, int64_t{1}}, "rest")});
  const std::string before = h.to_string();
  ASSERT_TRUE(run_node_fixes(q, ExportConfig{}, log).is_ok());
  EXPECT_EQ(h.to_string(), before);
}

/// The bytes of constant buffer `idx` of the file's constant segment.
std::vector<uint8_t> constant_bytes(const pte::PteFile& f, uint32_t idx, size_t n) {
  auto b = f.constant_data(idx, n);
  EXPECT_TRUE(b.is_ok()) << b.status().message();
  return b.is_ok() ? std::vector<uint8_t>(b->begin(), b->begin() + ptrdiff_t(n)) : std::vector<uint8_t>{};
}

TEST(PassProperties, NonFiniteConstantsSurviveSerializationBitExactly) {
  // -inf, inf, a quiet NaN with a payload, a signalling-pattern NaN, -0 and a denormal.
  const uint32_t bits[] = {0xff800000u, 0x7f800000u, 0x7fc12345u, 0x7f800001u, 0x80000000u, 0x00000001u};
  std::vector<uint8_t> bytes(sizeof bits);
  std::memcpy(bytes.data(), bits, sizeof bits);
  graph::Program p;
  p.methods.emplace_back("forward");
  Graph& g = p.methods[0];
  auto x = g.add_input("x", f32({6}));
  auto c = g.add_constant("specials", graph::ConstantData::from_bytes(ScalarType::kFloat, {6}, bytes, "specials"));
  g.set_outputs({*g.add(OpId::AddOut, {x, c}, "sum")});
  ExportConfig config;
  config.backend = Backend::kPortable;
  StageLog log;
  auto contents = run_pipeline(p, config, log);
  ASSERT_TRUE(contents.is_ok()) << contents.status().message();
  const auto path = std::filesystem::temp_directory_path() / "hf2pte_pass_properties_nonfinite.pte";
  ASSERT_TRUE(pte::write_pte(path.string(), std::move(*contents)).is_ok());
  auto file = pte::PteFile::open(path.string());
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  int found = 0;
  for (const efb::EValue* v : *(*file)->program().execution_plan()->Get(0)->values()) {
    const efb::Tensor* t = v->val_as_Tensor();
    if (t == nullptr || t->data_buffer_idx() == 0 || t->allocation_info() != nullptr) continue;
    EXPECT_EQ(constant_bytes(**file, t->data_buffer_idx(), bytes.size()), bytes);
    ++found;
  }
  EXPECT_EQ(found, 1);
  std::filesystem::remove(path);
}

TEST(PassProperties, MutableBuffersAreNeverConstantAndConstantsKeepPlaceholderOrder) {
  for (Backend backend : {Backend::kPortable, Backend::kXnnpack}) {
    SCOPED_TRACE(backend_name(backend));
    ExportRequest req;
    req.model_dir = std::string(HF2PTE_SOURCE_DIR) + "/tests/data/fixtures/llama-gqa";
    req.output_path = (std::filesystem::temp_directory_path() / "hf2pte_pass_properties_llama.pte").string();
    req.config.backend = backend;
    auto s = export_model(req);
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    auto file = pte::PteFile::open(req.output_path);
    ASSERT_TRUE(file.is_ok());
    const auto* plan = (*file)->program().execution_plan()->Get(0);
    int caches = 0;
    uint32_t last_constant = 0;
    for (const efb::EValue* v : *plan->values()) {
      const efb::Tensor* t = v->val_as_Tensor();
      if (t == nullptr || t->data_buffer_idx() == 0) continue;
      if (t->allocation_info() != nullptr) {
        ++caches;  // a mutable buffer (KV cache): planned, with its initial data
        continue;
      }
      // Constants are written in the order their placeholders appear (no reordering
      // by size or name), so buffer indices grow along the value table; a repeat
      // (deduplicated bytes) may point back.
      if (t->data_buffer_idx() > last_constant) {
        EXPECT_EQ(t->data_buffer_idx(), last_constant + 1) << "constant buffers skipped or reordered";
        last_constant = t->data_buffer_idx();
      }
    }
    EXPECT_EQ(caches, 4);  // 2 layers x (K, V)
    std::filesystem::remove(req.output_path);
  }
}

// The seed's item 32: no pass may spend time proportional to the printed size
// of symbolic expressions. Ours do not print them at all: equality, hashing and
// the emitter's memo are structural. A whole export with symbolic and
// data-dependent sizes produces no expression text.
TEST(PassProperties, NoPassPrintsSymbolicExpressions) {
  // Control: the counter sees printing, and deep expressions build and compare
  // without it (eager text would print O(depth^2) characters here; the depth
  // stays modest because destroying a tree recurses once per level).
  const uint64_t c0 = SymInt::printed_chars();
  SymInt a = SymInt::dim("seq"), b = SymInt::dim("seq");
  for (int i = 0; i < 300; ++i) a = a * 2 + SymInt::dim("n"), b = b * 2 + SymInt::dim("n");
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a == b + 1);
  EXPECT_EQ(SymInt::printed_chars(), c0);
  EXPECT_EQ(SymInt::dim("seq").str(), "seq");
  EXPECT_EQ(SymInt::printed_chars(), c0 + 3);

  for (Backend backend : {Backend::kPortable, Backend::kXnnpack}) {
    SCOPED_TRACE(backend_name(backend));
    ExportRequest req;
    req.model_dir = std::string(HF2PTE_SOURCE_DIR) + "/tests/data/fixtures/llama-gqa";
    req.output_path = (std::filesystem::temp_directory_path() / "hf2pte_pass_properties_print.pte").string();
    req.config.backend = backend;
    req.config.attention_span = AttentionSpan::kWritten;  // a data-dependent size in every layer
    const uint64_t before = SymInt::printed_chars();
    auto s = export_model(req);
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    EXPECT_EQ(SymInt::printed_chars(), before) << "an export stage printed symbolic expressions";
    std::filesystem::remove(req.output_path);
  }
}

}  // namespace
}  // namespace hf2pte::exp
