// Elementwise kernels: add/sub/mul/div (tensor and scalar forms), neg, rsqrt,
// sigmoid, pow.Tensor_Scalar, le and where, with ATen broadcasting and type
// promotion. Float arithmetic follows ATen: add/sub/mul/div in float32;
// transcendental ops are evaluated in double and rounded once. f16/bf16
// results are computed in float32 too and rounded once to the out's type.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "kernels/portable/elementwise.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

ScalarType promote_types(ScalarType a, ScalarType b) {
  if (a == b) return a;
  const bool fa = is_floating(a), fb = is_floating(b);
  // Two different float types: f32 holds both (and f16 with bf16 meet there).
  if (fa && fb) return ScalarType::kFloat;
  if (fa) return a;
  if (fb) return b;
  if (a == ScalarType::kLong || b == ScalarType::kLong) return ScalarType::kLong;
  return ScalarType::kBool;
}

ScalarType promote_with_scalar(ScalarType t, const ScalarArg& s) {
  // A Python float lifts integers and bools to f32 (the default dtype) but
  // leaves a float tensor's own type, 16-bit ones included.
  if (s.kind == ScalarArg::Kind::kDouble && !is_floating(t)) return ScalarType::kFloat;
  if (s.kind == ScalarArg::Kind::kInt && t == ScalarType::kBool) return ScalarType::kLong;
  return t;
}

namespace {

constexpr DTypeSet kComputeArith = kArith;
/// What comparisons and selections compute in (compute_type of a result: never 16-bit).
constexpr DTypeSet kComputeStandard{ScalarType::kFloat, ScalarType::kLong, ScalarType::kBool};

// Integer arithmetic wraps like PyTorch's instead of being signed-overflow UB.
inline int64_t wrap_add(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }
inline int64_t wrap_sub(int64_t a, int64_t b) { return int64_t(uint64_t(a) - uint64_t(b)); }
inline int64_t wrap_mul(int64_t a, int64_t b) { return int64_t(uint64_t(a) * uint64_t(b)); }

Status check_standard(const rt::Tensor& t, OpId op, std::string_view what) {
  if (kStandard.contains(t.dtype())) return Status::ok();
  return unsupported_dtype(op, what, t.dtype(), kStandard);
}

/// The result type of an arithmetic op on bool-only inputs is bool, which
/// ATen handles with logical semantics; we do not need it, so say so clearly.
Status check_not_bool(ScalarType ct, OpId op) {
  HF2PTE_CHECK_OR_RETURN(ct != ScalarType::kBool, kNotSupported,
                         "{}: arithmetic on bool inputs is not supported; expected f32 or i64",
                         op_key(op));
  return Status::ok();
}

/// add/sub: out = a + sign * alpha * b, with `b` a tensor or a scalar.
Status add_sub(OpId op, std::span<rt::EValue*> args, int sign, bool scalar_other) {
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * a, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(ScalarArg alpha, r.scalar(2));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(3));
  HF2PTE_RETURN_IF_ERROR(check_standard(*a, op, "self"));
  rt::Tensor* b = nullptr;
  ScalarArg other;
  ScalarType ct;
  if (scalar_other) {
    HF2PTE_ASSIGN_OR_RETURN(other, r.scalar(1));
    ct = promote_with_scalar(a->dtype(), other);
  } else {
    HF2PTE_ASSIGN_OR_RETURN(b, r.tensor(1));
    HF2PTE_RETURN_IF_ERROR(check_standard(*b, op, "other"));
    ct = promote_types(a->dtype(), b->dtype());
  }
  HF2PTE_RETURN_IF_ERROR(check_not_bool(ct, op));
  HF2PTE_CHECK_OR_RETURN(!(ct == ScalarType::kLong && alpha.is_floating()), kInvalidArgument,
                         "{}: alpha must not be a floating point number for integral inputs; got {}",
                         op_key(op), alpha.d);
  HF2PTE_RETURN_IF_ERROR(dispatch<kComputeArith>(compute_type(ct), op, "computation", [&](auto tc) -> Status {
    using CT = typename decltype(tc)::type;
    const CT al = CT(sign) * (std::is_same_v<CT, float> ? CT(alpha.as_double()) : CT(alpha.i));
    auto fn = [al](CT x, CT y) -> CT {
      if constexpr (std::is_same_v<CT, float>) {
        return x + al * y;
      } else {
        return wrap_add(x, wrap_mul(al, y));
      }
    };
    if (scalar_other) {
      const CT y = std::is_same_v<CT, float> ? CT(other.as_double()) : CT(other.i);
      return map_unary<CT>(op, *a, *out, [&](CT x) { return fn(x, y); });
    }
    return map_binary<CT>(op, *a, *b, *out, fn);
  }));
  r.set_return(3);
  return Status::ok();
}

/// mul: out = a * b, with `b` a tensor or a scalar.
Status mul(OpId op, std::span<rt::EValue*> args, bool scalar_other) {
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * a, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(2));
  HF2PTE_RETURN_IF_ERROR(check_standard(*a, op, "self"));
  rt::Tensor* b = nullptr;
  ScalarArg other;
  ScalarType ct;
  if (scalar_other) {
    HF2PTE_ASSIGN_OR_RETURN(other, r.scalar(1));
    ct = promote_with_scalar(a->dtype(), other);
  } else {
    HF2PTE_ASSIGN_OR_RETURN(b, r.tensor(1));
    HF2PTE_RETURN_IF_ERROR(check_standard(*b, op, "other"));
    ct = promote_types(a->dtype(), b->dtype());
  }
  HF2PTE_RETURN_IF_ERROR(check_not_bool(ct, op));
  HF2PTE_RETURN_IF_ERROR(dispatch<kComputeArith>(compute_type(ct), op, "computation", [&](auto tc) -> Status {
    using CT = typename decltype(tc)::type;
    auto fn = [](CT x, CT y) -> CT {
      if constexpr (std::is_same_v<CT, float>) {
        return x * y;
      } else {
        return wrap_mul(x, y);
      }
    };
    if (scalar_other) {
      const CT y = std::is_same_v<CT, float> ? CT(other.as_double()) : CT(other.i);
      return map_unary<CT>(op, *a, *out, [&](CT x) { return fn(x, y); });
    }
    return map_binary<CT>(op, *a, *b, *out, fn);
  }));
  r.set_return(2);
  return Status::ok();
}

/// A unary op whose result is floating for any input (ATen's "unary float"
/// ops): integers and bools are loaded as float, math runs in double.
template <typename Fn>
Status unary_float(OpId op, std::span<rt::EValue*> args, Fn fn) {
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * x, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(1));
  HF2PTE_RETURN_IF_ERROR(check_standard(*x, op, "self"));
  HF2PTE_RETURN_IF_ERROR(
      map_unary<float>(op, *x, *out, [&](float v) { return float(fn(double(v))); }));
  r.set_return(1);
  return Status::ok();
}

}  // namespace

Status AddOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  return add_sub(OpId::AddOut, args, +1, /*scalar_other=*/false);
}

Status AddScalarOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  return add_sub(OpId::AddScalarOut, args, +1, /*scalar_other=*/true);
}

Status SubOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  return add_sub(OpId::SubOut, args, -1, /*scalar_other=*/false);
}

Status MulOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  return mul(OpId::MulOut, args, /*scalar_other=*/false);
}

Status MulScalarOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  return mul(OpId::MulScalarOut, args, /*scalar_other=*/true);
}

Status DivOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::DivOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * a, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * b, r.tensor(1));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(2));
  HF2PTE_RETURN_IF_ERROR(check_standard(*a, op, "self"));
  HF2PTE_RETURN_IF_ERROR(check_standard(*b, op, "other"));
  // True division: integer inputs divide as float (so 1 / 0 is inf, not UB).
  HF2PTE_RETURN_IF_ERROR(map_binary<float>(op, *a, *b, *out, [](float x, float y) { return x / y; }));
  r.set_return(2);
  return Status::ok();
}

Status NegOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::NegOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * x, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(1));
  HF2PTE_RETURN_IF_ERROR(dispatch<kComputeArith>(compute_type(x->dtype()), op, "self", [&](auto tc) {
    using CT = typename decltype(tc)::type;
    return map_unary<CT>(op, *x, *out, [](CT v) -> CT {
      if constexpr (std::is_same_v<CT, float>) {
        return -v;
      } else {
        return wrap_sub(0, v);
      }
    });
  }));
  r.set_return(1);
  return Status::ok();
}

Status RsqrtOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  return unary_float(OpId::RsqrtOut, args, [](double v) { return 1.0 / std::sqrt(v); });
}

Status SigmoidOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  return unary_float(OpId::SigmoidOut, args, [](double v) { return 1.0 / (1.0 + std::exp(-v)); });
}

Status TanhOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  return unary_float(OpId::TanhOut, args, [](double v) { return std::tanh(v); });
}

Status ErfOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  return unary_float(OpId::ErfOut, args, [](double v) { return std::erf(v); });
}

Status ExpOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  return unary_float(OpId::ExpOut, args, [](double v) { return std::exp(v); });
}

Status Log1pOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  return unary_float(OpId::Log1pOut, args, [](double v) { return std::log1p(v); });
}

// clamp(x, min, max): either bound may be None; NaN stays NaN as in ATen
// (min then max, so min > max gives max everywhere, as upstream does).
Status ClampOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::ClampOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * x, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(3));
  HF2PTE_RETURN_IF_ERROR(check_standard(*x, op, "self"));
  std::optional<double> bound[2];
  for (size_t i = 0; i < 2; ++i) {
    if (r.raw(1 + i)->tag == rt::Tag::kNone) continue;
    HF2PTE_ASSIGN_OR_RETURN(ScalarArg s, r.scalar(1 + i));
    bound[i] = s.as_double();
  }
  const float lo = bound[0] ? float(*bound[0]) : -std::numeric_limits<float>::infinity();
  const float hi = bound[1] ? float(*bound[1]) : std::numeric_limits<float>::infinity();
  HF2PTE_RETURN_IF_ERROR(map_unary<float>(op, *x, *out, [&](float v) {
    if (std::isnan(v)) return v;
    return std::min(std::max(v, lo), hi);
  }));
  r.set_return(3);
  return Status::ok();
}

// Elementwise max with broadcasting; NaN wins, as in ATen.
Status MaximumOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::MaximumOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * a, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * b, r.tensor(1));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(2));
  HF2PTE_CHECK_OR_RETURN(kFloating.contains(a->dtype()) && kFloating.contains(b->dtype()), kNotSupported,
                         "{}: self and other must be f32, f16 or bf16; got {} and {}", op_key(op),
                         scalar_type_name(a->dtype()), scalar_type_name(b->dtype()));
  HF2PTE_RETURN_IF_ERROR(map_binary<float>(op, *a, *b, *out, [](float x, float y) {
    return std::isnan(x) || std::isnan(y) ? std::numeric_limits<float>::quiet_NaN() : std::max(x, y);
  }));
  r.set_return(2);
  return Status::ok();
}

Status PowTensorScalarOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::PowTensorScalarOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * x, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(ScalarArg e, r.scalar(1));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(2));
  HF2PTE_RETURN_IF_ERROR(check_standard(*x, op, "self"));
  const ScalarType ct = promote_with_scalar(x->dtype(), e);
  HF2PTE_RETURN_IF_ERROR(check_not_bool(ct, op));
  if (is_floating(ct)) {
    const double ex = e.as_double();
    // Exponent 2 is the common case (RMSNorm's x^2): one exact product.
    HF2PTE_RETURN_IF_ERROR(map_unary<float>(op, *x, *out, [ex](float v) {
      return ex == 2.0 ? v * v : float(std::pow(double(v), ex));
    }));
  } else {
    HF2PTE_CHECK_OR_RETURN(e.i >= 0, kInvalidArgument,
                           "{}: integers to negative integer powers are not allowed; got exponent {}",
                           op_key(op), e.i);
    const uint64_t ex = uint64_t(e.i);
    HF2PTE_RETURN_IF_ERROR(map_unary<int64_t>(op, *x, *out, [ex](int64_t v) {
      // Square-and-multiply with wrapping, as PyTorch's integer pow.
      int64_t result = 1, base = v;
      for (uint64_t k = ex; k != 0; k >>= 1) {
        if (k & 1) result = wrap_mul(result, base);
        base = wrap_mul(base, base);
      }
      return result;
    }));
  }
  r.set_return(2);
  return Status::ok();
}

Status LeTensorOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::LeTensorOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * a, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * b, r.tensor(1));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(2));
  HF2PTE_RETURN_IF_ERROR(check_standard(*a, op, "self"));
  HF2PTE_RETURN_IF_ERROR(check_standard(*b, op, "other"));
  const ScalarType ct = compute_type(promote_types(a->dtype(), b->dtype()));
  HF2PTE_RETURN_IF_ERROR(dispatch<kComputeStandard>(ct, op, "computation", [&](auto tc) {
    using CT = typename decltype(tc)::type;
    return map_binary<CT>(op, *a, *b, *out, [](CT x, CT y) -> bool { return x <= y; });
  }));
  r.set_return(2);
  return Status::ok();
}

Status WhereSelfOut(rt::KernelContext&, std::span<rt::EValue*> args) {
  constexpr OpId op = OpId::WhereSelfOut;
  HF2PTE_ASSIGN_OR_RETURN(auto r, ArgReader::make(op, args));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * cond, r.tensor(0));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * a, r.tensor(1));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * b, r.tensor(2));
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * out, r.tensor(3));
  HF2PTE_CHECK_OR_RETURN(cond->dtype() == ScalarType::kBool, kInvalidArgument,
                         "{}: condition must be bool; got {}", op_key(op),
                         scalar_type_name(cond->dtype()));
  HF2PTE_RETURN_IF_ERROR(check_standard(*a, op, "self"));
  HF2PTE_RETURN_IF_ERROR(check_standard(*b, op, "other"));
  std::vector<int64_t> shape;
  const std::span<const int64_t> shapes[] = {cond->sizes(), a->sizes(), b->sizes()};
  HF2PTE_RETURN_IF_ERROR(broadcast_shapes(shapes, op, &shape));
  HF2PTE_RETURN_IF_ERROR(resize_out(*out, shape, op));
  // 16-bit values pass through f32 exactly (a selection rounds nothing).
  const ScalarType ct = compute_type(promote_types(a->dtype(), b->dtype()));
  HF2PTE_RETURN_IF_ERROR(dispatch<kComputeStandard>(ct, op, "computation", [&](auto tc) {
    using CT = typename decltype(tc)::type;
    return dispatch<kInputsFor<CT>>(a->dtype(), op, "self", [&](auto ta) {
      using A = typename decltype(ta)::type;
      return dispatch<kInputsFor<CT>>(b->dtype(), op, "other", [&](auto tb) {
        using B = typename decltype(tb)::type;
        return dispatch<kOutsFor<CT>>(out->dtype(), op, "out", [&](auto to) {
          using O = typename decltype(to)::type;
          run_loop<O, bool, A, B>(shape, *out, {cond, a, b}, [](bool c, A x, B y) {
            return convert<O>(c ? convert<CT>(x) : convert<CT>(y));
          });
        });
      });
    });
  }));
  r.set_return(3);
  return Status::ok();
}

}  // namespace hf2pte::kernels
