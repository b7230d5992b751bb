// A verified CUDA delegate payload (schema/cuda_payload.fbs) as plain data,
// shared by the two executors: the CPU reference executor
// (reference_executor.cpp, portable-kernel semantics) and the device executor
// (device/, CUDA kernels). Parsing checks every index, kind and bound, so the
// executors may trust what they read here.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/scalar_type.h"
#include "core/status.h"
#include "ops/op_table.h"

namespace hf2pte::cuda {

enum class ExprKind : uint8_t { kConst, kDim, kAdd, kSub, kMul, kFloorDiv, kMod, kMin, kMax };

struct Expr {
  ExprKind kind = ExprKind::kConst;
  uint32_t lhs = 0, rhs = 0;  ///< binary kinds: earlier exprs
  int64_t value = 0;          ///< kConst: the value; kDim: the dim index
};

struct DimInfo {
  std::string name;
  int64_t min = 0, max = 0;
  uint32_t input = 0;  ///< delegate input whose size(axis) is the dim
  uint32_t axis = 0;
};

enum class TensorRole : uint8_t { kIntermediate, kInput, kOutput, kState, kConstant };

struct TensorInfo {
  ScalarType dtype = ScalarType::kFloat;
  std::vector<uint32_t> sizes;     ///< expr per dim
  std::vector<int64_t> max_sizes;  ///< upper bounds
  TensorRole role = TensorRole::kIntermediate;
  uint32_t io_index = 0;           ///< kInput/kState: input position; kOutput: output position
  std::string key;                 ///< kConstant: named data key
  uint64_t arena_offset = 0;       ///< kIntermediate
  uint64_t capacity_bytes = 0;     ///< bytes at max_sizes
};

enum class ValueKind : uint8_t { kNone, kTensor, kInt, kDouble, kBool, kIntList, kTensorList, kOptTensorList, kScalarType };

struct ValueInfo {
  ValueKind kind = ValueKind::kNone;
  uint32_t tensor = 0;           ///< kTensor
  std::vector<uint32_t> exprs;   ///< kInt: one; kIntList: one per item
  double f = 0;                  ///< kDouble
  bool b = false;                ///< kBool
  std::vector<int32_t> tensors;  ///< kTensorList / kOptTensorList (-1 = None)
  ScalarType scalar_type = ScalarType::kFloat;  ///< kScalarType
};

struct NodeInfo {
  OpId op = OpId::AddOut;
  std::vector<uint32_t> args;  ///< value per schema argument, outs included
  std::string name;
};

struct CudaProgram {
  std::vector<DimInfo> dims;
  std::vector<Expr> exprs;
  std::vector<TensorInfo> tensors;
  std::vector<ValueInfo> values;
  std::vector<NodeInfo> nodes;
  uint32_t num_inputs = 0;
  uint32_t num_outputs = 0;
  uint64_t arena_bytes = 0;
  /// tensors[input_tensor[i]] is delegate input i (role kInput or kState); likewise outputs.
  std::vector<uint32_t> input_tensor, output_tensor;

  /// Every expr's value for the dims read from `input_sizes` (input i's
  /// sizes), or an error naming a dim outside its declared range or an input
  /// whose rank does not have the dim's axis.
  Status evaluate(std::span<const std::span<const int64_t>> input_sizes, std::vector<int64_t>* expr_values) const;
  /// Every expr's value for given dim values (one per dim, in range).
  Status evaluate_dims(std::span<const int64_t> dim_values, std::vector<int64_t>* expr_values) const;
  /// Tensor `t`'s sizes under evaluated exprs.
  std::vector<int64_t> sizes_of(uint32_t t, const std::vector<int64_t>& expr_values) const;
};

/// Parses and verifies a payload (flatbuffer verification, then every index,
/// kind, op and bound). `max_arena_bytes` caps the intermediates' arena.
Result<CudaProgram> parse_cuda_payload(std::span<const uint8_t> payload, uint64_t max_arena_bytes);

}  // namespace hf2pte::cuda
