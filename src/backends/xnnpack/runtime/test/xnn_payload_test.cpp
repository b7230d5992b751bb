// XnnpackBackend unit tests: payloads built here with our own schema, run
// through compile_payload + run_graph. Covers the header and id validation
// (hostile input -> error, never a crash) and the fp32 node set LLMs use.
#include <gtest/gtest.h>

#include "core/scalar_type.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>

#include "backends/xnnpack/runtime/xnn_graph.h"
#include "backends/xnnpack/runtime/xnn_payload.h"
#include "backends/xnnpack/runtime/xnnpack_backend.h"
#include "runtime/evalue.h"
#include "runtime/tensor.h"
#include "runtime/weight_store.h"

namespace hf2pte::xnn {
namespace {

namespace fb = fb_xnnpack;
using flatbuffers::Offset;

/// Builds an XNNGraph flatbuffer wrapped in an XH00 blob; constants go to the
/// blob's own constant region (entries without named_key).
class PayloadBuilder {
 public:
  PayloadBuilder() { constants_.push_back(fb::CreateConstantDataOffset(fbb_, 0, 0, fbb_.CreateString(""))); }

  /// An fp32 value; `ext` = kInvalidId for internal ones. Returns its id.
  uint32_t value(std::vector<uint32_t> dims, uint32_t ext = kInvalidId, uint32_t flags = 0,
                 std::vector<float> data = {}, fb::XNNDatatype dt = fb::XNNDatatype::fp32) {
    uint32_t cidx = 0;
    if (!data.empty()) {
      cidx = uint32_t(constants_.size());
      constants_.push_back(fb::CreateConstantDataOffset(fbb_, region_.size(), data.size() * 4));
      const auto* b = reinterpret_cast<const uint8_t*>(data.data());
      region_.insert(region_.end(), b, b + data.size() * 4);
    }
    const uint32_t id = uint32_t(values_.size());
    auto tv = fb::CreateXNNTensorValueDirect(fbb_, dt, uint32_t(dims.size()), &dims, cidx, ext, flags, id);
    values_.push_back(fb::CreateXValue(fbb_, fb::XValueUnion::XNNTensorValue, tv.Union()));
    return id;
  }
  /// A quantized value with parameters `qp` (built by the caller) and optional constant bytes.
  uint32_t qvalue(fb::XNNDatatype dt, std::vector<uint32_t> dims, fb::XNNQuantParams qt, Offset<void> qp,
                  const std::vector<uint8_t>& bytes = {}) {
    uint32_t cidx = 0;
    if (!bytes.empty()) {
      cidx = uint32_t(constants_.size());
      constants_.push_back(fb::CreateConstantDataOffset(fbb_, region_.size(), bytes.size()));
      region_.insert(region_.end(), bytes.begin(), bytes.end());
    }
    const uint32_t id = uint32_t(values_.size());
    auto tv = fb::CreateXNNTensorValueDirect(fbb_, dt, uint32_t(dims.size()), &dims, cidx, kInvalidId, 0, id);
    auto q = fb::CreateXNNQuantizedTensorValue(fbb_, tv, qt, qp);
    values_.push_back(fb::CreateXValue(fbb_, fb::XValueUnion::XNNQuantizedTensorValue, q.Union()));
    return id;
  }
  /// An fp16 constant holding `data` rounded to half.
  uint32_t half_value(std::vector<uint32_t> dims, const std::vector<float>& data) {
    const uint32_t cidx = uint32_t(constants_.size());
    constants_.push_back(fb::CreateConstantDataOffset(fbb_, region_.size(), data.size() * 2));
    for (float f : data) {
      const uint16_t h = float_to_half(f);
      region_.push_back(uint8_t(h & 0xFF));
      region_.push_back(uint8_t(h >> 8));
    }
    const uint32_t id = uint32_t(values_.size());
    auto tv = fb::CreateXNNTensorValueDirect(fbb_, fb::XNNDatatype::fp16, uint32_t(dims.size()), &dims, cidx, kInvalidId,
                                             0, id);
    values_.push_back(fb::CreateXValue(fbb_, fb::XValueUnion::XNNTensorValue, tv.Union()));
    return id;
  }
  uint32_t input(std::vector<uint32_t> dims) { return value(std::move(dims), next_ext_++, 1); }
  uint32_t output(std::vector<uint32_t> dims) { return value(std::move(dims), next_ext_++, 2); }

  void node(fb::XNodeUnion type, Offset<void> table, bool om = false, float lo = 0, float hi = 0) {
    auto minmax = om ? fb::CreateOutputMinMax(fbb_, lo, hi) : 0;
    nodes_.push_back(fb::CreateXNode(fbb_, type, table, 7, minmax));
  }
  void binary(fb::XNodeUnion type, uint32_t a, uint32_t b, uint32_t out) {
    node(type, fb::CreateNode2x1(fbb_, a, b, out).Union());
  }
  void unary(fb::XNodeUnion type, uint32_t in, uint32_t out) { node(type, fb::CreateNode1x1(fbb_, in, out).Union()); }
  flatbuffers::FlatBufferBuilder& fbb() { return fbb_; }

  std::vector<uint8_t> finish(uint32_t num_externs = 0) {
    auto g = fb::CreateXNNGraphDirect(fbb_, "0", &nodes_, &values_, num_externs ? num_externs : next_ext_, nullptr,
                                      nullptr, nullptr, nullptr, &constants_);
    fbb_.Finish(g, "XN01");
    const uint32_t fb_size = fbb_.GetSize();
    const uint32_t const_off = 32 + ((fb_size + 15) / 16) * 16;
    std::vector<uint8_t> blob(const_off + region_.size(), 0);
    std::memcpy(blob.data() + 4, "XH00", 4);
    const uint16_t len = 30;
    const uint32_t fb_off = 32;
    const uint64_t csize = region_.size();
    std::memcpy(blob.data() + 8, &len, 2);
    std::memcpy(blob.data() + 10, &fb_off, 4);
    std::memcpy(blob.data() + 14, &fb_size, 4);
    std::memcpy(blob.data() + 18, &const_off, 4);
    std::memcpy(blob.data() + 22, &csize, 8);
    std::memcpy(blob.data() + 32, fbb_.GetBufferPointer(), fb_size);
    if (!region_.empty()) std::memcpy(blob.data() + const_off, region_.data(), region_.size());
    return blob;
  }

 private:
  flatbuffers::FlatBufferBuilder fbb_;
  std::vector<Offset<fb::XValue>> values_;
  std::vector<Offset<fb::XNode>> nodes_;
  std::vector<Offset<fb::ConstantDataOffset>> constants_;
  std::vector<uint8_t> region_;
  uint32_t next_ext_ = 0;
};

/// Test-side outputs: plain vectors that any shape fits.
class VectorBinder final : public OutputBinder {
 public:
  Result<void*> bind_output(uint32_t e, std::span<const int64_t> shape) override {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    shapes[e].assign(shape.begin(), shape.end());
    data[e].assign(size_t(n), 0.0f);
    return static_cast<void*>(data[e].data());
  }
  std::map<uint32_t, std::vector<float>> data;
  std::map<uint32_t, std::vector<int64_t>> shapes;
};

/// Compiles `blob`, binds fp32 inputs in external-id order and runs it.
Status run(const std::vector<uint8_t>& blob, std::vector<std::pair<std::vector<int64_t>, std::vector<float>>> inputs,
           VectorBinder& binder) {
  HF2PTE_ASSIGN_OR_RETURN(XnnGraph g, compile_payload(blob, nullptr));
  for (uint32_t e = 0; e < inputs.size(); ++e) {
    XValue& v = g.values[g.external_values[e]];
    v.shape = inputs[e].first;
    v.data = inputs[e].second.data();
  }
  return run_graph(g, binder);
}

TEST(XnnPayload, HeaderRangesAreChecked) {
  PayloadBuilder b;
  uint32_t x = b.input({2}), y = b.output({2});
  b.unary(fb::XNodeUnion::XNNNegate, x, y);
  std::vector<uint8_t> blob = b.finish();
  auto h = parse_xnn_header(blob);
  ASSERT_TRUE(h.is_ok()) << h.status().message();
  EXPECT_EQ(h->flatbuffer_offset, 32u);

  std::vector<uint8_t> bad = blob;
  const uint32_t huge = 0xFFFFFFF0u;
  std::memcpy(bad.data() + 14, &huge, 4);  // flatbuffer_size past the end
  EXPECT_EQ(compile_payload(bad, nullptr).status().code(), ErrorCode::kInvalidProgram);
  bad = blob;
  const uint32_t inside = 40;
  std::memcpy(bad.data() + 18, &inside, 4);  // constant region overlaps the flatbuffer
  EXPECT_EQ(compile_payload(bad, nullptr).status().code(), ErrorCode::kInvalidProgram);
  bad = blob;
  std::memcpy(bad.data() + 32 + 4, "ZZ99", 4);  // flatbuffer identifier
  auto r = compile_payload(bad, nullptr);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("identifier"), std::string::npos) << r.status().message();
  EXPECT_FALSE(compile_payload(std::vector<uint8_t>(5, 0), nullptr).is_ok());
  EXPECT_FALSE(compile_payload(std::vector<uint8_t>(64, 0xAB), nullptr).is_ok());
}

TEST(XnnPayload, BareFlatbufferIsAccepted) {
  PayloadBuilder b;
  uint32_t x = b.input({2}), y = b.output({2});
  b.unary(fb::XNodeUnion::XNNNegate, x, y);
  std::vector<uint8_t> blob = b.finish();
  uint32_t fb_size;
  std::memcpy(&fb_size, blob.data() + 14, 4);
  std::vector<uint8_t> bare(blob.begin() + 32, blob.begin() + 32 + fb_size);
  VectorBinder out;
  ASSERT_TRUE(run(bare, {{{2}, {1, -2}}}, out).is_ok());
  EXPECT_EQ(out.data[1], (std::vector<float>{-1, 2}));
}

TEST(XnnPayload, EveryCorruptedByteIsAnErrorOrAValidGraph) {
  PayloadBuilder b;
  uint32_t x = b.input({2, 3});
  uint32_t w = b.value({4, 3}, kInvalidId, 0, std::vector<float>(12, 0.5f));
  uint32_t y = b.output({2, 4});
  b.node(fb::XNodeUnion::XNNFullyConnected, fb::CreateFullyConnected(b.fbb(), x, w, kInvalidId, y).Union());
  const std::vector<uint8_t> blob = b.finish();
  for (size_t i = 0; i < blob.size(); ++i) {
    for (uint8_t flip : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xFF)}) {
      std::vector<uint8_t> bad = blob;
      bad[i] ^= flip;
      auto g = compile_payload(bad, nullptr);  // must return, whatever it decides
      if (!g.is_ok()) {
        EXPECT_FALSE(g.status().message().empty());
      }
    }
  }
}

TEST(XnnPayload, IdsAndFlagsAreValidated) {
  {
    PayloadBuilder b;
    uint32_t x = b.input({2});
    b.output({2});
    b.unary(fb::XNodeUnion::XNNNegate, x, 99);  // unknown output id
    auto r = compile_payload(b.finish(), nullptr);
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find("output_id 99"), std::string::npos) << r.status().message();
  }
  {
    PayloadBuilder b;
    b.value({2}, /*ext=*/5, /*flags=*/1);  // external id beyond num_externs
    EXPECT_EQ(compile_payload(b.finish(2), nullptr).status().code(), ErrorCode::kInvalidProgram);
  }
  {
    PayloadBuilder b;
    b.value({2}, 0, /*flags=*/3);
    EXPECT_EQ(compile_payload(b.finish(1), nullptr).status().code(), ErrorCode::kInvalidProgram);
  }
  {
    PayloadBuilder b;
    uint32_t x = b.input({1, 1, 4, 4}), y = b.output({1, 1, 4, 4});
    // A convolution whose window fields are all zero is refused, by name.
    b.node(fb::XNodeUnion::XNNConv2d, fb::CreateNodeConv(b.fbb()).Union());
    (void)x;
    (void)y;
    auto r = compile_payload(b.finish(), nullptr);
    EXPECT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find("XNNConv2d"), std::string::npos) << r.status().message();
  }
  {
    PayloadBuilder b;
    uint32_t x = b.input({1, 4, 4, 1}), y = b.output({1, 2, 2, 1});
    b.node(fb::XNodeUnion::XNNAvgPooling2d, fb::CreatePooling2D(b.fbb(), 0, 0, 0, 0, 2, 2, 2, 2, 1, 1, x, y).Union());
    auto r = compile_payload(b.finish(), nullptr);
    EXPECT_EQ(r.status().code(), ErrorCode::kNotSupported);
    EXPECT_NE(r.status().message().find("XNNAvgPooling2d"), std::string::npos) << r.status().message();
  }
}

TEST(XnnOps, FullyConnectedBiasClampAndDynamicRows) {
  PayloadBuilder b;
  uint32_t x = b.input({3, 2});
  // W [out=3, in=2], bias [3]
  uint32_t w = b.value({3, 2}, kInvalidId, 0, {1, 2, 3, 4, 5, 6});
  uint32_t bias = b.value({3}, kInvalidId, 0, {0.5f, -0.5f, 0});
  uint32_t y = b.output({3, 3});
  b.node(fb::XNodeUnion::XNNFullyConnected, fb::CreateFullyConnected(b.fbb(), x, w, bias, y).Union(), true, -100,
         20);
  auto blob = b.finish();
  VectorBinder out;
  // Two rows although the payload says three: bounded dynamic shapes.
  ASSERT_TRUE(run(blob, {{{2, 2}, {1, 1, 2, 3}}}, out).is_ok());
  EXPECT_EQ(out.shapes[1], (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(out.data[1], (std::vector<float>{3.5f, 6.5f, 11, 8.5f, 17.5f, 20}));  // 28 clamped to 20
}

TEST(XnnOps, FullyConnectedTransposedWeights) {
  PayloadBuilder b;
  uint32_t x = b.input({1, 2});
  uint32_t w = b.value({2, 3}, kInvalidId, 0, {1, 3, 5, 2, 4, 6});  // [in, out]
  uint32_t y = b.output({1, 3});
  b.node(fb::XNodeUnion::XNNFullyConnected, fb::CreateFullyConnected(b.fbb(), x, w, kInvalidId, y, 1).Union());
  VectorBinder out;
  ASSERT_TRUE(run(b.finish(), {{{1, 2}, {1, 1}}}, out).is_ok());
  EXPECT_EQ(out.data[1], (std::vector<float>{3, 7, 11}));
}

// A reshape from a computed value to an external output (a decoder's logits)
// is not a copy: the producer writes into the output (forward_output_reshapes).
// When the value has another reader it keeps its own storage and the reshape
// copies. Both give the reshaped values at the reshaped shape.
TEST(XnnOps, ReshapeToOutputIsWrittenByItsProducer) {
  for (bool second_reader : {false, true}) {
    PayloadBuilder b;
    uint32_t x = b.input({2, 2});
    uint32_t w = b.value({3, 2}, kInvalidId, 0, {1, 2, 3, 4, 5, 6});
    uint32_t h = b.value({2, 3});
    uint32_t y = b.output({1, 2, 3});
    uint32_t z = second_reader ? b.output({2, 3}) : kInvalidId;
    b.node(fb::XNodeUnion::XNNFullyConnected, fb::CreateFullyConnected(b.fbb(), x, w, kInvalidId, h).Union());
    std::vector<uint32_t> shape = {1, 0, 3};
    b.node(fb::XNodeUnion::XNNStaticReshape, fb::CreateStaticReshapeDirect(b.fbb(), 3, &shape, h, y).Union());
    if (second_reader) b.unary(fb::XNodeUnion::XNNNegate, h, z);
    const auto blob = b.finish();
    auto g = compile_payload(blob, nullptr);
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    EXPECT_EQ(g->values[h].forwarded_by != kInvalidId, !second_reader);
    VectorBinder out;
    auto st = run(blob, {{{2, 2}, {1, 1, 2, 3}}}, out);
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_EQ(out.shapes[1], (std::vector<int64_t>{1, 2, 3}));
    EXPECT_EQ(out.data[1], (std::vector<float>{3, 7, 11, 8, 18, 28}));
    if (second_reader) {
      EXPECT_EQ(out.data[2], (std::vector<float>{-3, -7, -11, -8, -18, -28}));
    }
  }
}

// fp32 activations x fp16 filter -> fp32 (XNNPACK's weight-only half path),
// both filter layouts, two rows (the sgemm path after widening) and one (the
// half GEMV); values chosen exact in half, so the sums are exact too.
TEST(XnnOps, FullyConnectedWithHalfFilters) {
  for (bool transposed : {false, true}) {
    for (uint32_t rows : {1u, 2u}) {
      PayloadBuilder b;
      uint32_t x = b.input({rows, 2});
      // Logical W [out 3, in 2] = {{1, 2}, {3, 4}, {5, 0.5}}.
      uint32_t w = transposed ? b.half_value({2, 3}, {1, 3, 5, 2, 4, 0.5f}) : b.half_value({3, 2}, {1, 2, 3, 4, 5, 0.5f});
      uint32_t bias = b.half_value({3}, {0.25f, 0, -1});
      uint32_t y = b.output({rows, 3});
      b.node(fb::XNodeUnion::XNNFullyConnected, fb::CreateFullyConnected(b.fbb(), x, w, bias, y, transposed ? 1 : 0).Union());
      VectorBinder out;
      std::vector<float> in = rows == 1 ? std::vector<float>{1, 1} : std::vector<float>{1, 1, 2, -1};
      auto st = run(b.finish(), {{{int64_t(rows), 2}, in}}, out);
      ASSERT_TRUE(st.is_ok()) << st.message();
      std::vector<float> want = {3.25f, 7, 4.5f};
      if (rows == 2) want.insert(want.end(), {0.25f, 2, 8.5f});
      EXPECT_EQ(out.data[1], want) << "transposed " << transposed << ", rows " << rows;
    }
  }
}

// A long-input fp16 filter serialized [k, n] with the transpose flag (what
// hf2pte writes for k > 4096): read in place or from a huge-page copy (serve's
// default), one row (the split-K GEMV over fixed row chunks) and three
// (widened column blocks, then sgemm), against a double sum over the exactly
// widened weights; n = 70 leaves a column tail.
TEST(XnnOps, FullyConnectedLongHalfFilterKMajor) {
  constexpr int64_t K = 4100, N = 70;
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> wkn(static_cast<size_t>(K * N)), bias(static_cast<size_t>(N));
  for (auto& v : wkn) v = half_to_float(float_to_half(d(gen)));
  for (auto& v : bias) v = half_to_float(float_to_half(d(gen)));
  for (auto [rows, placement] : {std::pair{int64_t(1), rt::WeightPlacement::kInPlace},
                                  std::pair{int64_t(3), rt::WeightPlacement::kInPlace},
                                  std::pair{int64_t(1), rt::WeightPlacement::kHugePages}}) {
    std::vector<float> in(size_t(rows * K));
    for (auto& v : in) v = d(gen);
    rt::set_weight_placement(placement);
    PayloadBuilder b;
    uint32_t x = b.input({uint32_t(rows), uint32_t(K)});
    uint32_t w = b.half_value({uint32_t(K), uint32_t(N)}, wkn);
    uint32_t bi = b.half_value({uint32_t(N)}, bias);
    uint32_t y = b.output({uint32_t(rows), uint32_t(N)});
    b.node(fb::XNodeUnion::XNNFullyConnected, fb::CreateFullyConnected(b.fbb(), x, w, bi, y, 1).Union());
    VectorBinder out;
    auto st = run(b.finish(), {{{rows, K}, in}}, out);
    rt::set_weight_placement(rt::WeightPlacement::kInPlace);
    ASSERT_TRUE(st.is_ok()) << st.message();
    ASSERT_EQ(out.data[1].size(), size_t(rows * N));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t n = 0; n < N; ++n) {
        double ref = bias[size_t(n)];
        for (int64_t k = 0; k < K; ++k) ref += double(in[size_t(r * K + k)]) * wkn[size_t(k * N + n)];
        ASSERT_NEAR(out.data[1][size_t(r * N + n)], ref, 1e-4) << "rows " << rows << ", r " << r << ", n " << n;
      }
    }
  }
}

// An fp16 graph (as upstream writes fp16 models): every computing node reads
// its fp16 operands as fp32 and rounds its result once to fp16, as XNNPACK's
// fp16 operators do on CPUs without fp16 arithmetic; movement nodes copy fp16
// elements as they are. Expected values are computed the same way here.
TEST(XnnOps, Fp16GraphRoundsEachResultToHalf) {
  const auto h = [](float f) { return half_to_float(float_to_half(f)); };
  PayloadBuilder b;
  const auto f16 = fb::XNNDatatype::fp16;
  uint32_t x = b.input({1, 3});
  uint32_t x16 = b.value({1, 3}, kInvalidId, 0, {}, f16);
  const std::vector<float> wv = {0.1f, -0.7f, 1.3f, 2.2f, 0.05f, -1.9f}, bv = {0.3f, -0.2f};
  uint32_t w = b.half_value({2, 3}, wv), bias = b.half_value({2}, bv);
  uint32_t fc = b.value({1, 2}, kInvalidId, 0, {}, f16), sg = b.value({1, 2}, kInvalidId, 0, {}, f16);
  uint32_t padded = b.value({1, 4}, kInvalidId, 0, {}, f16), t = b.value({4, 1}, kInvalidId, 0, {}, f16);
  uint32_t y = b.output({4, 1});
  b.unary(fb::XNodeUnion::XNNConvert, x, x16);
  b.node(fb::XNodeUnion::XNNFullyConnected, fb::CreateFullyConnected(b.fbb(), x16, w, bias, fc).Union());
  b.unary(fb::XNodeUnion::XNNSigmoid, fc, sg);
  std::vector<uint32_t> pre = {0, 1}, post = {0, 1}, perm = {1, 0};
  b.node(fb::XNodeUnion::XNNStaticConstantPad,
         fb::CreateStaticConstantPadDirect(b.fbb(), &pre, &post, 0.1f, sg, padded).Union());
  b.node(fb::XNodeUnion::XNNStaticTranspose, fb::CreateStaticTransposeDirect(b.fbb(), 2, &perm, padded, t).Union());
  b.unary(fb::XNodeUnion::XNNConvert, t, y);
  const std::vector<float> xv = {0.33f, -1.7f, 2.9f};
  auto blob = b.finish();
  VectorBinder out;
  auto st = run(blob, {{{1, 3}, xv}}, out);
  ASSERT_TRUE(st.is_ok()) << st.message();
  std::vector<float> want = {h(0.1f)};
  for (int n = 0; n < 2; ++n) {
    float acc = h(bv[size_t(n)]);
    for (int k = 0; k < 3; ++k) acc += h(xv[size_t(k)]) * h(wv[size_t(n * 3 + k)]);
    want.push_back(h(1.0f / (1.0f + std::exp(-h(acc)))));
  }
  want.push_back(h(0.1f));
  ASSERT_EQ(out.data[1].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(out.data[1][i], want[i], 1e-7f) << i;
  // The Converts the runtime adds around fp16 nodes are not the payload's.
  auto g = compile_payload(blob, nullptr);
  ASSERT_TRUE(g.is_ok());
  const auto listed = g->node_counts();
  std::map<std::string, size_t> counts(listed.begin(), listed.end());
  EXPECT_EQ(counts["XNNConvert"], 2u);
  EXPECT_EQ(counts["XNNFullyConnected"], 1u);
}

// A Conv2d wide and large enough for Winograd F(2x2, 3x3) (kernels::winograd_pays:
// 128 input channels, 16x16 outputs), with the ReLU clamp: the direct sum.
TEST(XnnOps, WideThreeByThreeConvolution) {
  const uint32_t H = 16, W = 16, C = 128, O = 8;
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> xv(H * W * C), wv(O * 9 * C), bv(O);
  for (auto* v : {&xv, &wv, &bv}) for (auto& f : *v) f = d(gen);
  PayloadBuilder b;
  uint32_t x = b.input({1, H, W, C});
  uint32_t w = b.value({O, 3, 3, C}, kInvalidId, 0, wv), bias = b.value({O}, kInvalidId, 0, bv);
  uint32_t y = b.output({1, H, W, O});
  b.node(fb::XNodeUnion::XNNConv2d,
         fb::CreateNodeConv(b.fbb(), 1, 1, 1, 1, 3, 3, 1, 1, 1, 1, C, O, 1, 0, 0, x, w, bias, y, 0).Union(), true, 0.0f,
         std::numeric_limits<float>::infinity());
  VectorBinder out;
  auto st = run(b.finish(), {{{1, H, W, C}, xv}}, out);
  ASSERT_TRUE(st.is_ok()) << st.message();
  ASSERT_EQ(out.data[1].size(), size_t(H * W * O));
  for (uint32_t oy = 0; oy < H; ++oy) {
    for (uint32_t ox = 0; ox < W; ++ox) {
      for (uint32_t o = 0; o < O; ++o) {
        double acc = bv[o];
        for (int i = 0; i < 3; ++i) {
          for (int j = 0; j < 3; ++j) {
            const int iy = int(oy) + i - 1, ix = int(ox) + j - 1;
            if (iy < 0 || ix < 0 || iy >= int(H) || ix >= int(W)) continue;
            for (uint32_t c = 0; c < C; ++c) acc += double(xv[(iy * W + ix) * C + c]) * wv[((o * 3 + i) * 3 + j) * C + c];
          }
        }
        ASSERT_NEAR(out.data[1][(oy * W + ox) * O + o], std::max(acc, 0.0), 1e-4) << oy << " " << ox << " " << o;
      }
    }
  }
}

TEST(XnnOps, AttentionShapedChain) {
  // q [2,2] x kᵀ -> softmax -> x v, with reshape/transpose/slice/concat around it.
  PayloadBuilder b;
  uint32_t q = b.input({1, 2, 2}), k = b.input({1, 2, 2}), v = b.input({1, 2, 2});
  uint32_t scores = b.value({1, 2, 2}), probs = b.value({1, 2, 2}), ctx = b.value({1, 2, 2});
  uint32_t ctx_t = b.value({1, 2, 2}), flat = b.value({4}), head = b.value({2}), cat = b.value({6});
  uint32_t y = b.output({6});
  b.node(fb::XNodeUnion::XNNBatchMatrixMultiply, fb::CreateNode2x1(b.fbb(), q, k, scores, 1).Union());
  b.unary(fb::XNodeUnion::XNNSoftmax, scores, probs);
  b.binary(fb::XNodeUnion::XNNBatchMatrixMultiply, probs, v, ctx);
  std::vector<uint32_t> perm = {0, 2, 1}, shape = {0}, offs = {1}, sizes = {2};
  b.node(fb::XNodeUnion::XNNStaticTranspose, fb::CreateStaticTransposeDirect(b.fbb(), 3, &perm, ctx, ctx_t).Union());
  b.node(fb::XNodeUnion::XNNStaticReshape, fb::CreateStaticReshapeDirect(b.fbb(), 1, &shape, ctx_t, flat).Union());
  b.node(fb::XNodeUnion::XNNStaticSlice, fb::CreateStaticSliceDirect(b.fbb(), 1, &offs, &sizes, flat, head).Union());
  b.node(fb::XNodeUnion::XNNConcatenate2, fb::CreateCat(b.fbb(), 0, flat, head, kInvalidId, kInvalidId, cat).Union());
  b.unary(fb::XNodeUnion::XNNCopy, cat, y);
  VectorBinder out;
  // q = k = identity rows -> scores [[1,0],[0,1]]; v = [[1,2],[3,4]].
  auto st = run(b.finish(), {{{1, 2, 2}, {1, 0, 0, 1}}, {{1, 2, 2}, {1, 0, 0, 1}}, {{1, 2, 2}, {1, 2, 3, 4}}}, out);
  ASSERT_TRUE(st.is_ok()) << st.message();
  const float e = std::exp(1.0f), p = e / (e + 1), r = 1 / (e + 1);
  const std::vector<float> ctxv = {p * 1 + r * 3, p * 2 + r * 4, r * 1 + p * 3, r * 2 + p * 4};
  // transpose -> [c00, c10, c01, c11]; slice [1, 3) -> [c10, c01]
  const std::vector<float> want = {ctxv[0], ctxv[2], ctxv[1], ctxv[3], ctxv[2], ctxv[1]};
  ASSERT_EQ(out.data[3].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(out.data[3][i], want[i], 1e-6) << i;
}

// Slices in several dims at once, against plain index loops: a sliced
// innermost dim (runs of 2) and a sliced middle dim with whole rows after it.
TEST(XnnOps, StaticSliceMatchesIndexLoops) {
  struct Case {
    std::vector<uint32_t> offsets, sizes;  // size 0 = to the end
  };
  const Case cases[] = {{{1, 0, 2}, {1, 3, 2}}, {{0, 1, 0}, {2, 2, 0}}, {{0, 0, 0}, {2, 3, 4}}, {{1, 2, 3}, {1, 1, 1}}};
  const std::vector<int64_t> in_shape = {2, 3, 4};
  std::vector<float> in(24);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i) + 0.5f;
  for (const Case& c : cases) {
    std::vector<int64_t> out_shape(3);
    for (size_t d = 0; d < 3; ++d) out_shape[d] = c.sizes[d] == 0 ? in_shape[d] - c.offsets[d] : c.sizes[d];
    PayloadBuilder b;
    uint32_t x = b.input({2, 3, 4});
    uint32_t y = b.output({uint32_t(out_shape[0]), uint32_t(out_shape[1]), uint32_t(out_shape[2])});
    b.node(fb::XNodeUnion::XNNStaticSlice, fb::CreateStaticSliceDirect(b.fbb(), 3, &c.offsets, &c.sizes, x, y).Union());
    VectorBinder out;
    auto st = run(b.finish(), {{in_shape, in}}, out);
    ASSERT_TRUE(st.is_ok()) << st.message();
    std::vector<float> want;
    for (int64_t i = 0; i < out_shape[0]; ++i) {
      for (int64_t j = 0; j < out_shape[1]; ++j) {
        for (int64_t k = 0; k < out_shape[2]; ++k) {
          want.push_back(in[size_t(((i + c.offsets[0]) * 3 + j + c.offsets[1]) * 4 + k + c.offsets[2])]);
        }
      }
    }
    EXPECT_EQ(out.shapes[1], out_shape);
    EXPECT_EQ(out.data[1], want) << "offsets " << c.offsets[0] << "," << c.offsets[1] << "," << c.offsets[2];
  }
}

// Outputs large enough to split across the thread pool (with any thread
// count), against plain loops: a broadcast over the middle dim (blocks start
// mid-odometer) and same-shape operands (one block cut in pieces).
TEST(XnnOps, LargeBinaryOpsMatchLoops) {
  struct Case {
    std::vector<int64_t> a, b;
  };
  const Case cases[] = {{{33, 5, 2048}, {33, 1, 2048}}, {{300001}, {300001}}, {{7, 40000}, {1}}};
  for (const Case& c : cases) {
    auto numel = [](const std::vector<int64_t>& s) { int64_t n = 1; for (int64_t d : s) n *= d; return n; };
    std::vector<float> a(size_t(numel(c.a))), bv(size_t(numel(c.b)));
    for (size_t i = 0; i < a.size(); ++i) a[i] = float(i % 1000) * 0.5f;
    for (size_t i = 0; i < bv.size(); ++i) bv[i] = float(i % 777) + 1.0f;
    std::vector<uint32_t> da(c.a.begin(), c.a.end()), db(c.b.begin(), c.b.end());
    PayloadBuilder b;
    uint32_t x = b.input(da), w = b.input(db), y = b.output(da);
    b.binary(fb::XNodeUnion::XNNMultiply, x, w, y);
    VectorBinder out;
    auto st = run(b.finish(), {{c.a, a}, {c.b, bv}}, out);
    ASSERT_TRUE(st.is_ok()) << st.message();
    const auto& got = out.data[2];
    ASSERT_EQ(got.size(), a.size());
    const int64_t inner = c.a.back(), mid = c.a.size() == 3 ? c.a[1] : 1;
    for (size_t i = 0; i < a.size(); ++i) {
      size_t j = i;  // the b element that i reads
      if (bv.size() == 1) j = 0;
      else if (c.b.size() == 3) j = (i / size_t(inner * mid)) * size_t(inner) + i % size_t(inner);
      ASSERT_EQ(got[i], a[i] * bv[j]) << "case a rank " << c.a.size() << ", i " << i;
    }
  }
}

TEST(XnnOps, ElementwiseSet) {
  struct Case {
    fb::XNodeUnion type;
    float (*ref)(float);
  };
  const Case cases[] = {
      {fb::XNodeUnion::XNNSigmoid, [](float x) { return 1 / (1 + std::exp(-x)); }},
      {fb::XNodeUnion::XNNTanh, [](float x) { return std::tanh(x); }},
      {fb::XNodeUnion::XNNGelu, [](float x) { return 0.5f * x * (1 + std::erf(x / std::sqrt(2.0f))); }},
      {fb::XNodeUnion::XNNNegate, [](float x) { return -x; }},
      {fb::XNodeUnion::XNNExp, [](float x) { return std::exp(x); }},
      {fb::XNodeUnion::XNNSquareRoot, [](float x) { return std::sqrt(std::fabs(x)); }},
      {fb::XNodeUnion::XNNReciprocalSquareRoot, [](float x) { return 1 / std::sqrt(std::fabs(x)); }},
      {fb::XNodeUnion::XNNSquare, [](float x) { return x * x; }},
  };
  for (const Case& c : cases) {
    PayloadBuilder b;
    uint32_t x = b.input({4}), y = b.output({4});
    const bool needs_abs = c.type == fb::XNodeUnion::XNNSquareRoot || c.type == fb::XNodeUnion::XNNReciprocalSquareRoot;
    b.unary(c.type, x, y);
    std::vector<float> in = {-1.5f, -0.25f, 0.5f, 2.0f};
    if (needs_abs) for (float& f : in) f = std::fabs(f);
    VectorBinder out;
    ASSERT_TRUE(run(b.finish(), {{{4}, in}}, out).is_ok());
    for (size_t i = 0; i < in.size(); ++i) EXPECT_NEAR(out.data[1][i], c.ref(in[i]), 1e-6) << fb::EnumNameXNodeUnion(c.type);
  }
  // Clamp takes its bounds from output_min_max.
  PayloadBuilder b;
  uint32_t x = b.input({3}), y = b.output({3});
  b.node(fb::XNodeUnion::XNNClamp, fb::CreateNode1x1(b.fbb(), x, y).Union(), true, -1, 1);
  VectorBinder out;
  ASSERT_TRUE(run(b.finish(), {{{3}, {-5, 0.5f, 5}}}, out).is_ok());
  EXPECT_EQ(out.data[1], (std::vector<float>{-1, 0.5f, 1}));
}

TEST(XnnOps, BinaryBroadcastAndMinMax) {
  const std::pair<fb::XNodeUnion, std::vector<float>> cases[] = {
      {fb::XNodeUnion::XNNSubtract, {0, 1, 2, -4, -3, -2}},
      {fb::XNodeUnion::XNNDiv, {1, 2, 3, 0.5f, 0.625f, 0.75f}},
      {fb::XNodeUnion::XNNMinimum, {1, 1, 1, 4, 5, 6}},
      {fb::XNodeUnion::XNNMaximum, {1, 2, 3, 8, 8, 8}},
  };
  for (const auto& [type, want] : cases) {
    PayloadBuilder b;
    uint32_t a = b.input({2, 3}), c = b.input({2, 1}), y = b.output({2, 3});
    b.binary(type, a, c, y);
    VectorBinder out;
    ASSERT_TRUE(run(b.finish(), {{{2, 3}, {1, 2, 3, 4, 5, 6}}, {{2, 1}, {1, 8}}}, out).is_ok());
    EXPECT_EQ(out.data[2], want) << fb::EnumNameXNodeUnion(type);
  }
  PayloadBuilder b;
  uint32_t a = b.input({2, 3}), c = b.input({2, 2}), y = b.output({2, 3});
  b.binary(fb::XNodeUnion::XNNAdd, a, c, y);
  VectorBinder out;
  auto st = run(b.finish(), {{{2, 3}, std::vector<float>(6)}, {{2, 2}, std::vector<float>(4)}}, out);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.message();
}

TEST(XnnOps, BinaryBroadcastBlocksMatchIndexMath) {
  // Every broadcast layout an LLM graph uses (bias row, per-row scale, scalar,
  // a middle broadcast dim, both operands broadcast), against the numpy rule
  // written out per element in double.
  const std::vector<std::pair<std::vector<uint32_t>, std::vector<uint32_t>>> shapes = {
      {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}},       {{2, 3, 4}, {2, 3, 1}}, {{2, 3, 4}, {1}},
      {{2, 3, 4}, {2, 1, 4}}, {{2, 1, 4}, {1, 3, 1}}, {{1}, {2, 3, 4}},       {{3, 1}, {2, 3, 4}},
      {{2, 3, 4}, {1, 3, 4}}, {{2, 3, 4}, {3, 1}},
  };
  for (const auto& [sa, sb] : shapes) {
    const size_t rank = std::max(sa.size(), sb.size());
    std::vector<uint32_t> so(rank);
    auto dim = [&](const std::vector<uint32_t>& s, size_t d) { return d + s.size() >= rank ? s[d + s.size() - rank] : 1u; };
    for (size_t d = 0; d < rank; ++d) so[d] = std::max(dim(sa, d), dim(sb, d));
    auto count = [](const std::vector<uint32_t>& s) { size_t n = 1; for (auto d : s) n *= d; return n; };
    std::vector<float> a(count(sa)), c(count(sb));
    for (size_t i = 0; i < a.size(); ++i) a[i] = 0.5f + float(i) * 0.25f;
    for (size_t i = 0; i < c.size(); ++i) c[i] = 1.0f + float(i) * 0.125f;
    PayloadBuilder b;
    uint32_t x = b.input(sa), y = b.input(sb), out = b.output(so);
    b.binary(fb::XNodeUnion::XNNMultiply, x, y, out);
    VectorBinder got;
    auto i64 = [](const std::vector<uint32_t>& s) { return std::vector<int64_t>(s.begin(), s.end()); };
    auto st = run(b.finish(), {{i64(sa), a}, {i64(sb), c}}, got);
    ASSERT_TRUE(st.is_ok()) << st.message();
    ASSERT_EQ(got.data[2].size(), count(so));
    // Reference: offset of output index idx in an operand of shape s.
    auto offset = [&](const std::vector<uint32_t>& s, const std::vector<size_t>& idx) {
      size_t off = 0;
      for (size_t d = 0; d < rank; ++d) {
        if (d + s.size() < rank) continue;
        const uint32_t n = s[d + s.size() - rank];
        off = off * n + (n == 1 ? 0 : idx[d]);
      }
      return off;
    };
    std::vector<size_t> idx(rank, 0);
    for (size_t i = 0; i < count(so); ++i) {
      const double want = double(a[offset(sa, idx)]) * double(c[offset(sb, idx)]);
      EXPECT_EQ(got.data[2][i], float(want)) << "output " << i << " of [" << sa.size() << "-d] x [" << sb.size() << "-d]";
      for (size_t d = rank; d-- > 0;) {
        if (++idx[d] < so[d]) break;
        idx[d] = 0;
      }
    }
  }
}

TEST(XnnOps, ReshapeRejectsHostileShapes) {
  PayloadBuilder b;
  uint32_t x = b.input({4}), y = b.output({4});
  std::vector<uint32_t> shape = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};
  b.node(fb::XNodeUnion::XNNStaticReshape, fb::CreateStaticReshapeDirect(b.fbb(), 3, &shape, x, y).Union());
  VectorBinder out;
  EXPECT_FALSE(run(b.finish(), {{{4}, {1, 2, 3, 4}}}, out).is_ok());
}

}  // namespace
}  // namespace hf2pte::xnn

namespace hf2pte::xnn {
namespace {

/// x [1, 3] -> qdint8 (per row) -> FullyConnected with a qcint4 filter [2, 3]
/// (rows [1, -2, 3] and [-8, 7, 0], scales [0.5, 0.25]) -> y [1, 2], with x
/// and y fp16 inside the graph when `fp16` (upstream's fp16 8da4w form, run by
/// XNNPACK's qd8-f16 kernels). Runs it on x = [0, 1, 2].
std::vector<float> run_dynamic_int4_fc(bool fp16) {
  PayloadBuilder b;
  const auto f16 = fb::XNNDatatype::fp16;
  uint32_t x = b.input({1, 3});
  uint32_t xin = fp16 ? b.value({1, 3}, kInvalidId, 0, {}, f16) : x;
  auto tok = fb::CreatePerTokenDynamicQuant(b.fbb(), 1);
  uint32_t xq = b.qvalue(fb::XNNDatatype::qdint8, {1, 3}, fb::XNNQuantParams::PerTokenDynamicQuant, tok.Union());
  std::vector<float> scales = {0.5f, 0.25f};
  auto pc = fb::CreatePerChannelQuantDirect(b.fbb(), &scales, 0);
  // +8, low nibble first, ic padded to even.
  uint32_t w = b.qvalue(fb::XNNDatatype::qcint4, {2, 3}, fb::XNNQuantParams::PerChannelQuant, pc.Union(),
                        {0x69, 0x0B, 0xF0, 0x08});
  uint32_t yout = fp16 ? b.value({1, 2}, kInvalidId, 0, {}, f16) : kInvalidId;
  uint32_t y = b.output({1, 2});
  if (fp16) b.unary(fb::XNodeUnion::XNNConvert, x, xin);
  b.unary(fb::XNodeUnion::XNNConvert, xin, xq);
  b.node(fb::XNodeUnion::XNNFullyConnected,
         fb::CreateFullyConnected(b.fbb(), xq, w, kInvalidId, fp16 ? yout : y).Union());
  if (fp16) b.unary(fb::XNodeUnion::XNNConvert, yout, y);
  VectorBinder out;
  auto st = run(b.finish(), {{{1, 3}, {0, 1, 2}}}, out);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return out.data[1];
}

// x row [0, 1, 2] quantizes with scale 2/255: 1 -> 128 steps = 1.0039.
constexpr float kX1 = 128.0f * 2.0f / 255.0f;

TEST(XnnOps, DynamicQuantInt4FullyConnected) {
  const auto y = run_dynamic_int4_fc(false);
  ASSERT_EQ(y.size(), 2u);
  EXPECT_NEAR(y[0], (-2 * kX1 + 3 * 2) * 0.5f, 1e-5);
  EXPECT_NEAR(y[1], (7 * kX1) * 0.25f, 1e-5);
}

// From fp16: the quantization reads the exact fp32 values and the result is
// rounded once to fp16.
TEST(XnnOps, DynamicQuantFromFp16) {
  const auto h = [](float f) { return half_to_float(float_to_half(f)); };
  const auto y = run_dynamic_int4_fc(true);
  ASSERT_EQ(y.size(), 2u);
  EXPECT_NEAR(y[0], h((-2 * kX1 + 3 * 2) * 0.5f), 1e-6);
  EXPECT_NEAR(y[1], h((7 * kX1) * 0.25f), 1e-6);
  EXPECT_NE(y[1], (7 * kX1) * 0.25f);  // really rounded to fp16
}

TEST(XnnOps, BlockwiseInt4FullyConnected) {
  PayloadBuilder b;
  uint32_t x = b.input({1, 4});
  std::vector<float> scales = {1.0f, 0.5f, 2.0f, 0.25f};  // [oc=2, ic/group=2], exact in bf16
  auto gq = fb::CreatePerChannelGroupQuantDirect(b.fbb(), &scales, 0, 2);
  // rows [1, -2, 3, 4] and [-8, 7, 0, 1]
  uint32_t w = b.qvalue(fb::XNNDatatype::qbint4, {2, 4}, fb::XNNQuantParams::PerChannelGroupQuant, gq.Union(),
                        {0x69, 0xCB, 0xF0, 0x98});
  uint32_t y = b.output({1, 2});
  b.node(fb::XNodeUnion::XNNFullyConnected, fb::CreateFullyConnected(b.fbb(), x, w, kInvalidId, y).Union());
  VectorBinder out;
  auto st = run(b.finish(), {{{1, 4}, {1, 1, 1, 1}}}, out);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(out.data[1], (std::vector<float>{2.5f, -1.75f}));
}

/// fp32 -> qdint8 with the reference runner's rounding (one row of `k`).
std::vector<float> fake_quant_rows(const std::vector<float>& x, size_t k) {
  std::vector<float> out(x.size());
  for (size_t r0 = 0; r0 < x.size(); r0 += k) {
    float lo = 0.0f, hi = 0.0f;
    for (size_t i = 0; i < k; ++i) lo = std::min(lo, x[r0 + i]), hi = std::max(hi, x[r0 + i]);
    const float inv = lo == hi ? 1.0f : 255.0f / (hi - lo);
    float zp = (-128.0f + lo * inv) + (127.0f + hi * inv) > 0 ? -128.0f - lo * inv : 127.0f - hi * inv;
    zp = std::nearbyint(std::clamp(zp, -128.0f, 127.0f));
    for (size_t i = 0; i < k; ++i) {
      out[r0 + i] = (std::clamp(std::nearbyint(x[r0 + i] * inv) + zp, -128.0f, 127.0f) - zp) * (1.0f / inv);
    }
  }
  return out;
}

// Each quantized filter type runs on the packed kernels (and the qdint8
// Convert read only by FullyConnected nodes is fused into them): results
// match dequantized filters x fake-quantized activations, summed in double.
TEST(XnnOps, QuantizedFullyConnectedKernelsMatchDequantizedMath) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> v8(-128, 127), v4(-8, 7);
  const uint32_t M = 5, K = 96, N = 37, G = 32;
  for (fb::XNNDatatype wt : {fb::XNNDatatype::qcint8, fb::XNNDatatype::qcint4, fb::XNNDatatype::qbint4}) {
    for (bool dynamic : {false, true}) {
      PayloadBuilder b;
      uint32_t x = b.input({M, K});
      uint32_t xin = x;
      if (dynamic) {
        auto tok = fb::CreatePerTokenDynamicQuant(b.fbb(), 1);
        xin = b.qvalue(fb::XNNDatatype::qdint8, {M, K}, fb::XNNQuantParams::PerTokenDynamicQuant, tok.Union());
      }
      std::vector<float> deq(size_t(N) * K), scales;
      std::vector<uint8_t> bytes;
      uint32_t w;
      if (wt == fb::XNNDatatype::qcint8) {
        for (uint32_t r = 0; r < N; ++r) scales.push_back(0.01f + 0.001f * float(r));
        for (uint32_t i = 0; i < N * K; ++i) {
          const int v = v8(rng);
          bytes.push_back(uint8_t(int8_t(v)));
          deq[i] = float(v) * scales[i / K];
        }
        auto pc = fb::CreatePerChannelQuantDirect(b.fbb(), &scales, 0);
        w = b.qvalue(wt, {N, K}, fb::XNNQuantParams::PerChannelQuant, pc.Union(), bytes);
      } else {
        const bool blocks = wt == fb::XNNDatatype::qbint4;
        const uint32_t ns = blocks ? N * (K / G) : N;
        for (uint32_t i = 0; i < ns; ++i) scales.push_back(0.015625f * float(1 + i % 7));  // exact in bf16
        bytes.assign(size_t(N) * K / 2, 0);
        for (uint32_t i = 0; i < N * K; ++i) {
          const int v = v4(rng);
          bytes[i / 2] |= uint8_t((v + 8) << (i % 2 ? 4 : 0));
          deq[i] = float(v) * (blocks ? scales[(i / K) * (K / G) + (i % K) / G] : scales[i / K]);
        }
        if (blocks) {
          auto gq = fb::CreatePerChannelGroupQuantDirect(b.fbb(), &scales, 0, G);
          w = b.qvalue(wt, {N, K}, fb::XNNQuantParams::PerChannelGroupQuant, gq.Union(), bytes);
        } else {
          auto pc = fb::CreatePerChannelQuantDirect(b.fbb(), &scales, 0);
          w = b.qvalue(wt, {N, K}, fb::XNNQuantParams::PerChannelQuant, pc.Union(), bytes);
        }
      }
      std::vector<float> bias(N);
      for (auto& v : bias) v = nd(rng);
      uint32_t bv = b.value({N}, kInvalidId, 0, bias);
      uint32_t y = b.output({M, N});
      if (dynamic) b.unary(fb::XNodeUnion::XNNConvert, x, xin);
      b.node(fb::XNodeUnion::XNNFullyConnected, fb::CreateFullyConnected(b.fbb(), xin, w, bv, y).Union());
      const auto blob = b.finish();
      std::vector<float> xs(size_t(M) * K);
      for (auto& v : xs) v = nd(rng);

      auto g = compile_payload(blob, nullptr);
      ASSERT_TRUE(g.is_ok()) << g.status().message();
      const auto* fc = std::get_if<FullyConnectedParams>(&g->nodes.back().params);
      ASSERT_NE(fc, nullptr);
      EXPECT_NE(fc->qfilter, nullptr) << "packed for the quantized kernels";
      EXPECT_TRUE(fc->weights.empty()) << "no dequantized float copy";
      if (dynamic) {
        EXPECT_TRUE(std::get<UnaryParams>(g->nodes.front().params).fused);
      }

      VectorBinder out;
      auto st = run(blob, {{{M, K}, xs}}, out);
      ASSERT_TRUE(st.is_ok()) << st.message();
      const std::vector<float> xq = dynamic ? fake_quant_rows(xs, K) : xs;
      for (uint32_t r = 0; r < M; ++r) {
        for (uint32_t c = 0; c < N; ++c) {
          double s = bias[c], mag = std::fabs(bias[c]);
          for (uint32_t i = 0; i < K; ++i) {
            s += double(xq[r * K + i]) * deq[c * K + i];
            mag += std::fabs(double(xq[r * K + i]) * deq[c * K + i]);
          }
          ASSERT_NEAR(out.data[1][r * N + c], s, 1e-5 * mag + 1e-6)
              << fb::EnumNameXNNDatatype(wt) << (dynamic ? " dynamic" : " weight-only") << " r=" << r << " c=" << c;
        }
      }
    }
  }
}

}  // namespace
}  // namespace hf2pte::xnn

namespace hf2pte::xnn {
namespace {

// A strided-view input (Tensor::set_strided_view: rows 0..3 of each batch of
// a [2, 6, 3] cache, as the Method binds written-span attention's K/V slices)
// through the backend: a batch matmul reads it in place; any other reader
// gets a contiguous copy made at bind time. Same numbers either way.
TEST(XnnBackend, StridedViewInputsAreReadInPlaceOrCompacted) {
  std::vector<float> cache(2 * 6 * 3);
  for (size_t i = 0; i < cache.size(); ++i) cache[i] = float(i % 7) - 2.5f;
  const std::vector<int64_t> view_sizes{2, 4, 3}, view_strides{18, 3, 1};
  auto cached = [&](int64_t b, int64_t r, int64_t c) { return cache[size_t(b * 18 + r * 3 + c)]; };
  for (bool matmul : {true, false}) {
    PayloadBuilder b;
    uint32_t q = matmul ? b.input({2, 1, 3}) : kInvalidId;
    uint32_t k = b.input({2, 4, 3});
    uint32_t y = b.output(matmul ? std::vector<uint32_t>{2, 1, 4} : std::vector<uint32_t>{2, 4, 3});
    if (matmul) {
      b.node(fb::XNodeUnion::XNNBatchMatrixMultiply, fb::CreateNode2x1(b.fbb(), q, k, y, 1).Union());
    } else {
      b.unary(fb::XNodeUnion::XNNNegate, k, y);
    }
    const auto blob = b.finish();
    XnnpackBackend backend;
    auto handle = backend.init(rt::BackendInitContext{}, blob, {});
    ASSERT_TRUE(handle.is_ok()) << handle.status().message();

    std::vector<float> qv = {1.0f, -2.0f, 0.5f, 3.0f, 0.25f, -1.0f};
    std::vector<float> own(2 * 6 * 3, 0.0f), out(2 * 4 * 3, -9.0f);
    rt::Tensor qt(ScalarType::kFloat, {2, 1, 3}, {}, qv.data(), qv.size() * 4, rt::ShapeDynamism::kStatic);
    rt::Tensor kt(ScalarType::kFloat, {2, 4, 3}, {}, own.data(), own.size() * 4, rt::ShapeDynamism::kDynamicBound);
    kt.set_strided_view(cache.data(), view_sizes, view_strides);
    rt::Tensor yt(ScalarType::kFloat, matmul ? std::vector<int64_t>{2, 1, 4} : std::vector<int64_t>{2, 4, 3}, {},
                  out.data(), out.size() * 4, rt::ShapeDynamism::kDynamicBound);
    rt::EValue ev[3];
    for (auto& e : ev) e.tag = rt::Tag::kTensor;
    ev[0].tensor = &qt, ev[1].tensor = &kt, ev[2].tensor = &yt;
    std::vector<rt::EValue*> args = matmul ? std::vector<rt::EValue*>{&ev[0], &ev[1], &ev[2]}
                                           : std::vector<rt::EValue*>{&ev[1], &ev[2]};
    auto st = backend.execute(**handle, args);
    ASSERT_TRUE(st.is_ok()) << st.message();
    for (int64_t bi = 0; bi < 2; ++bi) {
      for (int64_t r = 0; r < 4; ++r) {
        if (matmul) {
          float want = 0;
          for (int64_t c = 0; c < 3; ++c) want += qv[size_t(bi * 3 + c)] * cached(bi, r, c);
          EXPECT_FLOAT_EQ(out[size_t(bi * 4 + r)], want) << bi << "," << r;
        } else {
          for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(out[size_t((bi * 4 + r) * 3 + c)], -cached(bi, r, c));
        }
      }
    }
    EXPECT_TRUE(std::all_of(own.begin(), own.end(), [](float v) { return v == 0.0f; }));  // never written
  }
}

}  // namespace
}  // namespace hf2pte::xnn
