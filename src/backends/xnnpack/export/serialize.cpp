#include "backends/xnnpack/export/serialize.h"

#include <cstring>

namespace hf2pte::xnn {

namespace fbx = fb_xnnpack;

namespace {

flatbuffers::Offset<void> node_params(flatbuffers::FlatBufferBuilder& b, const XnnNodeSpec& n) {
  auto id = [&](size_t i) { return i < n.ids.size() ? n.ids[i] : kXnnInvalidId; };
  using K = fbx::XNodeUnion;
  switch (n.kind) {
    case K::XNNFullyConnected:
      return fbx::CreateFullyConnected(b, id(0), id(1), id(2), id(3), n.flags).Union();
    case K::XNNAdd: case K::XNNSubtract: case K::XNNMultiply: case K::XNNDiv: case K::XNNMinimum:
    case K::XNNMaximum: case K::XNNBatchMatrixMultiply:
      return fbx::CreateNode2x1(b, id(0), id(1), id(2), n.flags).Union();
    case K::XNNStaticTranspose:
      return fbx::CreateStaticTranspose(b, uint32_t(n.list1.size()), b.CreateVector(n.list1), id(0), id(1), n.flags).Union();
    case K::XNNStaticReshape:
      return fbx::CreateStaticReshape(b, uint32_t(n.list1.size()), b.CreateVector(n.list1), id(0), id(1), n.flags).Union();
    case K::XNNStaticSlice: {
      auto offsets = b.CreateVector(n.list1);
      auto sizes = b.CreateVector(n.list2);
      return fbx::CreateStaticSlice(b, uint32_t(n.list1.size()), offsets, sizes, id(0), id(1), n.flags).Union();
    }
    case K::XNNConcatenate2: case K::XNNConcatenate3: case K::XNNConcatenate4: case K::XNNConcatenate5: {
      // Unused input slots are written 0xFFFFFFFF (§7, Concatenate2..5).
      size_t k = n.ids.size() - 1;
      auto in = [&](size_t i) { return i < k ? n.ids[i] : kXnnInvalidId; };
      return fbx::CreateCat(b, n.axis, in(0), in(1), in(2), in(3), n.ids.back(), n.flags, in(4)).Union();
    }
    case K::XNNConv2d: {
      const XnnWindowSpec& w = n.window;
      return fbx::CreateNodeConv(b, w.padding_top, w.padding_right, w.padding_bottom, w.padding_left, w.kernel_height,
                                 w.kernel_width, w.stride_height, w.stride_width, w.dilation_height, w.dilation_width,
                                 w.group_input_channels, w.group_output_channels, w.groups, 0, 0, id(0), id(1), id(2),
                                 id(3), n.flags)
          .Union();
    }
    case K::XNNMaxPooling2d: {
      const XnnWindowSpec& w = n.window;
      return fbx::CreatePooling2D(b, w.padding_top, w.padding_right, w.padding_bottom, w.padding_left, w.kernel_height,
                                  w.kernel_width, w.stride_height, w.stride_width, w.dilation_height, w.dilation_width,
                                  id(0), id(1), n.flags)
          .Union();
    }
    default:  // Node1x1 kinds (GlobalAvgPooling2d included)
      return fbx::CreateNode1x1(b, id(0), id(1), n.flags).Union();
  }
}

// Scales always come from named data; the inline `scale` vectors are written
// empty (the runtime dereferences them, §10 item 8).
std::pair<fbx::XNNQuantParams, flatbuffers::Offset<void>> quant_params(flatbuffers::FlatBufferBuilder& b,
                                                                       const XnnQuantSpec& q) {
  using Kind = XnnQuantSpec::Kind;
  switch (q.kind) {
    case Kind::kPerTokenDynamic:
      return {fbx::XNNQuantParams::PerTokenDynamicQuant, fbx::CreatePerTokenDynamicQuant(b, q.num_nonbatch_dims).Union()};
    case Kind::kPerChannel:
      return {fbx::XNNQuantParams::PerChannelQuant,
              fbx::CreatePerChannelQuant(b, b.CreateVector(std::vector<float>{}), 0, q.scale_buffer_idx, q.num_scales).Union()};
    default:
      return {fbx::XNNQuantParams::PerChannelGroupQuant,
              fbx::CreatePerChannelGroupQuant(b, b.CreateVector(std::vector<float>{}), 0, q.group_size, 0,
                                              q.scale_buffer_idx, q.num_scales).Union()};
  }
}

void put_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
void put_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
void put_u64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }

}  // namespace

std::vector<uint8_t> serialize_xnn_payload(const XnnSubgraph& s) {
  flatbuffers::FlatBufferBuilder b(4096);
  std::vector<flatbuffers::Offset<fbx::XValue>> values;
  std::vector<uint32_t> input_ids, output_ids;
  for (size_t i = 0; i < s.values.size(); ++i) {
    const auto& v = s.values[i];
    auto dims = b.CreateVector(v.dims.empty() ? std::vector<uint32_t>{1} : v.dims);  // rank 0 -> [1]
    auto tv = fbx::CreateXNNTensorValue(b, v.datatype, uint32_t(v.dims.empty() ? 1 : v.dims.size()), dims,
                                        v.constant_idx, v.external_id, v.flags, uint32_t(i));
    if (v.quant.kind == XnnQuantSpec::Kind::kNone) {
      values.push_back(fbx::CreateXValue(b, fbx::XValueUnion::XNNTensorValue, tv.Union()));
    } else {
      auto [type, params] = quant_params(b, v.quant);
      auto qv = fbx::CreateXNNQuantizedTensorValue(b, tv, type, params);
      values.push_back(fbx::CreateXValue(b, fbx::XValueUnion::XNNQuantizedTensorValue, qv.Union()));
    }
    if (v.flags == 1) input_ids.push_back(uint32_t(i));
    if (v.flags == 2) output_ids.push_back(uint32_t(i));
  }
  std::vector<flatbuffers::Offset<fbx::XNode>> nodes;
  for (const auto& n : s.nodes) {
    auto params = node_params(b, n);
    flatbuffers::Offset<fbx::OutputMinMax> om;
    if (n.output_min_max) om = fbx::CreateOutputMinMax(b, n.output_min_max->first, n.output_min_max->second);
    nodes.push_back(fbx::CreateXNode(b, n.kind, params, n.debug_handle, om));
  }
  std::vector<flatbuffers::Offset<fbx::ConstantDataOffset>> constants;
  constants.push_back(fbx::CreateConstantDataOffset(b, 0, 0, b.CreateString("")));  // entry 0: placeholder
  for (const auto& c : s.constants) {
    constants.push_back(fbx::CreateConstantDataOffset(b, UINT64_MAX, c.size, b.CreateString(c.key)));
  }
  auto version = b.CreateString("0");
  auto xnodes = b.CreateVector(nodes);
  auto xvalues = b.CreateVector(values);
  auto ins = b.CreateVector(input_ids);
  auto outs = b.CreateVector(output_ids);
  auto cdata = b.CreateVector(constants);
  fbx::XNNGraphBuilder g(b);
  g.add_version(version);
  g.add_xnodes(xnodes);
  g.add_xvalues(xvalues);
  g.add_num_externs(s.num_externs);
  g.add_input_ids(ins);
  g.add_output_ids(outs);
  g.add_constant_data(cdata);
  b.Finish(g.Finish(), fbx::XNNGraphIdentifier());

  // XH00 header (§2): zeros, magic, u16 30, fb offset/size, constant offset/size.
  const uint32_t fb_size = b.GetSize();
  const uint32_t const_off = 32 + ((fb_size + 15) & ~15u);
  std::vector<uint8_t> blob(const_off, 0);
  std::memcpy(blob.data() + 4, "XH00", 4);
  put_u16(blob.data() + 8, 30);
  put_u32(blob.data() + 10, 32);
  put_u32(blob.data() + 14, fb_size);
  put_u32(blob.data() + 18, const_off);
  put_u64(blob.data() + 22, 0);
  std::memcpy(blob.data() + 32, b.GetBufferPointer(), fb_size);
  return blob;
}

}  // namespace hf2pte::xnn
