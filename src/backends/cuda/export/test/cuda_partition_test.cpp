// The CUDA delegate on small graphs, both sides: the partitioner's grouping
// (one delegate for a fully supported graph; unsupported ops left outside),
// the payload the runtime parses back, the CPU reference executor's results
// at two sizes of a dynamic dim (checked against arithmetic done here), and
// malformed payloads refused without a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "backends/cuda/export/partition.h"
#include "backends/cuda/runtime/cuda_program.h"
#include "backends/cuda/runtime/reference_executor.h"
#include "graph/constant.h"
#include "kernels/portable/kernels.h"
#include "runtime/tensor.h"

namespace hf2pte::cuda {
namespace {

using graph::Graph;
using graph::IntList;
using graph::SymInt;
using graph::TensorType;
using graph::ValueId;

std::vector<uint8_t> streamed(const graph::ConstantData& c) {
  std::vector<uint8_t> out;
  Status st = c.write([&](const void* d, size_t n) {
    const auto* p = static_cast<const uint8_t*>(d);
    out.insert(out.end(), p, p + n);
    return Status::ok();
  });
  EXPECT_TRUE(st.is_ok());
  return out;
}

/// y = view_copy((x + c) * x, [seq * 2]) over x f32[seq, 2], seq in [1, 8].
Graph small_graph() {
  Graph g("forward");
  SymInt seq = g.add_dim("seq", 1, 8);
  ValueId x = g.add_input("x", TensorType{ScalarType::kFloat, {seq, 2}, {}});
  ValueId c = g.add_constant("c", graph::ConstantData::from_values(ScalarType::kFloat, {1, 2}, {0.5, -2.0}, "c"));
  ValueId s = *g.add(OpId::AddOut, {x, c, int64_t(1)}, "add");
  ValueId m = *g.add(OpId::MulOut, {s, x}, "mul");
  ValueId y = *g.add(OpId::ViewCopyOut, {m, IntList{seq * 2}}, "flat");
  g.set_outputs({y});
  return g;
}

struct Delegated {
  std::shared_ptr<const CudaProgram> program;
  std::map<std::string, std::vector<uint8_t>> constants;
};

Delegated delegated(const Graph& g) {
  EXPECT_EQ(g.delegates().size(), 1u);
  const auto& d = g.delegates().at(0);
  EXPECT_EQ(d.backend_id, kCudaBackendId);
  auto p = parse_cuda_payload(d.payload, uint64_t(1) << 30);
  EXPECT_TRUE(p.is_ok()) << p.status().message();
  Delegated out;
  out.program = std::make_shared<const CudaProgram>(std::move(*p));
  for (const auto& n : d.named) out.constants[n.key] = streamed(n.data);
  return out;
}

TEST(CudaPartition, SupportedGraphIsOneDelegateAndRunsOnTheReference) {
  Graph g = small_graph();
  auto stats = partition_for_cuda(g);
  ASSERT_TRUE(stats.is_ok()) << stats.status().message();
  EXPECT_EQ(stats->partitions, 1);
  EXPECT_EQ(stats->claimed_nodes, 3);
  EXPECT_TRUE(stats->unsupported.empty());
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0].op, OpId::DelegateCall);

  Delegated d = delegated(g);
  const CudaProgram& p = *d.program;
  EXPECT_EQ(p.num_inputs, 1u);
  EXPECT_EQ(p.num_outputs, 1u);
  ASSERT_EQ(p.dims.size(), 1u);
  EXPECT_EQ(p.dims[0].name, "seq");
  EXPECT_EQ(p.dims[0].max, 8);
  ASSERT_EQ(p.nodes.size(), 3u);
  EXPECT_EQ(p.nodes[2].op, OpId::ViewCopyOut);
  // Two intermediates of f32[8, 2] (64 bytes each, live together once).
  EXPECT_EQ(p.arena_bytes, 128u);

  ConstantLookup lookup = [&](std::string_view key) -> Result<std::span<const uint8_t>> {
    auto it = d.constants.find(std::string(key));
    if (it == d.constants.end()) return make_error(ErrorCode::kNotFound, "no constant {}", key);
    return std::span<const uint8_t>(it->second);
  };
  auto ex = ReferenceExecutor::make(d.program, lookup, kernels::portable_registry());
  ASSERT_TRUE(ex.is_ok()) << ex.status().message();
  for (int64_t seq : {3, 8}) {
    std::vector<float> x(size_t(seq * 2)), y(16, -1.f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) - 2.5f;
    rt::Tensor xt(ScalarType::kFloat, {seq, 2}, {}, x.data(), x.size() * 4, rt::ShapeDynamism::kStatic);
    rt::Tensor yt(ScalarType::kFloat, {16}, {}, y.data(), y.size() * 4, rt::ShapeDynamism::kDynamicBound);
    rt::EValue xe, ye;
    xe.tag = ye.tag = rt::Tag::kTensor;
    xe.tensor = &xt;
    ye.tensor = &yt;
    std::vector<rt::EValue*> args = {&xe, &ye};
    ASSERT_TRUE((*ex)->execute(args).is_ok());
    ASSERT_EQ(yt.numel(), seq * 2);
    const float c[2] = {0.5f, -2.0f};
    for (size_t i = 0; i < x.size(); ++i) EXPECT_FLOAT_EQ(y[i], (x[i] + c[i % 2]) * x[i]) << "seq " << seq << " at " << i;
  }
  // A size outside the dim's range is a named error, not a write past the arena.
  std::vector<float> big(18);
  rt::Tensor bt(ScalarType::kFloat, {9, 2}, {}, big.data(), big.size() * 4, rt::ShapeDynamism::kStatic);
  std::vector<float> y(18);
  rt::Tensor yt(ScalarType::kFloat, {18}, {}, y.data(), y.size() * 4, rt::ShapeDynamism::kDynamicBound);
  rt::EValue be, ye;
  be.tag = ye.tag = rt::Tag::kTensor;
  be.tensor = &bt;
  ye.tensor = &yt;
  std::vector<rt::EValue*> args = {&be, &ye};
  Status st = (*ex)->execute(args);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("dim 'seq' = 9"), std::string::npos) << st.message();
}

TEST(CudaPartition, UnsupportedOpsStayOnPortableKernels) {
  // gather is not in the delegate's op set: it splits the graph in two runs.
  Graph g("forward");
  ValueId x = g.add_input("x", TensorType{ScalarType::kFloat, {2, 3}, {}});
  ValueId idx = g.add_input("idx", TensorType{ScalarType::kLong, {2, 1}, {}});
  ValueId a = *g.add(OpId::AddOut, {x, x, int64_t(1)}, "a");
  ValueId b = *g.add(OpId::GatherOut, {a, int64_t(1), idx, false}, "b");
  ValueId c = *g.add(OpId::MulOut, {b, b}, "c");
  g.set_outputs({c});
  auto stats = partition_for_cuda(g);
  ASSERT_TRUE(stats.is_ok()) << stats.status().message();
  EXPECT_EQ(stats->partitions, 2);
  ASSERT_EQ(stats->unsupported.size(), 1u);
  EXPECT_EQ(stats->unsupported.begin()->first, "aten::gather.out");
  ASSERT_EQ(g.nodes().size(), 3u);
  EXPECT_EQ(g.nodes()[0].op, OpId::DelegateCall);
  EXPECT_EQ(g.nodes()[1].op, OpId::GatherOut);
  EXPECT_EQ(g.nodes()[2].op, OpId::DelegateCall);
}

TEST(CudaPayload, CorruptPayloadsAreRefusedWithoutACrash) {
  Graph g = small_graph();
  ASSERT_TRUE(partition_for_cuda(g).is_ok());
  const std::vector<uint8_t> good = g.delegates().at(0).payload;
  ASSERT_TRUE(parse_cuda_payload(good, 1 << 20).is_ok());
  // The arena cap is enforced.
  auto capped = parse_cuda_payload(good, 64);
  ASSERT_FALSE(capped.is_ok());
  EXPECT_NE(capped.status().message().find("arena"), std::string::npos);
  // Every truncation fails; every single-byte change either parses or fails
  // cleanly (under ASan in the sanitizer job).
  for (size_t n = 0; n < good.size(); n += 7) {
    const std::vector<uint8_t> cut(good.begin(), good.begin() + long(n));  // its own buffer: ASan sees over-reads
    EXPECT_FALSE(parse_cuda_payload(cut, 1 << 20).is_ok()) << n;
  }
  // What still parses runs without touching memory it does not own.
  std::map<std::string, std::vector<uint8_t>> constants;
  for (const auto& n : g.delegates().at(0).named) constants[n.key] = streamed(n.data);
  ConstantLookup lookup = [&](std::string_view key) -> Result<std::span<const uint8_t>> {
    auto it = constants.find(std::string(key));
    if (it == constants.end()) return make_error(ErrorCode::kNotFound, "no constant {}", key);
    return std::span<const uint8_t>(it->second);
  };
  int refused = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t v : {uint8_t(0), uint8_t(0xFF), uint8_t(good[i] ^ 0x5A)}) {
      auto bad = good;
      bad[i] = v;
      auto p = parse_cuda_payload(bad, 1 << 12);
      if (!p.is_ok()) {
        ++refused;
        continue;
      }
      auto ex = ReferenceExecutor::make(std::make_shared<const CudaProgram>(std::move(*p)), lookup,
                                        kernels::portable_registry());
      if (!ex.is_ok()) continue;
      std::vector<float> x(6, 1.5f), y(64, 0.f);
      rt::Tensor xt(ScalarType::kFloat, {3, 2}, {}, x.data(), x.size() * 4, rt::ShapeDynamism::kStatic);
      rt::Tensor yt(ScalarType::kFloat, {6}, {}, y.data(), y.size() * 4, rt::ShapeDynamism::kDynamicBound);
      rt::EValue xe, ye;
      xe.tag = ye.tag = rt::Tag::kTensor;
      xe.tensor = &xt;
      ye.tensor = &yt;
      std::vector<rt::EValue*> args = {&xe, &ye};
      (void)(*ex)->execute(args);
    }
  }
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace hf2pte::cuda
