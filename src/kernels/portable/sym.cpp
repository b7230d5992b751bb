// Symbolic integer kernels: aten::sym_size.int and executorch_prim's scalar
// arithmetic. They compute runtime shapes (e.g. the sequence length) and write
// their result into the last arg slot, replacing that EValue (an Int stays
// an Int in place, so boxed IntLists that point at it see the new value).
#include <cmath>
#include <limits>

#include "kernels/portable/kernel_util.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

namespace {

enum class PrimOp { kAdd, kSub, kMul, kFloorDiv };

/// Python's float floor division (Objects/floatobject.c float_floor_div), so
/// that 1.0 // 0.1 == 9.0 as in the traced program, not floor(1.0 / 0.1) == 10.0.
double py_floordiv(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) div -= 1.0;
  }
  double floordiv;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, a / b);
  }
  return floordiv;
}

/// a op b on Int / Double EValues: Int with Int stays Int (wrapping like
/// int64 in C, never UB); a Double on either side makes the result Double.
Status prim_binary(OpId op, std::span<rt::EValue*> args, PrimOp kind) {
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  const rt::EValue& a = *r.raw(0);
  const rt::EValue& b = *r.raw(1);
  HF2PTE_CHECK_OR_RETURN((a.is_int() || a.is_double()) && (b.is_int() || b.is_double()),
                         kInvalidProgram, "{}: operands must be Int or Double; got {} and {}",
                         op_key(op), rt::tag_name(a.tag), rt::tag_name(b.tag));
  rt::EValue result;
  if (a.is_int() && b.is_int()) {
    const int64_t x = a.i, y = b.i;
    int64_t v = 0;
    switch (kind) {
      case PrimOp::kAdd: v = int64_t(uint64_t(x) + uint64_t(y)); break;
      case PrimOp::kSub: v = int64_t(uint64_t(x) - uint64_t(y)); break;
      case PrimOp::kMul: v = int64_t(uint64_t(x) * uint64_t(y)); break;
      case PrimOp::kFloorDiv:
        HF2PTE_CHECK_OR_RETURN(y != 0, kInvalidArgument, "{}: integer division by zero ({} // 0)",
                               op_key(op), x);
        HF2PTE_CHECK_OR_RETURN(!(x == std::numeric_limits<int64_t>::min() && y == -1),
                               kOutOfRange, "{}: {} // -1 overflows int64", op_key(op), x);
        // C++ truncates toward zero; Python floors: step down when the signs differ
        // and the division is inexact.
        v = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) --v;
        break;
    }
    result = rt::EValue::from_int(v);
  } else {
    const double x = a.scalar_as_double(), y = b.scalar_as_double();
    double v = 0.0;
    switch (kind) {
      case PrimOp::kAdd: v = x + y; break;
      case PrimOp::kSub: v = x - y; break;
      case PrimOp::kMul: v = x * y; break;
      case PrimOp::kFloorDiv:
        HF2PTE_CHECK_OR_RETURN(y != 0.0, kInvalidArgument, "{}: float floor division by zero",
                               op_key(op));
        v = py_floordiv(x, y);
        break;
    }
    result = rt::EValue::from_double(v);
  }
  *r.ret() = std::move(result);
  return Status::ok();
}

}  // namespace

Status SymSizeInt(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::SymSizeInt;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * self, r.tensor_meta(0));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim_arg, r.int_arg(1));
  // Unlike most ops, a 0-dim tensor has no size to ask for.
  HF2PTE_CHECK_OR_RETURN(self->dim() > 0, kInvalidArgument,
                         "{}: a 0-dim tensor has no dim {}", op_key(op), dim_arg);
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim, normalize_dim(dim_arg, self->dim(), op));
  *r.ret() = rt::EValue::from_int(self->size(int(dim)));
  return Status::ok();
}

Status PrimAddScalar(rt::KernelContext&, std::span<rt::EValue*> args) {
  return prim_binary(OpId::PrimAddScalar, args, PrimOp::kAdd);
}

Status PrimSubScalar(rt::KernelContext&, std::span<rt::EValue*> args) {
  return prim_binary(OpId::PrimSubScalar, args, PrimOp::kSub);
}

Status PrimMulScalar(rt::KernelContext&, std::span<rt::EValue*> args) {
  return prim_binary(OpId::PrimMulScalar, args, PrimOp::kMul);
}

Status PrimFloordivScalar(rt::KernelContext&, std::span<rt::EValue*> args) {
  return prim_binary(OpId::PrimFloordivScalar, args, PrimOp::kFloorDiv);
}

}  // namespace hf2pte::kernels
