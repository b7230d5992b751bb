// The graph IR: one method's dataflow graph of ATen-style ops from the op table
// (ops/ops.def). Values carry dtype, symbolic sizes and dim order; nodes hold
// their non-out schema arguments in schema order (defaults materialised) and
// produce one value per out argument (or per return for functional ops).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/scalar_type.h"
#include "core/status.h"
#include "graph/sym_int.h"
#include "ops/op_table.h"

namespace hf2pte::graph {

using ValueId = int32_t;

/// Dtype, sizes (symbolic) and dim order of a tensor value.
struct TensorType {
  ScalarType dtype = ScalarType::kFloat;
  std::vector<SymInt> sizes;
  std::vector<uint8_t> dim_order;  ///< empty means contiguous [0..rank-1]

  int rank() const { return int(sizes.size()); }
  bool is_dynamic() const;
  /// "f32[1, seq, 64]"
  std::string str() const;
  /// Sizes with every dim at its upper bound.
  std::vector<int64_t> upper_bounds(const DimRanges& ranges) const;
  /// SymInt::planning_bound of every size: what memory planning and the emitted
  /// tensor metadata use (equal to upper_bounds whenever those are finite).
  std::vector<int64_t> planning_bounds(const DimRanges& ranges) const;
};

/// Bytes of a constant tensor, produced on demand so that weights stream from
/// the checkpoint mapping to the output file without a copy in between.
/// Set on the constants the quantize stage makes (docs/quantization.md): the
/// integers of a quantized weight, or its scales.
struct QuantInfo {
  int bits = 8;            ///< 4 or 8
  int64_t group = 0;       ///< elements per scale along a row; 0 = per channel (row)
  bool is_scales = false;  ///< the float scales (else the integers)
};

struct ConstantData {
  using Sink = std::function<Status(const void* data, size_t size)>;
  ScalarType dtype = ScalarType::kFloat;
  std::vector<int64_t> sizes;
  /// Writes exactly nbytes() bytes (row-major, contiguous) to the sink.
  std::function<Status(const Sink&)> write;
  /// Constants with the same non-empty key are stored once.
  std::string dedup_key;
  /// Human-readable origin for dumps ("model.norm.weight", "rope cos table").
  std::string origin;
  /// For 2-D constants that can be produced transposed while streaming (weights
  /// from the checkpoint): makes the [cols, rows] constant. Empty otherwise.
  std::function<ConstantData()> transposed;
  /// For constants streamed from a checkpoint: the same tensor converted to
  /// another element type while streaming (F32/F16/BF16). Empty otherwise.
  std::function<ConstantData(ScalarType)> converted;
  /// Constants streamed from a checkpoint: the element type stored there
  /// (converted() to it is exact).
  std::optional<ScalarType> source_dtype;
  /// Quantized weights and their scales (the quantize stage).
  std::optional<QuantInfo> quant;

  uint64_t nbytes() const;
  /// A constant holding `bytes` (small synthesized tensors: tables, scalars).
  static ConstantData from_bytes(ScalarType dtype, std::vector<int64_t> sizes, std::vector<uint8_t> bytes,
                                 std::string origin);
  /// A constant of `dtype` holding `values`, f32 rounded to nearest even (f16/bf16
  /// through f32, as torch.tensor(v, dtype) does), i64/i32 truncated toward zero, bool as != 0.
  static ConstantData from_values(ScalarType dtype, std::vector<int64_t> sizes, const std::vector<double>& values,
                                  std::string origin);
  /// A 0-d constant of `dtype` (origin "scalar <value>").
  static ConstantData scalar(ScalarType dtype, double value);
};

/// `c` re-encoded while it streams, as `dtype` [sizes]: every whole `unit`
/// bytes of input go through `encode` (the bytes of a chunk boundary wait for
/// the next chunk). The dedup key gains `key_suffix`.
ConstantData recoded(const ConstantData& c, ScalarType dtype, std::vector<int64_t> sizes, const char* key_suffix,
                     size_t unit, std::function<void(const uint8_t* in, size_t units, std::vector<uint8_t>& out)> encode);

enum class ValueRole {
  kActivation,  ///< produced by a node
  kInput,       ///< method input (user-provided)
  kConstant,    ///< parameter or lifted constant
  kBuffer,      ///< mutable buffer (KV cache): persists across calls, zero-initialised
  kSymInt,      ///< an integer computed from sizes (output of sym ops)
};

struct Value {
  std::string name;  ///< debug name, e.g. "layers.0.attn.q"
  ValueRole role = ValueRole::kActivation;
  TensorType type;       ///< tensors
  SymInt sym;            ///< kSymInt values: the expression they hold
  int32_t constant_idx = -1;  ///< kConstant: index into Graph::constants
};

struct None {};
/// One node argument. IntList entries may be symbolic; OptTensorList entries may be None.
using TensorList = std::vector<ValueId>;
using OptTensorList = std::vector<std::optional<ValueId>>;
using IntList = std::vector<SymInt>;
using Arg = std::variant<None, ValueId, int64_t, double, bool, SymInt, IntList, TensorList, OptTensorList, ScalarType>;

struct Node {
  OpId op;
  std::vector<Arg> args;         ///< non-out schema args, in order, defaults materialised
  std::vector<ValueId> outputs;  ///< out args (out variants) or returns (functional ops)
  std::string name;              ///< debug name (also given to the outputs)
};

/// A constant a delegate payload refers to by key (Program.named_data); streamed
/// at write time like every other constant.
struct NamedConstant {
  std::string key;
  ConstantData data;
};

/// A subgraph lowered to a backend (stage 6). A DelegateCall node refers to it
/// by index (its args[0]); its args[1] are the inputs, its outputs the outputs,
/// in the order of the payload's external ids (inputs then outputs).
struct Delegate {
  std::string backend_id;             ///< BackendDelegate.id, e.g. "XnnpackBackend"
  std::vector<uint8_t> payload;       ///< the processed blob (stored as a segment)
  std::vector<NamedConstant> named;   ///< weights the payload names
  std::string summary;                ///< for dumps: "FullyConnected x1"
};

/// Where a named dim is read from at runtime: `inputs[input].size(axis)`.
struct DimSource {
  ValueId input = -1;
  int axis = 0;
};

class Graph {
 public:
  explicit Graph(std::string name = "forward") : name_(std::move(name)) {}

  const std::string& name() const { return name_; }

  // ---- dims ----
  /// Declares dim `name` in [min, max] (max may be DimRange::kUnbounded).
  SymInt add_dim(const std::string& name, int64_t min, int64_t max);
  DimRanges& dims() { return dims_; }
  const DimRanges& dims() const { return dims_; }
  const std::map<std::string, DimSource>& dim_sources() const { return dim_sources_; }

  // ---- values ----
  /// Adds a method input; every symbolic dim in `type` that has no source yet is read from it.
  ValueId add_input(const std::string& name, TensorType type);
  ValueId add_constant(const std::string& name, ConstantData data);
  ValueId add_buffer(const std::string& name, TensorType type);
  void set_outputs(std::vector<ValueId> outputs) { outputs_ = std::move(outputs); }

  /// Appends a node; `args` may omit trailing args that have schema defaults.
  /// Output types come from the op's shape function. Errors name the node.
  Result<std::vector<ValueId>> add_node(OpId op, std::vector<Arg> args, const std::string& name);
  /// add_node for single-output ops.
  Result<ValueId> add(OpId op, std::vector<Arg> args, const std::string& name);

  const Value& value(ValueId id) const { return values_[size_t(id)]; }
  Value& mutable_value(ValueId id) { return values_[size_t(id)]; }
  const TensorType& type(ValueId id) const { return values_[size_t(id)].type; }
  size_t num_values() const { return values_.size(); }
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& mutable_nodes() { return nodes_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  std::vector<ValueId>& mutable_outputs() { return outputs_; }
  const std::vector<ConstantData>& constants() const { return constants_; }
  const ConstantData& constant(ValueId id) const { return constants_[size_t(values_[size_t(id)].constant_idx)]; }
  /// Every buffer value, in creation order.
  std::vector<ValueId> buffers() const;

  // ---- delegates (set by the partitioner) ----
  int32_t add_delegate(Delegate d) {
    delegates_.push_back(std::move(d));
    return int32_t(delegates_.size() - 1);
  }
  const std::vector<Delegate>& delegates() const { return delegates_; }

  /// Text form: header, dims, inputs, constants, buffers, one line per node.
  std::string to_string() const;

 private:
  ValueId add_value(Value v);

  std::string name_;
  DimRanges dims_;
  std::map<std::string, DimSource> dim_sources_;
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::vector<ConstantData> constants_;
  std::vector<Delegate> delegates_;
};

/// A scalar (or small list) returned by a constant method such as get_max_seq_len.
using ConstantMethodValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>>;

/// A whole program: executable methods plus constant methods (metadata getters).
struct Program {
  std::vector<Graph> methods;
  std::map<std::string, ConstantMethodValue> constant_methods;
};

/// Fills defaults for omitted trailing args from the schema (None, ints, floats, bools).
Status fill_default_args(OpId op, std::vector<Arg>* args);
std::string arg_to_string(const Graph& g, const Arg& a);

}  // namespace hf2pte::graph
