// XnnGraph: an XNNPACK delegate payload compiled into hf2pte's own executable
// form. Built once at Backend::init from the verified flatbuffer; every id,
// index and constant reference is validated there so execute() only does
// shape propagation and arithmetic (docs/xnnpack-payload.md §6-§8).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/weight_store.h"
#include "core/status.h"
#include "kernels/optimized/nhwc.h"
#include "kernels/optimized/qgemm.h"

namespace hf2pte::pte {
class PteFile;
}

namespace hf2pte::xnn {

/// Element types we execute (a subset of fb_xnnpack::XNNDatatype, same numbers).
enum class XDtype : int16_t {
  kFp32 = 1,
  kFp16 = 2,  ///< fp16 graphs: computing nodes run in fp32 between Converts (Compiler::resolve)
  kQInt8 = 3,
  kQUInt8 = 4,
  kQInt32 = 5,
  kQCInt8 = 6,
  kQCInt32 = 7,
  kQCInt4 = 8,  ///< constant filters only: [oc, ic] packed two per byte, low nibble first, +8
  kQDInt8 = 9,  ///< dynamic per-row int8; held as float on its int8 grid (see XValue)
  kQBInt4 = 10,  ///< constant filters only: like qcint4 with per-block bf16 scales
  kInt32 = 12,
};

/// Short name for messages ("fp32", "qint8", ...).
std::string_view xdtype_name(XDtype t);
/// Bytes per element.
size_t xdtype_size(XDtype t);

/// "No value" in optional id slots (bias, unused concat inputs).
inline constexpr uint32_t kInvalidId = 0xFFFFFFFFu;
/// Upper bound on externals, as the upstream runtime enforces.
inline constexpr uint32_t kMaxExterns = 4096;
/// Highest rank XNNPACK accepts (XNN_MAX_TENSOR_DIMS).
inline constexpr size_t kMaxRank = 6;

/// One value of the subgraph. `dims` are the serialized (upper-bound) dims;
/// `shape`/`data` are the current ones, rebound by every execute.
struct XValue {
  XDtype dtype = XDtype::kFp32;
  std::vector<int64_t> dims;
  float scale = 1.0f;                ///< per-tensor quantization
  int32_t zero_point = 0;
  std::vector<float> channel_scales;  ///< per-channel quantization (qcint8/qcint32)
  int32_t channel_dim = 0;
  /// qdint8: trailing dims that form one quantization row. qdint8 values are
  /// stored as float already rounded to their row's int8 grid, so the float
  /// GEMM that consumes them equals XNNPACK's integer GEMM up to fp32 rounding.
  int32_t num_nonbatch_dims = 0;
  int32_t group_size = 0;           ///< qbint4 block size along dim 1
  std::vector<float> block_scales;  ///< qbint4 [oc, ic / group_size], bf16-rounded
  uint32_t external_id = kInvalidId;  ///< index into the DelegateCall args
  /// An fp32 value the compiler added for fp16 value `widened_from` (its
  /// computing readers and writer run in fp32; Compiler::resolve).
  uint32_t widened_from = kInvalidId;
  bool is_input = false;
  bool is_output = false;
  /// Node index of the forwarded StaticReshape (ReshapeParams::forwarded)
  /// that is this internal value's only reader: the value is stored in that
  /// reshape's external output, not in scratch.
  uint32_t forwarded_by = kInvalidId;
  /// External rank-3 inputs that only BatchMatrixMultiply nodes read, as their
  /// second operand: bound in place when the tensor is a strided view whose
  /// batches are apart (mark_batch_strided_inputs; the K/V cache rows of
  /// written-span attention).
  bool takes_batch_stride = false;
  /// Constant bytes copied out of the program at init (8-byte aligned storage,
  /// so typed reads are valid whatever the segment alignment was) when they
  /// cannot be read in place.
  std::vector<uint64_t> constant;
  /// The constant's bytes: in the program's mapped named data when that is
  /// 8-byte aligned (no copy; the file outlives the delegate), else `constant`.
  const void* cptr = nullptr;
  bool is_constant = false;
  // Run-time state.
  std::vector<int64_t> shape;
  void* data = nullptr;
  /// Elements between consecutive dim-0 blocks when bound to such a view (0:
  /// contiguous, the only form any other node sees).
  int64_t batch_stride = 0;

  /// Quantization scale of channel `c` (per-tensor values ignore `c`).
  float scale_of(int64_t c) const {
    return channel_scales.empty() ? scale : channel_scales[size_t(c)];
  }
};

/// Largest buffer an internal value may need. Shapes derive from hostile
/// new_shape / padding fields, so this bounds what a payload can allocate.
constexpr uint64_t kMaxValueBytes = uint64_t(1) << 32;

/// Node kinds we execute. Elementwise unary kinds share UnaryParams.
enum class UnaryKind : uint8_t {
  kSigmoid, kTanh, kGelu, kClamp, kNeg, kExp, kSqrt, kRsqrt, kSquare, kAbs, kFloor, kCeil,
  kLog, kSin, kCos, kHardswish, kLeakyRelu, kElu, kCopy, kConvert,
};
enum class BinaryKind : uint8_t { kAdd, kSub, kMul, kDiv, kMin, kMax };

struct UnaryParams {
  UnaryKind kind;
  uint32_t input, output;
  float alpha = 0.0f;  ///< LeakyReLU slope / ELU alpha
  /// A qdint8 Convert whose every reader quantizes its fp32 input inside its
  /// own kernel (FullyConnectedParams::dynamic): not run.
  bool fused = false;
};
struct BinaryParams {
  BinaryKind kind;
  uint32_t input1, input2, output;
};
/// y = x·Wᵀ + b. fp32 and fp16 filters are read in place in their serialized
/// layout; qcint8 / qcint4 / qbint4 ones are packed for the quantized kernels
/// (kernels/optimized/qgemm.h; the dequantized [n, k] float filter is the
/// fallback for layouts they do not take); static int8 ones repacked.
struct FullyConnectedParams {
  uint32_t input, filter, bias, output;
  int64_t n = 0, k = 0;
  bool quantized = false;        ///< qint8 input/output: integer accumulation
  std::vector<float> weights;    ///< [n, k] packed at init, float path, when not read in place
  /// fp32 filters read in place from the program (no copy); one is set
  /// exactly when `weights` is empty on the fp32 float path.
  const float* weights_nk = nullptr;  ///< serialized [n, k] (XNNPACK's default layout, what hf2pte writes)
  const float* weights_kn = nullptr;  ///< serialized [k, n] (the transpose flag)
  /// With WeightPlacement::kHugePages: the copy (same layout) one of the
  /// in-place pointers points into (held here).
  rt::WeightBlock huge_copy;
  /// fp16 filters, converted to float inside the GEMV, read in place in
  /// their serialized layout: [n, k], or [k, n] with the transpose flag
  /// (hf2pte writes long-input filters so, docs/decisions.md "K-major filters").
  const uint16_t* weights_nk_f16 = nullptr;
  const uint16_t* weights_kn_f16 = nullptr;
  std::vector<float> bias_f;     ///< [n] or empty, float path
  /// Quantized filters packed once for the qgemm kernels (null otherwise).
  std::shared_ptr<const kernels::QFilter> qfilter;
  /// qdint8 input: `input` is then the fp32 value the Convert read, quantized
  /// per row inside the kernel with the same parameters, `quant_dims` trailing
  /// dims per quantization row (the qdint8 value's num_nonbatch_dims).
  bool dynamic = false;
  int32_t quant_dims = 1;
  std::vector<int8_t> weights_q;  ///< [n, k], quantized path
  std::vector<int32_t> bias_q;    ///< [n] or empty, quantized path
  std::vector<float> requant;     ///< [n]: in_scale * w_scale[c] / out_scale
  int32_t weight_zero_point = 0;
};
struct BatchMatMulParams {
  uint32_t input1, input2, output;
  bool transpose_b = false;
};
struct SoftmaxParams { uint32_t input, output; };
struct TransposeParams { uint32_t input, output; std::vector<uint32_t> perm; };
struct ReshapeParams {
  uint32_t input, output;
  std::vector<uint32_t> new_shape;
  /// Its input's producer writes straight into this reshape's external output
  /// (forward_output_reshapes): the run only sets the output's shape.
  bool forwarded = false;
};
struct SliceParams { uint32_t input, output; std::vector<uint32_t> offsets, sizes; };
struct ConcatParams { uint32_t axis, output; std::vector<uint32_t> inputs; };
struct PadParams {
  uint32_t input, output;
  std::vector<uint32_t> pre, post;
  float value = 0.0f;
};

/// A conv / pooling window (its n and spatial sizes are set per run from
/// the input) plus the bottom/right padding that fixes the output size.
struct WindowParams {
  kernels::Window2d window;
  int64_t pad_bottom = 0, pad_right = 0;
};
/// Conv2d / DepthwiseConv2d over NHWC values; the fp32 filter and bias are
/// read in place (XNNPACK's layouts, see kernels/optimized/nhwc.h).
struct ConvParams {
  uint32_t input, filter, bias, output;
  WindowParams win;
  int64_t groups = 1, cin_g = 0, cout_g = 0;  ///< depthwise: groups = input channels, cout_g = multiplier
  bool depthwise = false;
  const float* weights = nullptr;
  const float* bias_f = nullptr;
  /// A residual Add folded in at compile time (fuse_residual_adds): the conv
  /// writes conv + residual, clamped by the Add's output_min_max.
  uint32_t residual = kInvalidId;
  /// 3x3 stride-1 convolutions: the filter transformed once for Winograd
  /// F(2x2, 3x3) (kernels/optimized/winograd.cpp), which then computes them.
  std::shared_ptr<const kernels::WinogradFilter> winograd;
  /// Groups-1 convolutions on CPUs with a conv_tile: the filter and bias
  /// repacked once into 64-channel panels (kernels::conv2d_packed_nhwc_f32).
  std::shared_ptr<const kernels::PackedConvFilter> packed;
};
/// MaxPooling2d over an NHWC value.
struct PoolParams {
  uint32_t input, output;
  WindowParams win;
};
/// GlobalAvgPooling2d: [N, H, W, C] -> [N, 1, 1, C].
struct GlobalPoolParams { uint32_t input, output; };

using NodeParams = std::variant<UnaryParams, BinaryParams, FullyConnectedParams, BatchMatMulParams,
                                SoftmaxParams, TransposeParams, ReshapeParams, SliceParams,
                                ConcatParams, PadParams, ConvParams, PoolParams, GlobalPoolParams>;

struct XNode {
  NodeParams params;
  float out_min = -std::numeric_limits<float>::infinity();  ///< output_min_max (nodes that honour it)
  float out_max = std::numeric_limits<float>::infinity();
  uint32_t debug_handle = 0;
  std::string name;  ///< union member name, for errors ("XNNAdd")
  /// A Convert the compiler added around an fp16 node, not in the payload
  /// (left out of node counts).
  bool widening = false;
};

/// The compiled subgraph: values indexed by serialized id_out, nodes in order.
struct XnnGraph {
  std::vector<XValue> values;
  std::vector<XNode> nodes;
  uint32_t num_externs = 0;
  std::vector<uint32_t> external_values;  ///< value index per external (inputs and outputs)
  /// Per node: the internal values whose storage is dead once it has run
  /// (their last reader, or their producer when nothing reads them), with an
  /// internal reshape's reads counted for the value it views.
  std::vector<std::vector<uint32_t>> release_after;
  /// Node type name -> count, for diagnostics.
  std::vector<std::pair<std::string, size_t>> node_counts() const;
};

/// The values node `n` reads (kInvalidId for an absent bias included).
std::vector<uint32_t> node_inputs(const XNode& n);
/// The value node `n` writes.
uint32_t node_output(const XNode& n);
/// True when the runner makes `n`'s output a view of its input (an internal
/// StaticReshape of the same dtype) instead of giving it storage.
bool is_view(const XnnGraph& g, const XNode& n);
/// The shape a StaticReshape to `new_shape` (one 0 = inferred) gives `in`,
/// or an error when the element count does not fit.
Result<std::vector<int64_t>> reshaped(std::span<const int64_t> in, std::span<const uint32_t> new_shape);

/// Parses the XH00 blob (or a bare XNNGraph flatbuffer), verifies it and
/// compiles it. Constants with a named key come from `file` (may be null:
/// then named constants are an error).
/// kInspection validates everything but leaves float filters unpacked (no
/// transposes or dequantization: `inspect` of a large model stays instant);
/// such a graph must not run.
enum class CompileFor { kExecution, kInspection };
Result<XnnGraph> compile_payload(std::span<const uint8_t> payload, const pte::PteFile* file,
                                 CompileFor purpose = CompileFor::kExecution);

/// Runs `g` on the current external tensors bound by the backend (XValue::shape
/// and ::data already set for external inputs; outputs are resized through
/// `resize_output`).
class OutputBinder {
 public:
  virtual ~OutputBinder() = default;
  /// Resizes external output `external_id` to `shape` and returns its data.
  virtual Result<void*> bind_output(uint32_t external_id, std::span<const int64_t> shape) = 0;
};
Status run_graph(XnnGraph& g, OutputBinder& binder);

/// Optional per-node timing for hf2pte_profile: while a sink is installed,
/// run_graph reports every node's wall time under its kind ("XNNAdd").
/// Install it before graphs run and remove it (nullptr) after.
class NodeTimeSink {
 public:
  virtual ~NodeTimeSink() = default;
  virtual void add(const std::string& node_kind, double seconds) = 0;
};
void set_node_time_sink(NodeTimeSink* sink);

}  // namespace hf2pte::xnn
