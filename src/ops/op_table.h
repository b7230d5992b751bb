// The op table (ops.def) as data: ids, names and parsed schemas.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hf2pte {

enum class OpId : int {
#define HF2PTE_KERNEL_OP(id, name, overload, schema) id,
#define HF2PTE_GRAPH_OP(id, name, overload, schema) id,
#include "ops/ops.def"
#undef HF2PTE_KERNEL_OP
#undef HF2PTE_GRAPH_OP
  kCount
};

/// Argument type classes of an ATen schema, as far as emission cares.
enum class ArgType {
  kTensor,              ///< Tensor (optional when `optional`)
  kTensorList,          ///< Tensor[]
  kOptionalTensorList,  ///< Tensor?[]
  kInt,                 ///< int / SymInt
  kIntList,             ///< int[] / SymInt[] (optional when `optional`)
  kFloat,               ///< float
  kBool,
  kScalar,              ///< Scalar: int, float or bool
  kScalarType,          ///< ScalarType (an Int value in the .pte)
  kMemoryFormat,        ///< MemoryFormat (an Int value in the .pte)
  kFloatList,
  kBoolList,
  kString,
};

struct ArgSchema {
  std::string name;
  ArgType type = ArgType::kTensor;
  bool optional = false;    ///< `T?`
  bool kwarg_only = false;  ///< after `*`
  bool is_out = false;      ///< written by the kernel: `Tensor(a!)` after `*`
  bool mutated = false;     ///< `(a!)` anywhere
  std::optional<std::string> default_value;  ///< literal text, e.g. "1", "None", "False"
};

struct OpSchema {
  std::vector<ArgSchema> args;     ///< in KernelCall order (positional, kwarg-only, outs)
  std::vector<std::string> returns;  ///< return types as written
  size_t num_outs() const;
  size_t num_non_out() const { return args.size() - num_outs(); }
};

struct OpInfo {
  OpId id;
  std::string_view name;      ///< "aten::add"
  std::string_view overload;  ///< "out", "" for the default overload
  std::string_view schema_text;
  bool has_kernel;            ///< appears in .pte files (false: graph-only, lowered before emit)

  /// "aten::add.out" (or "aten::index_put_" when the overload is empty): the kernel registry key.
  std::string kernel_key() const;
  /// Short name for dumps: "add.out".
  std::string short_name() const;
};

std::span<const OpInfo> all_ops();
const OpInfo& op_info(OpId id);
/// The parsed schema (parsed once; schemas in ops.def are trusted text).
const OpSchema& op_schema(OpId id);
/// Looks up an op by its kernel key ("aten::add.out").
std::optional<OpId> find_op(std::string_view kernel_key);

/// Parses "(Tensor self, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)".
/// Returns nullopt on text it does not understand.
std::optional<OpSchema> parse_schema(std::string_view text);

}  // namespace hf2pte
