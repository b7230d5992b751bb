// EValue: one slot of a method's value table (what KernelCall args index).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runtime/tensor.h"

namespace hf2pte::rt {

enum class Tag : uint8_t {
  kNone,
  kInt,
  kDouble,
  kBool,
  kString,
  kTensor,
  kIntList,             ///< boxed: items point at Int EValues (symbolic sizes update in place)
  kDoubleList,
  kBoolList,
  kTensorList,
  kOptionalTensorList,  ///< items may be nullptr (None)
};

const char* tag_name(Tag t);

struct EValue {
  Tag tag = Tag::kNone;
  int64_t i = 0;       ///< kInt, or kBool (0/1)
  double d = 0.0;      ///< kDouble
  std::string_view s;  ///< kString (points into the program)
  Tensor* tensor = nullptr;       ///< kTensor (owned by the Method)
  std::vector<EValue*> items;     ///< kIntList / kTensorList / kOptionalTensorList
  std::vector<double> doubles;    ///< kDoubleList
  std::vector<uint8_t> bools;     ///< kBoolList

  bool is_none() const { return tag == Tag::kNone; }
  bool is_int() const { return tag == Tag::kInt; }
  bool is_double() const { return tag == Tag::kDouble; }
  bool is_bool() const { return tag == Tag::kBool; }
  bool is_tensor() const { return tag == Tag::kTensor; }
  bool is_scalar() const { return is_int() || is_double() || is_bool(); }

  static EValue from_int(int64_t v) { EValue e; e.tag = Tag::kInt; e.i = v; return e; }
  static EValue from_double(double v) { EValue e; e.tag = Tag::kDouble; e.d = v; return e; }
  static EValue from_bool(bool v) { EValue e; e.tag = Tag::kBool; e.i = v ? 1 : 0; return e; }

  /// A Scalar argument read as double (Int, Double or Bool).
  double scalar_as_double() const { return is_double() ? d : double(i); }
};

/// Typed argument access for kernels: every accessor checks the tag and
/// returns kInvalidProgram naming the argument when it does not match.
Result<Tensor*> arg_tensor(EValue* v, const char* what);
Result<int64_t> arg_int(EValue* v, const char* what);
Result<double> arg_double(EValue* v, const char* what);  ///< accepts Int and Double
Result<bool> arg_bool(EValue* v, const char* what);
/// IntList (boxed) -> values; `None` is an error unless `optional` (then returns empty + *is_none).
Status arg_int_list(EValue* v, const char* what, std::vector<int64_t>* out, bool optional = false,
                    bool* is_none = nullptr);
/// TensorList -> tensors (no None); OptionalTensorList -> tensors with nullptr for None.
Status arg_tensor_list(EValue* v, const char* what, std::vector<Tensor*>* out);

}  // namespace hf2pte::rt
