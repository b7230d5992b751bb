// The XNNPACK export side: SHA-256 test vectors, the XH00 blob the serializer
// writes (verified by the runtime's own verifier), and the partitioner's
// choices on small graphs (FullyConnected with a transposed filter, named
// weights keyed by SHA-256, deduplicated, non-finite floats bit-exact).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "backends/xnnpack/export/partition.h"
#include "backends/xnnpack/export/serialize.h"
#include "backends/xnnpack/export/sha256.h"
#include "backends/xnnpack/runtime/xnn_payload.h"
#include "core/scalar_type.h"
#include "graph/constant.h"

namespace hf2pte::xnn {
namespace {

namespace fbx = fb_xnnpack;

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const char* two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(sha256_hex(two, std::strlen(two)), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // Streaming in odd pieces gives the same digest as one call.
  std::string million(1000000, 'a');
  Sha256 h;
  for (size_t i = 0; i < million.size(); i += 997) h.update(million.data() + i, std::min<size_t>(997, million.size() - i));
  EXPECT_EQ(h.hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(XnnSerialize, HeaderAndFlatbufferFollowTheWireFacts) {
  XnnSubgraph s;
  s.values.push_back({{8, 4}, 0, 1, 0});
  s.values.push_back({{4, 3}, kXnnInvalidId, 0, 1});
  s.values.push_back({{8, 3}, 1, 2, 0});
  s.constants.push_back({"k", 48});
  XnnNodeSpec spec;
  spec.kind = fbx::XNodeUnion::XNNFullyConnected;
  spec.ids = {0, 1, kXnnInvalidId, 2};
  spec.flags = 0x1;
  s.nodes.push_back(spec);
  s.num_externs = 2;
  auto blob = serialize_xnn_payload(s);
  ASSERT_GE(blob.size(), 32u);
  EXPECT_EQ(std::memcmp(blob.data() + 4, "XH00", 4), 0);
  auto h = parse_xnn_header(blob);
  ASSERT_TRUE(h.is_ok()) << h.status().message();
  EXPECT_EQ(h->flatbuffer_offset, 32u);
  EXPECT_EQ(h->constant_data_offset, 32u + ((h->flatbuffer_size + 15) & ~15u));
  EXPECT_EQ(h->constant_data_size, 0u);
  EXPECT_EQ(blob.size(), h->constant_data_offset);
  EXPECT_EQ(std::memcmp(blob.data() + 32 + 4, "XN01", 4), 0);
  auto v = verify_payload(blob);
  ASSERT_TRUE(v.is_ok()) << v.status().message();
  const auto* g = v->graph;
  EXPECT_EQ(g->num_externs(), 2u);
  ASSERT_EQ(g->xvalues()->size(), 3u);
  EXPECT_EQ(g->xvalues()->Get(1)->xvalue_union_as_XNNTensorValue()->external_id(), kXnnInvalidId);
  ASSERT_EQ(g->constant_data()->size(), 2u);
  EXPECT_EQ(g->constant_data()->Get(1)->offset(), UINT64_MAX);
  EXPECT_EQ(g->constant_data()->Get(1)->size(), 48u);
  EXPECT_EQ(g->constant_data()->Get(1)->named_key()->str(), "k");
  const auto* fc = g->xnodes()->Get(0)->xnode_union_as_XNNFullyConnected();
  ASSERT_NE(fc, nullptr);
  EXPECT_EQ(fc->bias_id(), kXnnInvalidId);
  EXPECT_EQ(fc->flags(), 1u);
}

std::vector<uint8_t> bytes_of(const std::vector<float>& f) {
  std::vector<uint8_t> b(f.size() * 4);
  std::memcpy(b.data(), f.data(), b.size());
  return b;
}

std::vector<uint8_t> streamed(const graph::ConstantData& c) {
  std::vector<uint8_t> out;
  auto st = c.write([&](const void* p, size_t n) {
    out.insert(out.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    return Status::ok();
  });
  EXPECT_TRUE(st.is_ok());
  return out;
}

/// The filters of a payload's FullyConnected nodes: flags, dims, datatype.
struct FcFilter {
  uint32_t flags;
  std::vector<uint32_t> dims;
  fbx::XNNDatatype datatype;
};
std::vector<FcFilter> fc_filters(const std::vector<uint8_t>& payload) {
  std::vector<FcFilter> out;
  auto v = verify_payload(payload);
  EXPECT_TRUE(v.is_ok()) << v.status().message();
  if (!v.is_ok()) return out;
  for (const auto* n : *v->graph->xnodes()) {
    if (const auto* fc = n->xnode_union_as_XNNFullyConnected()) {
      const auto* f = v->graph->xvalues()->Get(fc->filter_id())->xvalue_union_as_XNNTensorValue();
      out.push_back({fc->flags(), std::vector<uint32_t>(f->dims()->begin(), f->dims()->end()), f->datatype()});
    }
  }
  return out;
}

/// x [rows, in] . W^T with W [out, in] streamed transposed from a float
/// checkpoint tensor (what models/blocks.cpp builds for a linear), then a mean
/// when `mean` (a non-claimed op that ends the run), partitioned with `options`.
Result<PartitionStats> partition_streamed_mm(graph::Graph& g, const std::vector<float>& w, int64_t rows, int64_t out,
                                             int64_t in, bool mean, const PartitionOptions& options = {}) {
  auto x = g.add_input("x", {ScalarType::kFloat, {rows, in}, {}});
  auto wb = std::make_shared<std::vector<uint8_t>>(bytes_of(w));
  graph::ConstantRecipe r;
  r.source = {"w", ScalarType::kFloat, {out, in}, *wb, wb};
  r.transpose = true;
  auto wt = g.add_constant("w.T", graph::make_constant(r));
  HF2PTE_ASSIGN_OR_RETURN(auto y, g.add(OpId::MmOut, {x, wt}, "y"));
  if (mean) {
    HF2PTE_ASSIGN_OR_RETURN(y, g.add(OpId::MeanOut, {y, graph::IntList{1}, true}, "m"));
  }
  g.set_outputs({y});
  return partition_for_xnnpack(g, options);
}

// y1 = x @ W (mm, [in, out] weight), y2 = x @ W again (same bytes), z = y1 + y2,
// then a non-claimed op (mean) so the run ends: one delegate, one named weight.
TEST(XnnPartition, LinearsBecomeFullyConnectedWithNamedWeights) {
  graph::Graph g;
  auto seq = g.add_dim("seq", 1, 16);
  auto x = g.add_input("x", {ScalarType::kFloat, {seq, 4}, {}});
  std::vector<float> w(12);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i) * 0.5f;
  w[1] = std::numeric_limits<float>::quiet_NaN();
  uint32_t nan_payload = 0x7fc01234;
  std::memcpy(&w[2], &nan_payload, 4);
  w[3] = -std::numeric_limits<float>::infinity();
  auto wb = bytes_of(w);
  auto w1 = g.add_constant("w1", graph::ConstantData::from_bytes(ScalarType::kFloat, {4, 3}, wb, "w1"));
  auto w2 = g.add_constant("w2", graph::ConstantData::from_bytes(ScalarType::kFloat, {4, 3}, wb, "w2"));
  auto y1 = g.add(OpId::MmOut, {x, w1}, "y1");
  auto y2 = g.add(OpId::MmOut, {x, w2}, "y2");
  ASSERT_TRUE(y1.is_ok() && y2.is_ok());
  auto z = g.add(OpId::AddOut, {*y1, *y2}, "z");
  ASSERT_TRUE(z.is_ok()) << z.status().message();
  auto m = g.add(OpId::MeanOut, {*z, graph::IntList{1}, true}, "m");
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  g.set_outputs({*m});

  auto stats = partition_for_xnnpack(g);
  ASSERT_TRUE(stats.is_ok()) << stats.status().message();
  EXPECT_EQ(stats->partitions, 1);
  EXPECT_EQ(stats->claimed_nodes, 3);
  EXPECT_EQ(stats->xnn_nodes["XNNFullyConnected"], 2);
  EXPECT_EQ(stats->xnn_nodes["XNNAdd"], 1);
  ASSERT_EQ(g.nodes().size(), 2u);
  EXPECT_EQ(g.nodes()[0].op, OpId::DelegateCall);
  EXPECT_EQ(g.nodes()[0].outputs, std::vector<graph::ValueId>{*z});
  ASSERT_EQ(g.delegates().size(), 1u);
  const auto& d = g.delegates()[0];
  EXPECT_EQ(d.backend_id, "XnnpackBackend");
  ASSERT_EQ(d.named.size(), 1u);  // identical weights stored once
  EXPECT_EQ(d.named[0].key, sha256_hex(wb.data(), wb.size()));
  EXPECT_EQ(streamed(d.named[0].data), wb);  // NaN payloads and -inf bit-exact

  auto v = verify_payload(d.payload);
  ASSERT_TRUE(v.is_ok()) << v.status().message();
  const auto* pg = v->graph;
  EXPECT_EQ(pg->num_externs(), 2u);  // x, z
  int fcs = 0;
  for (const auto* n : *pg->xnodes()) {
    if (const auto* fc = n->xnode_union_as_XNNFullyConnected()) {
      ++fcs;
      EXPECT_EQ(fc->flags(), 1u);  // [in, out] filter
      EXPECT_EQ(fc->bias_id(), kXnnInvalidId);
      const auto* f = pg->xvalues()->Get(fc->filter_id())->xvalue_union_as_XNNTensorValue();
      EXPECT_EQ(f->constant_buffer_idx(), 1u);
      EXPECT_EQ(std::vector<uint32_t>(f->dims()->begin(), f->dims()->end()), (std::vector<uint32_t>{4, 3}));
    }
  }
  EXPECT_EQ(fcs, 2);
  // The external input keeps the bound of its symbolic dim.
  const auto* in = pg->xvalues()->Get(0)->xvalue_union_as_XNNTensorValue();
  EXPECT_EQ(in->flags(), 1u);
  EXPECT_EQ(std::vector<uint32_t>(in->dims()->begin(), in->dims()->end()), (std::vector<uint32_t>{16, 4}));
}

// A checkpoint weight W [out, in] streamed transposed for mm(x, W^T): the
// filter is written as W itself, [out, in] with flag 0 (XNNPACK's default
// layout, what upstream writes), not as the [in, out] transpose with flag 1.
TEST(XnnPartition, StreamedWeightsAreWrittenInTheCheckpointLayout) {
  graph::Graph g;
  std::vector<float> w(12);  // [3 out, 4 in]
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i) + 0.25f;
  const std::vector<uint8_t> wb = bytes_of(w);
  auto stats = partition_streamed_mm(g, w, 2, 3, 4, true);
  ASSERT_TRUE(stats.is_ok()) << stats.status().message();
  ASSERT_EQ(g.delegates().size(), 1u);
  const auto& d = g.delegates()[0];
  ASSERT_EQ(d.named.size(), 1u);
  EXPECT_EQ(streamed(d.named[0].data), wb);  // W's own bytes, row-major [out, in]
  EXPECT_EQ(d.named[0].key, sha256_hex(wb.data(), wb.size()));
  const auto fcs = fc_filters(d.payload);
  ASSERT_EQ(fcs.size(), 1u);
  EXPECT_EQ(fcs[0].flags, 0u);
  EXPECT_EQ(fcs[0].dims, (std::vector<uint32_t>{3, 4}));
}

// PartitionOptions::fc_filter_dtype = half: the same filter converted while
// streaming, datatype fp16 in the payload, the SHA-256 key of the half bytes.
TEST(XnnPartition, HalfFiltersAreConvertedWhileStreaming) {
  graph::Graph g;
  std::vector<float> w(12);  // [3 out, 4 in]
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i) * 0.1f - 0.5f;
  PartitionOptions options;
  options.fc_filter_dtype = ScalarType::kHalf;
  auto stats = partition_streamed_mm(g, w, 2, 3, 4, true, options);
  ASSERT_TRUE(stats.is_ok()) << stats.status().message();
  ASSERT_EQ(g.delegates().size(), 1u);
  const auto& d = g.delegates()[0];
  ASSERT_EQ(d.named.size(), 1u);
  std::vector<uint8_t> half;
  for (float f : w) {
    const uint16_t h = float_to_half(f);
    half.push_back(uint8_t(h & 0xFF));
    half.push_back(uint8_t(h >> 8));
  }
  EXPECT_EQ(streamed(d.named[0].data), half);
  EXPECT_EQ(d.named[0].key, sha256_hex(half.data(), half.size()));
  const auto fcs = fc_filters(d.payload);
  ASSERT_EQ(fcs.size(), 1u);
  EXPECT_EQ(fcs[0].datatype, fbx::XNNDatatype::fp16);
  EXPECT_EQ(fcs[0].flags, 0u);
}

// fp16 filters of fp32 nodes whose input is longer than 4096 floats are
// written [in, out] with flag 1 (decode streams them as row chunks into
// partial outputs, decisions.md "K-major filters"); 4096 and below stay
// [out, in] with flag 0. The bytes are the half transpose of W either way.
TEST(XnnPartition, LongInputHalfFiltersAreWrittenKMajor) {
  for (int64_t in : {4096, 4100}) {
    constexpr int64_t out = 3;
    graph::Graph g;
    std::vector<float> w(size_t(out * in));
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(int64_t(i % 97) - 48) * 0.125f;
    PartitionOptions options;
    options.fc_filter_dtype = ScalarType::kHalf;
    auto stats = partition_streamed_mm(g, w, 1, out, in, false, options);
    ASSERT_TRUE(stats.is_ok()) << stats.status().message();
    ASSERT_EQ(g.delegates().size(), 1u);
    const auto& d = g.delegates()[0];
    ASSERT_EQ(d.named.size(), 1u);
    const bool k_major = in > 4096;
    std::vector<uint8_t> half;
    for (int64_t i = 0; i < out * in; ++i) {
      // Element i of the written filter: [in, out] when k-major, else [out, in].
      const float f = k_major ? w[size_t((i % out) * in + i / out)] : w[size_t(i)];
      const uint16_t h = float_to_half(f);
      half.push_back(uint8_t(h & 0xFF));
      half.push_back(uint8_t(h >> 8));
    }
    EXPECT_EQ(streamed(d.named[0].data), half) << "in " << in;
    EXPECT_EQ(d.named[0].key, sha256_hex(half.data(), half.size())) << "in " << in;
    const auto fcs = fc_filters(d.payload);
    ASSERT_EQ(fcs.size(), 1u);
    EXPECT_EQ(fcs[0].flags, k_major ? 1u : 0u) << "in " << in;
    const std::vector<uint32_t> dims = {uint32_t(k_major ? in : out), uint32_t(k_major ? out : in)};
    EXPECT_EQ(fcs[0].dims, dims) << "in " << in;
  }
}

TEST(XnnPartition, KeyTransposeFoldsIntoBatchMatMul) {
  // q . k^T as bmm(q, permute(k, [0, 2, 1])): one BatchMatMul with
  // XNN_FLAG_TRANSPOSE_B reading k, no transpose node. A permute that has
  // another user stays a transpose.
  for (bool shared : {false, true}) {
    graph::Graph g;
    auto q = g.add_input("q", {ScalarType::kFloat, {2, 1, 4}, {}});
    auto k = g.add_input("k", {ScalarType::kFloat, {2, 8, 4}, {}});
    auto kt = g.add(OpId::PermuteCopyOut, {k, graph::IntList{0, 2, 1}}, "kT");
    ASSERT_TRUE(kt.is_ok()) << kt.status().message();
    auto s = g.add(OpId::BmmOut, {q, *kt}, "qk");
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    std::vector<graph::ValueId> outs{*s};
    if (shared) outs.push_back(*kt);
    g.set_outputs(outs);
    auto stats = partition_for_xnnpack(g);
    ASSERT_TRUE(stats.is_ok()) << stats.status().message();
    EXPECT_EQ(stats->partitions, 1);
    EXPECT_EQ(stats->xnn_nodes["XNNStaticTranspose"], shared ? 1 : 0);
    ASSERT_EQ(g.delegates().size(), 1u);
    auto v = verify_payload(g.delegates()[0].payload);
    ASSERT_TRUE(v.is_ok()) << v.status().message();
    int bmms = 0;
    for (const auto* n : *v->graph->xnodes()) {
      const auto* bmm = n->xnode_union_as_XNNBatchMatrixMultiply();
      if (bmm == nullptr) continue;
      ++bmms;
      EXPECT_EQ(bmm->flags(), shared ? 0u : 1u);
      const auto* in2 = v->graph->xvalues()->Get(bmm->input2_id())->xvalue_union_as_XNNTensorValue();
      const std::vector<uint32_t> dims(in2->dims()->begin(), in2->dims()->end());
      EXPECT_EQ(dims, shared ? (std::vector<uint32_t>{2, 4, 8}) : (std::vector<uint32_t>{2, 8, 4}));
    }
    EXPECT_EQ(bmms, 1);
  }
}

TEST(XnnPartition, LinearOnlyLeavesOtherOpsAlone) {
  graph::Graph g;
  auto x = g.add_input("x", {ScalarType::kFloat, {2, 4}, {}});
  auto w = g.add_constant("w", graph::ConstantData::from_bytes(ScalarType::kFloat, {4, 3}, std::vector<uint8_t>(48), "w"));
  auto y = g.add(OpId::MmOut, {x, w}, "y");
  ASSERT_TRUE(y.is_ok());
  auto z = g.add(OpId::SigmoidOut, {*y}, "z");
  ASSERT_TRUE(z.is_ok());
  g.set_outputs({*z});
  PartitionOptions o;
  o.linear_only = true;
  auto stats = partition_for_xnnpack(g, o);
  ASSERT_TRUE(stats.is_ok()) << stats.status().message();
  EXPECT_EQ(stats->partitions, 1);
  ASSERT_EQ(g.nodes().size(), 2u);
  EXPECT_EQ(g.nodes()[1].op, OpId::SigmoidOut);
}

}  // namespace
}  // namespace hf2pte::xnn
