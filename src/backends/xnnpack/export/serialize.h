// The XNNPACK payload writer: a plain description of one lowered subgraph
// (values, constants, nodes) -> the XH00 blob (32-byte header + XN01
// flatbuffer built with our schema xnnpack.fbs, empty constant region), as
// upstream 1.3.x writes it (docs/xnnpack-payload.md §2, §4, §10). Free of the
// graph IR: the partitioner (partition.cpp) fills the description.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/xnnpack/xnnpack_generated.h"

namespace hf2pte::xnn {

inline constexpr uint32_t kXnnInvalidId = 0xFFFFFFFFu;

/// Quantization parameters of a value (docs/xnnpack-payload.md §4.4, §6.2).
/// Scales live in named data (`scale_buffer_idx`), as upstream writes them.
struct XnnQuantSpec {
  enum class Kind { kNone, kPerTokenDynamic, kPerChannel, kPerChannelGroup } kind = Kind::kNone;
  uint32_t scale_buffer_idx = 0;  ///< constant_data index of the scales (fp32 per channel, bf16 per group)
  uint32_t num_scales = 0;
  int32_t group_size = 0;         ///< kPerChannelGroup
  int32_t num_nonbatch_dims = 1;  ///< kPerTokenDynamic
};

/// One XNNTensorValue (or XNNQuantizedTensorValue when `quant` is set).
/// `id_out` = its position in XnnSubgraph::values.
struct XnnValueSpec {
  std::vector<uint32_t> dims;             ///< XNNPACK order (= our dim order), bounds for symbolic dims
  uint32_t external_id = kXnnInvalidId;   ///< DelegateCall arg position, or kXnnInvalidId
  uint32_t flags = 0;                     ///< 1 external input, 2 external output
  uint32_t constant_idx = 0;              ///< index into XnnSubgraph::constants (+1), 0 = none
  fb_xnnpack::XNNDatatype datatype = fb_xnnpack::XNNDatatype::fp32;
  XnnQuantSpec quant{};
};

/// One ConstantDataOffset in Program.named_data: {UINT64_MAX, size, key}.
struct XnnNamedConstantSpec {
  std::string key;
  uint64_t size = 0;
};

/// The window fields of NodeConv (Conv2d) and Pooling2D (MaxPooling2d) nodes.
struct XnnWindowSpec {
  uint32_t padding_top = 0, padding_right = 0, padding_bottom = 0, padding_left = 0;
  uint32_t kernel_height = 1, kernel_width = 1;
  uint32_t stride_height = 1, stride_width = 1;  ///< NodeConv's subsampling
  uint32_t dilation_height = 1, dilation_width = 1;
  uint32_t groups = 1, group_input_channels = 0, group_output_channels = 0;  ///< NodeConv only
};

/// One node. `ids` are value ids: Node1x1 (input, output), Node2x1 (input1,
/// input2, output), FullyConnected and Conv2d (input, filter, bias or
/// kXnnInvalidId, output), Cat (inputs..., output), StaticTranspose/Reshape/
/// Slice and MaxPooling2d (input, output).
struct XnnNodeSpec {
  fb_xnnpack::XNodeUnion kind = fb_xnnpack::XNodeUnion::NONE;
  std::vector<uint32_t> ids;
  uint32_t flags = 0;
  std::vector<uint32_t> list1;  ///< perm / new_shape / offsets
  std::vector<uint32_t> list2;  ///< sizes (StaticSlice)
  uint32_t axis = 0;            ///< Cat
  XnnWindowSpec window{};       ///< Conv2d, MaxPooling2d
  std::optional<std::pair<float, float>> output_min_max;
  uint32_t debug_handle = 65535;
};

struct XnnSubgraph {
  std::vector<XnnValueSpec> values;
  std::vector<XnnNamedConstantSpec> constants;  ///< constant_data[1..]; [0] is the placeholder
  std::vector<XnnNodeSpec> nodes;
  uint32_t num_externs = 0;
};

/// XH00 header + XN01 flatbuffer (padded to 16) + empty constant region.
std::vector<uint8_t> serialize_xnn_payload(const XnnSubgraph& s);

}  // namespace hf2pte::xnn
