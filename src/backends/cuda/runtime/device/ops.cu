// CUDA kernels of the device executor and the table that maps OpIds to their
// launchers. Semantics follow the portable kernels (src/kernels/portable/):
// float math in f32 with one rounding per result to the out's dtype, integer
// math in int64 with wrapping, comparisons to bool, NaN propagation in max.
//
// Kernel families, each a handful of instantiations so the build stays fast:
//   elementwise  one N-d broadcasting kernel per compute type (f32, i64), the
//                op and the operand dtypes are launch parameters;
//   copy         one strided copy (same dtype: by element size; else with
//                conversion) behind permute/slice/expand/cat/clone/view;
//   reductions   block per row when the reduced dims are innermost, thread
//                per output otherwise; softmax likewise;
//   matmul       a bandwidth-bound GEMV for M <= 4 (decode), cuBLAS otherwise;
//   indexing     a row gather (embedding, index_select) and index_put_.
//   conv/pool    2-D convolution as a tiled implicit GEMM (im2col on the fly,
//                f32 accumulation); max pooling one thread per output;
//   quantized    per-token int8 activation (de)quantization, an int8-weight
//                warp-per-column linear, 8-/4-bit embedding gathers.
//
// Bad indices cannot be checked on the host without a sync; kernels skip the
// element and record the node in DeviceContext::error_flag instead.

// fmt 9 marks some functions constexpr that call functions it leaves
// non-constexpr under nvcc; with this set, both sides agree (C++20 rejects
// the mix otherwise).
#ifndef FMT_USE_CONSTEXPR
#define FMT_USE_CONSTEXPR 1
#endif

#include "backends/cuda/runtime/device/ops.h"
#include "quant/per_token_qparams.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

namespace hf2pte::cuda {

namespace {

// ---------------------------------------------------------------------------
// Host helpers: errors, dtypes, shapes.

template <typename... A>
Status op_fail(ErrorCode code, OpId op, fmt::format_string<A...> f, A&&... args) {
  return Status(code, fmt::format("{}: {}", op_info(op).kernel_key(), fmt::format(f, std::forward<A>(args)...)));
}

std::string shape_str(std::span<const int64_t> s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

Status cuda_check(cudaError_t e, OpId op, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  return op_fail(ErrorCode::kInternal, op, "{} failed: {}", what, cudaGetErrorString(e));
}

__host__ __device__ constexpr bool is_float_dt(ScalarType t) {
  return t == ScalarType::kFloat || t == ScalarType::kHalf || t == ScalarType::kBFloat16;
}
/// f32, f16, bf16, i64, bool: what the portable elementwise and copy kernels take.
constexpr bool is_standard(ScalarType t) { return is_float_dt(t) || t == ScalarType::kLong || t == ScalarType::kBool; }
constexpr bool is_index_dt(ScalarType t) { return t == ScalarType::kLong || t == ScalarType::kInt; }
/// 16-bit floats compute in f32.
constexpr ScalarType compute_of(ScalarType t) { return is_float_dt(t) ? ScalarType::kFloat : t; }

/// ATen's result type of two tensors (within the standard set).
ScalarType promote(ScalarType a, ScalarType b) {
  if (a == b) return a;
  const bool fa = is_float_dt(a), fb = is_float_dt(b);
  if (fa && fb) return ScalarType::kFloat;
  if (fa) return a;
  if (fb) return b;
  if (a == ScalarType::kLong || b == ScalarType::kLong) return ScalarType::kLong;
  return ScalarType::kBool;
}

/// A Scalar argument with its kind (promotion depends on int vs float).
struct ScalarVal {
  bool is_double = false, is_bool = false;
  int64_t i = 0;
  double d = 0;
  double as_double() const { return is_double ? d : double(i); }
};

ScalarType promote_scalar(ScalarType t, const ScalarVal& s) {
  if (s.is_double && !is_float_dt(t)) return ScalarType::kFloat;
  if (!s.is_double && !s.is_bool && t == ScalarType::kBool) return ScalarType::kLong;
  return t;
}

Result<const DevTensor*> tensor_arg(OpId op, std::span<const DevArg> a, size_t i, const char* what) {
  if (i >= a.size() || a[i].kind != ValueKind::kTensor) {
    return op_fail(ErrorCode::kInvalidProgram, op, "argument '{}' must be a tensor", what);
  }
  return &a[i].tensor;
}

Result<int64_t> int_arg(OpId op, std::span<const DevArg> a, size_t i, const char* what) {
  if (i >= a.size() || a[i].kind != ValueKind::kInt) {
    return op_fail(ErrorCode::kInvalidProgram, op, "argument '{}' must be an int", what);
  }
  return a[i].i;
}

/// `int?`: nullopt for None.
Result<std::optional<int64_t>> opt_int_arg(OpId op, std::span<const DevArg> a, size_t i, const char* what) {
  if (i < a.size() && a[i].kind == ValueKind::kNone) return std::optional<int64_t>();
  HF2PTE_ASSIGN_OR_RETURN(int64_t v, int_arg(op, a, i, what));
  return std::optional<int64_t>(v);
}

Result<bool> bool_arg(OpId op, std::span<const DevArg> a, size_t i, const char* what) {
  if (i >= a.size() || a[i].kind != ValueKind::kBool) {
    return op_fail(ErrorCode::kInvalidProgram, op, "argument '{}' must be a bool", what);
  }
  return a[i].b;
}

Result<ScalarVal> scalar_arg(OpId op, std::span<const DevArg> a, size_t i, const char* what) {
  ScalarVal s;
  if (i < a.size()) {
    switch (a[i].kind) {
      case ValueKind::kInt: s.i = a[i].i; return s;
      case ValueKind::kBool: s.is_bool = true; s.i = a[i].b ? 1 : 0; return s;
      case ValueKind::kDouble: s.is_double = true; s.d = a[i].f; return s;
      default: break;
    }
  }
  return op_fail(ErrorCode::kInvalidProgram, op, "argument '{}' must be a scalar", what);
}

/// `int[]` (or `int[]?` when `optional`; None gives an empty list).
Status int_list_arg(OpId op, std::span<const DevArg> a, size_t i, const char* what, bool optional,
                    std::vector<int64_t>* out) {
  out->clear();
  if (i < a.size() && a[i].kind == ValueKind::kNone && optional) return Status::ok();
  if (i >= a.size() || a[i].kind != ValueKind::kIntList) {
    return op_fail(ErrorCode::kInvalidProgram, op, "argument '{}' must be an int list", what);
  }
  *out = a[i].ints;
  return Status::ok();
}

/// `ScalarType?` (an optional dtype argument): nullopt for None.
Result<std::optional<ScalarType>> opt_dtype_arg(OpId op, std::span<const DevArg> a, size_t i, const char* what) {
  if (i < a.size() && a[i].kind == ValueKind::kNone) return std::optional<ScalarType>();
  if (i < a.size() && a[i].kind == ValueKind::kScalarType) return std::optional<ScalarType>(a[i].scalar_type);
  if (i < a.size() && a[i].kind == ValueKind::kInt) return std::optional<ScalarType>(ScalarType(int8_t(a[i].i)));
  return op_fail(ErrorCode::kInvalidProgram, op, "argument '{}' must be a dtype or None", what);
}

Status need(bool ok, OpId op, const char* what, ScalarType t, const char* allowed) {
  if (ok) return Status::ok();
  return op_fail(ErrorCode::kNotSupported, op, "{} has dtype {}; expected one of {}", what, scalar_type_name(t),
                 allowed);
}
Status need_standard(OpId op, const DevTensor& t, const char* what) {
  return need(is_standard(t.dtype), op, what, t.dtype, "f32, f16, bf16, i64, bool");
}
Status need_float(OpId op, const DevTensor& t, const char* what) {
  return need(is_float_dt(t.dtype), op, what, t.dtype, "f32, f16, bf16");
}
/// The out dtypes a result of compute type `ct` may be written to (ATen's canCast).
Status need_out_for(OpId op, ScalarType ct, const DevTensor& out) {
  if (ct == ScalarType::kFloat) return need_float(op, out, "out");
  if (ct == ScalarType::kLong) {
    return need(is_float_dt(out.dtype) || out.dtype == ScalarType::kLong, op, "out", out.dtype, "i64, f32, f16, bf16");
  }
  return need_standard(op, out, "out");
}

Result<int64_t> normalize_dim(OpId op, int64_t dim, int rank) {
  const int64_t r = rank == 0 ? 1 : rank;  // 0-dim tensors take -1 and 0, as in ATen
  if (dim < -r || dim >= r) {
    return op_fail(ErrorCode::kInvalidArgument, op, "dim {} out of range; expected in [{}, {}]", dim, -r, r - 1);
  }
  return dim < 0 ? dim + r : dim;
}

Status check_shape(OpId op, const DevTensor& out, std::span<const int64_t> expected) {
  if (out.shape().size() == expected.size() && std::equal(expected.begin(), expected.end(), out.shape().begin())) {
    return Status::ok();
  }
  return op_fail(ErrorCode::kInvalidProgram, op, "out has shape {}; the op gives {}", shape_str(out.shape()),
                 shape_str(expected));
}

/// Row-major strides of a contiguous tensor.
std::array<int64_t, kMaxDims> contiguous_strides(std::span<const int64_t> sizes) {
  std::array<int64_t, kMaxDims> st{};
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    st[d] = s;
    s *= sizes[d];
  }
  return st;
}

/// `t`'s strides seen through a right-aligned broadcast to `shape` (0 on broadcast dims).
std::array<int64_t, kMaxDims> broadcast_strides(const DevTensor& t, std::span<const int64_t> shape) {
  const auto cst = contiguous_strides(t.shape());
  std::array<int64_t, kMaxDims> st{};
  const int lead = int(shape.size()) - t.rank;
  for (int d = 0; d < int(shape.size()); ++d) {
    const int j = d - lead;
    st[size_t(d)] = (j < 0 || t.sizes[size_t(j)] == 1) ? 0 : cst[size_t(j)];
  }
  return st;
}

/// numpy broadcast of the tensors' shapes; false when incompatible.
bool broadcast_shape(std::initializer_list<const DevTensor*> ts, std::vector<int64_t>* shape) {
  int rank = 0;
  for (const DevTensor* t : ts) rank = std::max(rank, t->rank);
  shape->assign(size_t(rank), 1);
  for (const DevTensor* t : ts) {
    for (int j = 0; j < t->rank; ++j) {
      const int64_t s = t->sizes[size_t(j)];
      int64_t& r = (*shape)[size_t(rank - t->rank + j)];
      if (s == 1) continue;
      if (r != 1 && r != s) return false;
      r = s;
    }
  }
  return true;
}

/// A shape with N operands' strides, size-1 dims dropped and neighbours that
/// are contiguous for every operand merged, so contiguous work runs 1-D.
template <int N>
struct Layout {
  int rank = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t st[N][kMaxDims] = {};
};

template <int N>
Layout<N> coalesce(std::span<const int64_t> sizes, const std::array<const int64_t*, N>& strides) {
  Layout<N> l;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    bool merge = l.rank > 0;
    for (int k = 0; k < N && merge; ++k) merge = l.st[k][l.rank - 1] == strides[k][d] * sizes[d];
    if (merge) {
      l.sizes[l.rank - 1] *= sizes[d];
      for (int k = 0; k < N; ++k) l.st[k][l.rank - 1] = strides[k][d];
    } else {
      l.sizes[l.rank] = sizes[d];
      for (int k = 0; k < N; ++k) l.st[k][l.rank] = strides[k][d];
      ++l.rank;
    }
  }
  return l;
}

int64_t product(std::span<const int64_t> s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

constexpr int kThreads = 256;

/// Grid for a grid-stride loop over n items.
unsigned grid_for(const DeviceContext& ctx, int64_t n, int threads = kThreads) {
  const int64_t cap = int64_t(std::max(ctx.sm_count, 1)) * 32;
  return unsigned(std::max<int64_t>(1, std::min(ceil_div(n, threads), cap)));
}

// ---------------------------------------------------------------------------
// Device helpers: typed loads and stores with the portable kernels' conversions.

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

// Float -> integer as the portable convert(): NaN and out-of-range give the minimum.
__device__ __forceinline__ int64_t f2i64(float v) {
  const float hi = 9223372036854775808.0f;
  return (v >= -hi && v < hi) ? int64_t(v) : INT64_MIN;
}
__device__ __forceinline__ int32_t f2i32(float v) {
  const float hi = 2147483648.0f;
  return (v >= -hi && v < hi) ? int32_t(v) : INT32_MIN;
}

__device__ __forceinline__ float load_f(const void* p, ScalarType t, int64_t i) {
  switch (t) {
    case ScalarType::kFloat: return static_cast<const float*>(p)[i];
    case ScalarType::kBFloat16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case ScalarType::kHalf: return __half2float(static_cast<const __half*>(p)[i]);
    case ScalarType::kLong: return float(static_cast<const int64_t*>(p)[i]);
    case ScalarType::kInt: return float(static_cast<const int32_t*>(p)[i]);
    case ScalarType::kBool: return static_cast<const uint8_t*>(p)[i] != 0 ? 1.f : 0.f;
    default: return 0.f;
  }
}

__device__ __forceinline__ int64_t load_i(const void* p, ScalarType t, int64_t i) {
  switch (t) {
    case ScalarType::kLong: return static_cast<const int64_t*>(p)[i];
    case ScalarType::kInt: return static_cast<const int32_t*>(p)[i];
    case ScalarType::kBool: return static_cast<const uint8_t*>(p)[i] != 0 ? 1 : 0;
    default: return f2i64(load_f(p, t, i));
  }
}

__device__ __forceinline__ void store_f(void* p, ScalarType t, int64_t i, float v) {
  switch (t) {
    case ScalarType::kFloat: static_cast<float*>(p)[i] = v; break;
    case ScalarType::kBFloat16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    case ScalarType::kHalf: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case ScalarType::kLong: static_cast<int64_t*>(p)[i] = f2i64(v); break;
    case ScalarType::kInt: static_cast<int32_t*>(p)[i] = f2i32(v); break;
    case ScalarType::kBool: static_cast<uint8_t*>(p)[i] = v != 0.f ? 1 : 0; break;
    default: break;
  }
}

__device__ __forceinline__ void store_i(void* p, ScalarType t, int64_t i, int64_t v) {
  switch (t) {
    case ScalarType::kLong: static_cast<int64_t*>(p)[i] = v; break;
    case ScalarType::kInt: static_cast<int32_t*>(p)[i] = int32_t(v); break;
    case ScalarType::kBool: static_cast<uint8_t*>(p)[i] = v != 0 ? 1 : 0; break;
    default: store_f(p, t, i, float(v)); break;  // integer -> 16-bit goes through f32, as convert() does
  }
}

template <typename CT>
__device__ __forceinline__ CT load_as(const void* p, ScalarType t, int64_t i) {
  if constexpr (std::is_same_v<CT, float>) {
    return load_f(p, t, i);
  } else {
    return load_i(p, t, i);
  }
}

template <typename CT>
__device__ __forceinline__ void store_as(void* p, ScalarType t, int64_t i, CT v) {
  if constexpr (std::is_same_v<CT, float>) {
    store_f(p, t, i, v);
  } else {
    store_i(p, t, i, v);
  }
}

__device__ __forceinline__ void flag_error(int* flag, int node) { atomicCAS(flag, 0, node + 1); }

// ---------------------------------------------------------------------------
// Elementwise: out[i] = op(in0[i'], in1[i''], in2[i''']) over the broadcast shape.

enum class Ew : int32_t {
  kAdd, kMul, kDiv, kNeg, kRsqrt, kSigmoid, kTanh, kErf, kExp, kLog1p, kClamp, kMaximum, kPow,
  kLe, kLt, kGt, kGe, kEq, kWhere,
};

struct EwOperand {
  const void* data;
  ScalarType dtype;
  int64_t st[kMaxDims];
};

struct EwParams {
  Ew op;
  int rank;
  int nin;
  bool b_scalar;  ///< operand 1 is the constant f1 / i1
  int64_t numel;
  int64_t sizes[kMaxDims];
  void* out;  ///< contiguous over `sizes`
  ScalarType out_dtype;
  EwOperand in[3];
  float f0, f1, f2;  ///< f32 constants: alpha (add), scalar other, clamp bounds (f1, f2)
  int64_t i0, i1;    ///< i64 constants: alpha (add), scalar other, exponent (pow)
  double d0;         ///< pow exponent
};

__device__ __forceinline__ float ew_float(const EwParams& p, float a, float b, float c) {
  switch (p.op) {
    case Ew::kAdd: return a + __fmul_rn(p.f0, b);  // no FMA: the reference rounds the product
    case Ew::kMul: return a * b;
    case Ew::kDiv: return a / b;
    case Ew::kNeg: return -a;
    case Ew::kRsqrt: return 1.0f / sqrtf(a);
    case Ew::kSigmoid: return 1.0f / (1.0f + expf(-a));
    case Ew::kTanh: return tanhf(a);
    case Ew::kErf: return erff(a);
    case Ew::kExp: return expf(a);
    case Ew::kLog1p: return log1pf(a);
    case Ew::kClamp: {
      if (isnan(a)) return a;
      const float lo = a < p.f1 ? p.f1 : a;
      return p.f2 < lo ? p.f2 : lo;
    }
    case Ew::kMaximum: return (isnan(a) || isnan(b)) ? __int_as_float(0x7fc00000) : (a < b ? b : a);
    case Ew::kPow: return p.d0 == 2.0 ? a * a : float(pow(double(a), p.d0));
    case Ew::kLe: return a <= b ? 1.f : 0.f;
    case Ew::kLt: return a < b ? 1.f : 0.f;
    case Ew::kGt: return a > b ? 1.f : 0.f;
    case Ew::kGe: return a >= b ? 1.f : 0.f;
    case Ew::kEq: return a == b ? 1.f : 0.f;
    case Ew::kWhere: return a != 0.f ? b : c;
  }
  return 0.f;
}

__device__ __forceinline__ int64_t ew_int(const EwParams& p, int64_t a, int64_t b, int64_t c) {
  using U = unsigned long long;  // wrapping arithmetic, as PyTorch's integers
  switch (p.op) {
    case Ew::kAdd: return int64_t(U(a) + U(p.i0) * U(b));
    case Ew::kMul: return int64_t(U(a) * U(b));
    case Ew::kNeg: return int64_t(U(0) - U(a));
    case Ew::kPow: {
      U r = 1, base = U(a);
      for (U k = U(p.i0); k != 0; k >>= 1) {
        if (k & 1) r *= base;
        base *= base;
      }
      return int64_t(r);
    }
    case Ew::kLe: return a <= b;
    case Ew::kLt: return a < b;
    case Ew::kGt: return a > b;
    case Ew::kGe: return a >= b;
    case Ew::kEq: return a == b;
    case Ew::kWhere: return a != 0 ? b : c;
    default: return 0;  // float-only ops never run in i64 (the launchers pick f32 for them)
  }
}

template <typename CT>
__global__ void ew_kernel(const EwParams p) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < p.numel; i += step) {
    int64_t o0 = 0, o1 = 0, o2 = 0, rem = i;
    for (int d = p.rank - 1; d > 0; --d) {
      const int64_t idx = rem % p.sizes[d];
      rem /= p.sizes[d];
      o0 += idx * p.in[0].st[d];
      o1 += idx * p.in[1].st[d];
      o2 += idx * p.in[2].st[d];
    }
    if (p.rank > 0) {  // rem < sizes[0] here: no division for the outermost dim
      o0 += rem * p.in[0].st[0];
      o1 += rem * p.in[1].st[0];
      o2 += rem * p.in[2].st[0];
    }
    const CT a = load_as<CT>(p.in[0].data, p.in[0].dtype, o0);
    CT b = CT(0), c = CT(0);
    if (p.b_scalar) {
      if constexpr (std::is_same_v<CT, float>) {
        b = p.f1;
      } else {
        b = p.i1;
      }
    } else if (p.nin > 1) {
      b = load_as<CT>(p.in[1].data, p.in[1].dtype, o1);
    }
    if (p.nin > 2) c = load_as<CT>(p.in[2].data, p.in[2].dtype, o2);
    if constexpr (std::is_same_v<CT, float>) {
      store_f(p.out, p.out_dtype, i, ew_float(p, a, b, c));
    } else {
      store_i(p.out, p.out_dtype, i, ew_int(p, a, b, c));
    }
  }
}

/// Checks that `out` is the broadcast of `ins`, fills the operands and launches.
Status run_ew(DeviceContext& ctx, OpId op, EwParams& p, ScalarType ct, const DevTensor& out,
              std::initializer_list<const DevTensor*> ins) {
  std::vector<int64_t> shape;
  if (!broadcast_shape(ins, &shape)) {
    std::string shapes;
    for (const DevTensor* t : ins) shapes += (shapes.empty() ? "" : " and ") + shape_str(t->shape());
    return op_fail(ErrorCode::kInvalidArgument, op, "shapes {} cannot be broadcast", shapes);
  }
  HF2PTE_RETURN_IF_ERROR(check_shape(op, out, shape));
  const int64_t numel = out.numel();
  if (numel == 0) return Status::ok();
  const auto out_st = contiguous_strides(out.shape());
  std::array<std::array<int64_t, kMaxDims>, 3> st{};
  size_t k = 0;
  for (const DevTensor* t : ins) {
    st[k] = broadcast_strides(*t, out.shape());
    p.in[k].data = t->data;
    p.in[k].dtype = t->dtype;
    ++k;
  }
  p.nin = int(ins.size());
  const Layout<4> l = coalesce<4>(out.shape(), {out_st.data(), st[0].data(), st[1].data(), st[2].data()});
  p.rank = l.rank;
  for (int d = 0; d < l.rank; ++d) {
    p.sizes[d] = l.sizes[d];
    for (int j = 0; j < 3; ++j) p.in[j].st[d] = l.st[j + 1][d];
  }
  p.numel = numel;
  p.out = out.data;
  p.out_dtype = out.dtype;
  const unsigned grid = grid_for(ctx, numel);
  if (ct == ScalarType::kFloat) {
    ew_kernel<float><<<grid, kThreads, 0, ctx.stream>>>(p);
  } else {
    ew_kernel<int64_t><<<grid, kThreads, 0, ctx.stream>>>(p);  // i64 and bool compute
  }
  return Status::ok();
}

/// add / sub (tensor or scalar other, with alpha) and mul (tensor or scalar).
Status launch_arith(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  const bool is_mul = op == OpId::MulOut || op == OpId::MulScalarOut;
  const bool scalar_other = op == OpId::AddScalarOut || op == OpId::MulScalarOut;
  const int sign = op == OpId::SubOut ? -1 : 1;
  const size_t out_i = is_mul ? 2 : 3;
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, out_i, "out"));
  HF2PTE_RETURN_IF_ERROR(need_standard(op, *x, "self"));
  ScalarVal alpha;
  if (!is_mul) {
    HF2PTE_ASSIGN_OR_RETURN(alpha, scalar_arg(op, a, 2, "alpha"));
  }
  const DevTensor* y = nullptr;
  ScalarVal other;
  ScalarType ct;
  if (scalar_other) {
    HF2PTE_ASSIGN_OR_RETURN(other, scalar_arg(op, a, 1, "other"));
    ct = compute_of(promote_scalar(x->dtype, other));
  } else {
    HF2PTE_ASSIGN_OR_RETURN(y, tensor_arg(op, a, 1, "other"));
    HF2PTE_RETURN_IF_ERROR(need_standard(op, *y, "other"));
    ct = compute_of(promote(x->dtype, y->dtype));
  }
  if (ct == ScalarType::kBool) {
    return op_fail(ErrorCode::kNotSupported, op, "arithmetic on bool inputs is not supported; expected f32 or i64");
  }
  if (ct == ScalarType::kLong && alpha.is_double) {
    return op_fail(ErrorCode::kInvalidArgument, op, "alpha must not be a floating point number for integral inputs");
  }
  HF2PTE_RETURN_IF_ERROR(need_out_for(op, ct, *out));
  EwParams p{};
  p.op = is_mul ? Ew::kMul : Ew::kAdd;
  if (ct == ScalarType::kFloat) {
    p.f0 = float(sign) * float(alpha.as_double());
    p.f1 = float(other.as_double());
  } else {
    p.i0 = int64_t(uint64_t(int64_t(sign)) * uint64_t(alpha.i));
    p.i1 = other.i;
  }
  if (scalar_other) {
    p.b_scalar = true;
    return run_ew(ctx, op, p, ct, *out, {x});
  }
  return run_ew(ctx, op, p, ct, *out, {x, y});
}

Status launch_div(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* y, tensor_arg(op, a, 1, "other"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 2, "out"));
  HF2PTE_RETURN_IF_ERROR(need_standard(op, *x, "self"));
  HF2PTE_RETURN_IF_ERROR(need_standard(op, *y, "other"));
  HF2PTE_RETURN_IF_ERROR(need_out_for(op, ScalarType::kFloat, *out));  // true division: always f32
  EwParams p{};
  p.op = Ew::kDiv;
  return run_ew(ctx, op, p, ScalarType::kFloat, *out, {x, y});
}

Status launch_neg(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 1, "out"));
  const ScalarType ct = compute_of(x->dtype);
  HF2PTE_RETURN_IF_ERROR(need(ct == ScalarType::kFloat || ct == ScalarType::kLong, op, "self", x->dtype,
                              "f32, f16, bf16, i64"));
  HF2PTE_RETURN_IF_ERROR(need_out_for(op, ct, *out));
  EwParams p{};
  p.op = Ew::kNeg;
  return run_ew(ctx, op, p, ct, *out, {x});
}

/// rsqrt, sigmoid, tanh, erf, exp, log1p: float results for any standard input.
Status launch_unary_float(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 1, "out"));
  HF2PTE_RETURN_IF_ERROR(need_standard(op, *x, "self"));
  HF2PTE_RETURN_IF_ERROR(need_out_for(op, ScalarType::kFloat, *out));
  EwParams p{};
  switch (op) {
    case OpId::RsqrtOut: p.op = Ew::kRsqrt; break;
    case OpId::SigmoidOut: p.op = Ew::kSigmoid; break;
    case OpId::TanhOut: p.op = Ew::kTanh; break;
    case OpId::ErfOut: p.op = Ew::kErf; break;
    case OpId::ExpOut: p.op = Ew::kExp; break;
    default: p.op = Ew::kLog1p; break;
  }
  return run_ew(ctx, op, p, ScalarType::kFloat, *out, {x});
}

Status launch_clamp(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 3, "out"));
  HF2PTE_RETURN_IF_ERROR(need_standard(op, *x, "self"));
  HF2PTE_RETURN_IF_ERROR(need_out_for(op, ScalarType::kFloat, *out));
  EwParams p{};
  p.op = Ew::kClamp;
  p.f1 = -std::numeric_limits<float>::infinity();
  p.f2 = std::numeric_limits<float>::infinity();
  if (a[1].kind != ValueKind::kNone) {
    HF2PTE_ASSIGN_OR_RETURN(ScalarVal lo, scalar_arg(op, a, 1, "min"));
    p.f1 = float(lo.as_double());
  }
  if (a[2].kind != ValueKind::kNone) {
    HF2PTE_ASSIGN_OR_RETURN(ScalarVal hi, scalar_arg(op, a, 2, "max"));
    p.f2 = float(hi.as_double());
  }
  return run_ew(ctx, op, p, ScalarType::kFloat, *out, {x});
}

Status launch_maximum(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* y, tensor_arg(op, a, 1, "other"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 2, "out"));
  HF2PTE_RETURN_IF_ERROR(need_float(op, *x, "self"));
  HF2PTE_RETURN_IF_ERROR(need_float(op, *y, "other"));
  HF2PTE_RETURN_IF_ERROR(need_out_for(op, ScalarType::kFloat, *out));
  EwParams p{};
  p.op = Ew::kMaximum;
  return run_ew(ctx, op, p, ScalarType::kFloat, *out, {x, y});
}

Status launch_pow(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(ScalarVal e, scalar_arg(op, a, 1, "exponent"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 2, "out"));
  HF2PTE_RETURN_IF_ERROR(need_standard(op, *x, "self"));
  const ScalarType ct = compute_of(promote_scalar(x->dtype, e));
  if (ct == ScalarType::kBool) {
    return op_fail(ErrorCode::kNotSupported, op, "arithmetic on bool inputs is not supported; expected f32 or i64");
  }
  HF2PTE_RETURN_IF_ERROR(need_out_for(op, ct, *out));
  EwParams p{};
  p.op = Ew::kPow;
  if (ct == ScalarType::kFloat) {
    p.d0 = e.as_double();
  } else {
    if (e.i < 0) {
      return op_fail(ErrorCode::kInvalidArgument, op,
                     "integers to negative integer powers are not allowed; got exponent {}", e.i);
    }
    p.i0 = e.i;
  }
  return run_ew(ctx, op, p, ct, *out, {x});
}

Status launch_compare(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* y, tensor_arg(op, a, 1, "other"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 2, "out"));
  HF2PTE_RETURN_IF_ERROR(need_standard(op, *x, "self"));
  HF2PTE_RETURN_IF_ERROR(need_standard(op, *y, "other"));
  HF2PTE_RETURN_IF_ERROR(need_standard(op, *out, "out"));
  EwParams p{};
  switch (op) {
    case OpId::LeTensorOut: p.op = Ew::kLe; break;
    case OpId::LtTensorOut: p.op = Ew::kLt; break;
    case OpId::GtTensorOut: p.op = Ew::kGt; break;
    case OpId::GeTensorOut: p.op = Ew::kGe; break;
    default: p.op = Ew::kEq; break;
  }
  return run_ew(ctx, op, p, compute_of(promote(x->dtype, y->dtype)), *out, {x, y});
}

Status launch_where(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* cond, tensor_arg(op, a, 0, "condition"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 1, "self"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* y, tensor_arg(op, a, 2, "other"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 3, "out"));
  if (cond->dtype != ScalarType::kBool) {
    return op_fail(ErrorCode::kInvalidArgument, op, "condition must be bool; got {}", scalar_type_name(cond->dtype));
  }
  HF2PTE_RETURN_IF_ERROR(need_standard(op, *x, "self"));
  HF2PTE_RETURN_IF_ERROR(need_standard(op, *y, "other"));
  const ScalarType ct = compute_of(promote(x->dtype, y->dtype));
  HF2PTE_RETURN_IF_ERROR(need_out_for(op, ct, *out));
  EwParams p{};
  p.op = Ew::kWhere;
  // 16-bit values pass through f32 exactly: a selection rounds nothing.
  return run_ew(ctx, op, p, ct, *out, {cond, x, y});
}

// ---------------------------------------------------------------------------
// Strided copy: dst[idx . dst_st] = convert(src[idx . src_st]) over `sizes`.

struct CopyParams {
  int rank;
  int64_t numel;
  int64_t sizes[kMaxDims];
  int64_t src_st[kMaxDims];
  int64_t dst_st[kMaxDims];
  const void* src;
  void* dst;
  ScalarType src_dtype, dst_dtype;
};

__device__ __forceinline__ void copy_offsets(const CopyParams& p, int64_t i, int64_t* so, int64_t* dof) {
  int64_t s = 0, d = 0, rem = i;
  for (int k = p.rank - 1; k > 0; --k) {
    const int64_t idx = rem % p.sizes[k];
    rem /= p.sizes[k];
    s += idx * p.src_st[k];
    d += idx * p.dst_st[k];
  }
  if (p.rank > 0) {
    s += rem * p.src_st[0];
    d += rem * p.dst_st[0];
  }
  *so = s;
  *dof = d;
}

/// Same dtype: moves elements of E's size (1, 2, 4 or 8 bytes).
template <typename E>
__global__ void copy_same_kernel(const CopyParams p) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < p.numel; i += step) {
    int64_t so, dof;
    copy_offsets(p, i, &so, &dof);
    static_cast<E*>(p.dst)[dof] = static_cast<const E*>(p.src)[so];
  }
}

__global__ void copy_convert_kernel(const CopyParams p) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < p.numel; i += step) {
    int64_t so, dof;
    copy_offsets(p, i, &so, &dof);
    if (is_float_dt(p.src_dtype)) {
      store_f(p.dst, p.dst_dtype, dof, load_f(p.src, p.src_dtype, so));
    } else {
      store_i(p.dst, p.dst_dtype, dof, load_i(p.src, p.src_dtype, so));
    }
  }
}

/// Copies (converting dtypes) over `sizes`; element strides, pointers at element 0.
Status strided_copy(DeviceContext& ctx, OpId op, std::span<const int64_t> sizes, const void* src, ScalarType sdt,
                    const int64_t* src_st, void* dst, ScalarType ddt, const int64_t* dst_st) {
  const int64_t numel = product(sizes);
  if (numel == 0) return Status::ok();
  const Layout<2> l = coalesce<2>(sizes, {dst_st, src_st});
  const size_t es = element_size(sdt);
  if (sdt == ddt) {
    const bool dense = l.rank == 0 || (l.rank == 1 && l.st[0][0] == 1 && l.st[1][0] == 1);
    if (dense) {
      if (src == dst) return Status::ok();
      return cuda_check(cudaMemcpyAsync(dst, src, size_t(numel) * es, cudaMemcpyDeviceToDevice, ctx.stream), op,
                        "cudaMemcpyAsync");
    }
    // Rows of a sub-block (cat, slice on an outer dim): a 2-D copy engine transfer.
    const size_t width = size_t(l.sizes[1]) * es;
    const bool pitched = l.rank == 2 && l.st[0][1] == 1 && l.st[1][1] == 1 && l.st[0][0] >= l.sizes[1] &&
                         l.st[1][0] >= l.sizes[1] && l.st[0][0] < (int64_t(1) << 30) && l.st[1][0] < (int64_t(1) << 30);
    if (pitched && width >= 128) {
      return cuda_check(cudaMemcpy2DAsync(dst, size_t(l.st[0][0]) * es, src, size_t(l.st[1][0]) * es, width,
                                          size_t(l.sizes[0]), cudaMemcpyDeviceToDevice, ctx.stream),
                        op, "cudaMemcpy2DAsync");
    }
  }
  CopyParams p{};
  p.rank = l.rank;
  p.numel = numel;
  for (int d = 0; d < l.rank; ++d) {
    p.sizes[d] = l.sizes[d];
    p.dst_st[d] = l.st[0][d];
    p.src_st[d] = l.st[1][d];
  }
  p.src = src;
  p.dst = dst;
  p.src_dtype = sdt;
  p.dst_dtype = ddt;
  const unsigned grid = grid_for(ctx, numel);
  if (sdt != ddt) {
    copy_convert_kernel<<<grid, kThreads, 0, ctx.stream>>>(p);
  } else if (es == 1) {
    copy_same_kernel<uint8_t><<<grid, kThreads, 0, ctx.stream>>>(p);
  } else if (es == 2) {
    copy_same_kernel<uint16_t><<<grid, kThreads, 0, ctx.stream>>>(p);
  } else if (es == 4) {
    copy_same_kernel<uint32_t><<<grid, kThreads, 0, ctx.stream>>>(p);
  } else {
    copy_same_kernel<uint64_t><<<grid, kThreads, 0, ctx.stream>>>(p);
  }
  return Status::ok();
}

Status check_same_dtype(OpId op, const DevTensor& self, const DevTensor& out) {
  if (self.dtype != out.dtype) {
    return op_fail(ErrorCode::kInvalidArgument, op, "out dtype must match self; expected {}, got {}",
                   scalar_type_name(self.dtype), scalar_type_name(out.dtype));
  }
  return need_standard(op, self, "self");
}

Status launch_view(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 2, "out"));
  HF2PTE_RETURN_IF_ERROR(check_same_dtype(op, *x, *out));
  if (x->numel() != out->numel()) {
    return op_fail(ErrorCode::kInvalidProgram, op, "out shape {} does not hold the {} elements of self {}",
                   shape_str(out->shape()), x->numel(), shape_str(x->shape()));
  }
  // Both contiguous: logical order is memory order.
  const int64_t n[] = {x->numel()};
  const int64_t one[] = {1};
  return strided_copy(ctx, op, n, x->data, x->dtype, one, out->data, out->dtype, one);
}

Status launch_permute(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "self"));
  std::vector<int64_t> dims;
  HF2PTE_RETURN_IF_ERROR(int_list_arg(op, a, 1, "dims", false, &dims));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 2, "out"));
  HF2PTE_RETURN_IF_ERROR(check_same_dtype(op, *x, *out));
  if (int(dims.size()) != x->rank) {
    return op_fail(ErrorCode::kInvalidArgument, op, "dims {} must list each of the {} dims of self once",
                   shape_str(dims), x->rank);
  }
  const auto cst = contiguous_strides(x->shape());
  std::vector<int64_t> shape(dims.size());
  std::array<int64_t, kMaxDims> src_st{};
  uint32_t seen = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    HF2PTE_ASSIGN_OR_RETURN(int64_t d, normalize_dim(op, dims[i], x->rank));
    if (seen & (uint32_t(1) << d)) {
      return op_fail(ErrorCode::kInvalidArgument, op, "dims {} repeat dim {}", shape_str(dims), d);
    }
    seen |= uint32_t(1) << d;
    shape[i] = x->sizes[size_t(d)];
    src_st[i] = cst[size_t(d)];
  }
  HF2PTE_RETURN_IF_ERROR(check_shape(op, *out, shape));
  const auto dst_st = contiguous_strides(shape);
  return strided_copy(ctx, op, shape, x->data, x->dtype, src_st.data(), out->data, out->dtype, dst_st.data());
}

Status launch_slice(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim_arg, int_arg(op, a, 1, "dim"));
  HF2PTE_ASSIGN_OR_RETURN(std::optional<int64_t> start_arg, opt_int_arg(op, a, 2, "start"));
  HF2PTE_ASSIGN_OR_RETURN(std::optional<int64_t> end_arg, opt_int_arg(op, a, 3, "end"));
  HF2PTE_ASSIGN_OR_RETURN(int64_t step, int_arg(op, a, 4, "step"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 5, "out"));
  HF2PTE_RETURN_IF_ERROR(check_same_dtype(op, *x, *out));
  if (x->rank == 0) return op_fail(ErrorCode::kInvalidArgument, op, "slice() cannot be applied to a 0-dim tensor");
  if (step <= 0) return op_fail(ErrorCode::kInvalidArgument, op, "slice step must be positive; got {}", step);
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim, normalize_dim(op, dim_arg, x->rank));
  // Python slice bounds: negatives wrap once, then clamp into [0, size], end >= start.
  const int64_t size = x->sizes[size_t(dim)];
  int64_t start = start_arg.value_or(0);
  int64_t end = end_arg.value_or(std::numeric_limits<int64_t>::max());
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = start < 0 ? 0 : (start > size ? size : start);
  end = end < start ? start : (end > size ? size : end);
  const int64_t len = (end - start + step - 1) / step;
  std::vector<int64_t> shape(x->shape().begin(), x->shape().end());
  shape[size_t(dim)] = len;
  HF2PTE_RETURN_IF_ERROR(check_shape(op, *out, shape));
  auto src_st = contiguous_strides(x->shape());
  const int64_t base = len > 0 ? start * src_st[size_t(dim)] : 0;
  src_st[size_t(dim)] *= step;
  const auto dst_st = contiguous_strides(shape);
  const auto* src = static_cast<const uint8_t*>(x->data) + size_t(base) * element_size(x->dtype);
  return strided_copy(ctx, op, shape, src, x->dtype, src_st.data(), out->data, out->dtype, dst_st.data());
}

Status launch_cat(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  if (a.empty() || a[0].kind != ValueKind::kTensorList) {
    return op_fail(ErrorCode::kInvalidProgram, op, "argument 'tensors' must be a tensor list");
  }
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim_arg, int_arg(op, a, 1, "dim"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 2, "out"));
  HF2PTE_RETURN_IF_ERROR(need_standard(op, *out, "out"));
  // Legacy torch behaviour: 1-D empty tensors are skipped whatever their rank.
  std::vector<const DevTensor*> inputs;
  for (size_t k = 0; k < a[0].list.size(); ++k) {
    if (!a[0].list[k]) return op_fail(ErrorCode::kInvalidProgram, op, "tensors[{}] is None", k);
    const DevTensor& t = *a[0].list[k];
    HF2PTE_RETURN_IF_ERROR(need_standard(op, t, "tensors"));
    const bool castable = !(is_float_dt(t.dtype) && !is_float_dt(out->dtype)) &&
                          !(t.dtype != ScalarType::kBool && out->dtype == ScalarType::kBool);
    if (!castable) {
      return op_fail(ErrorCode::kInvalidArgument, op, "tensors[{}] of dtype {} cannot be cast to out dtype {}", k,
                     scalar_type_name(t.dtype), scalar_type_name(out->dtype));
    }
    if (t.rank == 1 && t.sizes[0] == 0) continue;
    inputs.push_back(&t);
  }
  if (inputs.empty()) return check_shape(op, *out, std::vector<int64_t>{0});
  const DevTensor& ref = *inputs.front();
  if (ref.rank == 0) return op_fail(ErrorCode::kInvalidArgument, op, "zero-dimensional tensors cannot be concatenated");
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim, normalize_dim(op, dim_arg, ref.rank));
  std::vector<int64_t> shape(ref.shape().begin(), ref.shape().end());
  shape[size_t(dim)] = 0;
  for (const DevTensor* t : inputs) {
    bool same = t->rank == ref.rank;
    for (int d = 0; same && d < ref.rank; ++d) same = d == dim || t->sizes[size_t(d)] == ref.sizes[size_t(d)];
    if (!same) {
      return op_fail(ErrorCode::kInvalidArgument, op, "sizes of tensors must match except in dimension {}; got {} and {}",
                     dim, shape_str(ref.shape()), shape_str(t->shape()));
    }
    shape[size_t(dim)] += t->sizes[size_t(dim)];
  }
  HF2PTE_RETURN_IF_ERROR(check_shape(op, *out, shape));
  const auto out_st = contiguous_strides(shape);
  const size_t oes = element_size(out->dtype);
  int64_t at = 0;
  for (const DevTensor* t : inputs) {
    const auto src_st = contiguous_strides(t->shape());
    void* dst = static_cast<uint8_t*>(out->data) + size_t(at * out_st[size_t(dim)]) * oes;
    HF2PTE_RETURN_IF_ERROR(
        strided_copy(ctx, op, t->shape(), t->data, t->dtype, src_st.data(), dst, out->dtype, out_st.data()));
    at += t->sizes[size_t(dim)];
  }
  return Status::ok();
}

/// clone and _to_dim_order_copy: a same-shape copy (the latter converts dtypes).
Status launch_clone(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  const bool to_dim_order = op == OpId::ToDimOrderCopyOut;
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, to_dim_order ? 3 : 2, "out"));
  if (to_dim_order) {
    HF2PTE_RETURN_IF_ERROR(need_standard(op, *x, "self"));
    HF2PTE_RETURN_IF_ERROR(need_standard(op, *out, "out"));
    std::vector<int64_t> order;
    HF2PTE_RETURN_IF_ERROR(int_list_arg(op, a, 2, "dim_order", true, &order));
    // Device tensors are contiguous: only the identity order (or None) is one.
    for (size_t i = 0; i < order.size(); ++i) {
      if (order[i] != int64_t(i) || order.size() != size_t(x->rank)) {
        return op_fail(ErrorCode::kNotSupported, op, "dim_order {} is not supported on the device; expected None or the contiguous order",
                       shape_str(order));
      }
    }
  } else {
    HF2PTE_RETURN_IF_ERROR(check_same_dtype(op, *x, *out));
    HF2PTE_ASSIGN_OR_RETURN(std::optional<int64_t> mf, opt_int_arg(op, a, 1, "memory_format"));
    if (mf && *mf != 0 && *mf != 1) {
      return op_fail(ErrorCode::kNotSupported, op,
                     "memory_format {} is not supported; expected None, 0 (contiguous) or 1 (preserve)", *mf);
    }
  }
  HF2PTE_RETURN_IF_ERROR(check_shape(op, *out, x->shape()));
  const auto st = contiguous_strides(x->shape());
  return strided_copy(ctx, op, x->shape(), x->data, x->dtype, st.data(), out->data, out->dtype, st.data());
}

Status launch_expand(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "self"));
  std::vector<int64_t> size;
  HF2PTE_RETURN_IF_ERROR(int_list_arg(op, a, 1, "size", false, &size));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 3, "out"));
  HF2PTE_RETURN_IF_ERROR(check_same_dtype(op, *x, *out));
  if (size.size() < size_t(x->rank) || size.size() > size_t(kMaxDims)) {
    return op_fail(ErrorCode::kInvalidArgument, op, "cannot expand {} to {} dims", shape_str(x->shape()), size.size());
  }
  const size_t lead = size.size() - size_t(x->rank);
  for (size_t i = 0; i < size.size(); ++i) {
    if (i < lead) {
      if (size[i] < 0) return op_fail(ErrorCode::kInvalidArgument, op, "-1 is not allowed on new leading dim {}", i);
      continue;
    }
    const int64_t in = x->sizes[i - lead];
    if (size[i] == -1) size[i] = in;
    if (in != size[i] && in != 1) {
      return op_fail(ErrorCode::kInvalidArgument, op, "cannot expand {} to {}", shape_str(x->shape()), shape_str(size));
    }
  }
  HF2PTE_RETURN_IF_ERROR(check_shape(op, *out, size));
  const auto src_st = broadcast_strides(*x, size);
  const auto dst_st = contiguous_strides(size);
  return strided_copy(ctx, op, size, x->data, x->dtype, src_st.data(), out->data, out->dtype, dst_st.data());
}

// ---------------------------------------------------------------------------
// Reductions (sum, mean, amax) and softmax.

enum class Red : int32_t { kSum, kMean, kMax };

struct RedParams {
  const void* in;
  ScalarType in_dtype;
  void* out;
  ScalarType out_dtype;
  Red op;
  int64_t count;  ///< reduced elements per output
  int64_t outs;   ///< output elements
  int kept_rank, red_rank;
  int64_t kept_sizes[kMaxDims], kept_st[kMaxDims];
  int64_t red_sizes[kMaxDims], red_st[kMaxDims];
};

template <typename A>
__device__ __forceinline__ A red_identity(Red op) {
  if constexpr (std::is_same_v<A, float>) {
    return op == Red::kMax ? -INFINITY : 0.f;
  } else {
    return op == Red::kMax ? INT64_MIN : 0;
  }
}

__device__ __forceinline__ float red_combine(Red op, float a, float b) {
  if (op != Red::kMax) return a + b;
  if (isnan(a) || isnan(b)) return __int_as_float(0x7fc00000);  // NaN wins, as torch.amax
  return b > a ? b : a;
}

__device__ __forceinline__ int64_t red_combine(Red op, int64_t a, int64_t b) {
  if (op != Red::kMax) return int64_t((unsigned long long)a + (unsigned long long)b);  // wraps
  return b > a ? b : a;
}

__device__ __forceinline__ float shfl_down(float v, int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ int64_t shfl_down(int64_t v, int o) {
  return int64_t(__shfl_down_sync(0xffffffffu, (long long)v, o));
}

/// Reduces one value per thread over the block; every thread gets the result.
/// `smem` holds 33 values; blockDim.x is a multiple of 32.
template <typename A>
__device__ A block_reduce(Red op, A v, A* smem) {
  for (int o = 16; o > 0; o >>= 1) v = red_combine(op, v, shfl_down(v, o));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int nw = blockDim.x >> 5;
    v = lane < nw ? smem[lane] : red_identity<A>(op);
    for (int o = 16; o > 0; o >>= 1) v = red_combine(op, v, shfl_down(v, o));
    if (lane == 0) smem[32] = v;
  }
  __syncthreads();
  v = smem[32];
  __syncthreads();  // smem may be reused right after
  return v;
}

template <typename A>
__device__ __forceinline__ A red_finish(const RedParams& p, A acc) {
  if constexpr (std::is_same_v<A, float>) {
    if (p.op == Red::kMean) return acc / float(p.count);  // count 0 gives NaN, as torch.mean
  }
  return acc;
}

/// One block per output row when the reduced elements of a row are contiguous.
template <typename A>
__global__ void reduce_rows_kernel(const RedParams p) {
  __shared__ A smem[33];
  for (int64_t row = blockIdx.x; row < p.outs; row += gridDim.x) {
    A acc = red_identity<A>(p.op);
    const int64_t base = row * p.count;
    for (int64_t j = threadIdx.x; j < p.count; j += blockDim.x) {
      acc = red_combine(p.op, acc, load_as<A>(p.in, p.in_dtype, base + j));
    }
    acc = block_reduce(p.op, acc, smem);
    if (threadIdx.x == 0) store_as<A>(p.out, p.out_dtype, row, red_finish(p, acc));
  }
}

/// One thread per output element, walking the reduced dims by strides.
template <typename A>
__global__ void reduce_generic_kernel(const RedParams p) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < p.outs; o += step) {
    int64_t base = 0, rem = o;
    for (int d = p.kept_rank - 1; d >= 0; --d) {
      base += (rem % p.kept_sizes[d]) * p.kept_st[d];
      rem /= p.kept_sizes[d];
    }
    A acc = red_identity<A>(p.op);
    int64_t idx[kMaxDims] = {};
    int64_t off = 0;
    for (int64_t j = 0; j < p.count; ++j) {
      acc = red_combine(p.op, acc, load_as<A>(p.in, p.in_dtype, base + off));
      for (int d = p.red_rank - 1; d >= 0; --d) {  // odometer step
        if (++idx[d] < p.red_sizes[d]) {
          off += p.red_st[d];
          break;
        }
        off -= p.red_st[d] * (p.red_sizes[d] - 1);
        idx[d] = 0;
      }
    }
    store_as<A>(p.out, p.out_dtype, o, red_finish(p, acc));
  }
}

/// Plans and launches a reduction of `self` over `dims` (empty: all) into `out`.
Status run_reduce(DeviceContext& ctx, OpId op, Red red, const DevTensor& self, const std::vector<int64_t>& dims,
                  bool keepdim, const DevTensor& out, bool int_acc) {
  const int rank = self.rank;
  uint32_t listed = 0;
  for (int64_t d : dims) {
    HF2PTE_ASSIGN_OR_RETURN(int64_t nd, normalize_dim(op, d, rank));
    if (listed & (uint32_t(1) << nd)) {
      return op_fail(ErrorCode::kInvalidArgument, op, "dim {} appears multiple times in the list of dims", d);
    }
    listed |= uint32_t(1) << nd;
  }
  // None or [] reduces every dim, as in ATen; a 0-dim tensor reduces nothing.
  const uint32_t mask = rank == 0 ? 0 : (dims.empty() ? (uint32_t(1) << rank) - 1 : listed);
  const auto cst = contiguous_strides(self.shape());
  std::vector<int64_t> out_shape, kept_sizes, kept_st, red_sizes, red_st;
  int64_t count = 1;
  // Row layout: every kept dim (of size > 1) comes before every reduced one.
  bool rows = true, seen_reduced = false;
  for (int d = 0; d < rank; ++d) {
    const int64_t s = self.sizes[size_t(d)];
    if (mask & (uint32_t(1) << d)) {
      red_sizes.push_back(s);
      red_st.push_back(cst[size_t(d)]);
      count *= s;
      if (keepdim) out_shape.push_back(1);
      if (s != 1) seen_reduced = true;
    } else {
      kept_sizes.push_back(s);
      kept_st.push_back(cst[size_t(d)]);
      out_shape.push_back(s);
      if (s != 1 && seen_reduced) rows = false;
    }
  }
  HF2PTE_RETURN_IF_ERROR(check_shape(op, out, out_shape));
  RedParams p{};
  p.in = self.data;
  p.in_dtype = self.dtype;
  p.out = out.data;
  p.out_dtype = out.dtype;
  p.op = red;
  p.count = count;
  p.outs = out.numel();
  if (p.outs == 0) return Status::ok();
  if (rows && count >= 64) {
    const int threads = count >= 4096 ? 512 : (count >= 512 ? 256 : 64);
    const unsigned grid = unsigned(std::min<int64_t>(p.outs, int64_t(std::max(ctx.sm_count, 1)) * 64));
    if (int_acc) {
      reduce_rows_kernel<int64_t><<<grid, threads, 0, ctx.stream>>>(p);
    } else {
      reduce_rows_kernel<float><<<grid, threads, 0, ctx.stream>>>(p);
    }
    return Status::ok();
  }
  const Layout<1> kl = coalesce<1>(kept_sizes, {kept_st.data()});
  const Layout<1> rl = coalesce<1>(red_sizes, {red_st.data()});
  p.kept_rank = kl.rank;
  p.red_rank = rl.rank;
  for (int d = 0; d < kl.rank; ++d) {
    p.kept_sizes[d] = kl.sizes[d];
    p.kept_st[d] = kl.st[0][d];
  }
  for (int d = 0; d < rl.rank; ++d) {
    p.red_sizes[d] = rl.sizes[d];
    p.red_st[d] = rl.st[0][d];
  }
  const unsigned grid = grid_for(ctx, p.outs);
  if (int_acc) {
    reduce_generic_kernel<int64_t><<<grid, kThreads, 0, ctx.stream>>>(p);
  } else {
    reduce_generic_kernel<float><<<grid, kThreads, 0, ctx.stream>>>(p);
  }
  return Status::ok();
}

/// mean.out and sum.IntList_out: (self, dim?, keepdim, *, dtype?, out).
Status launch_sum_mean(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  const bool mean = op == OpId::MeanOut;
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "self"));
  std::vector<int64_t> dims;
  HF2PTE_RETURN_IF_ERROR(int_list_arg(op, a, 1, "dim", true, &dims));
  HF2PTE_ASSIGN_OR_RETURN(bool keepdim, bool_arg(op, a, 2, "keepdim"));
  HF2PTE_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, opt_dtype_arg(op, a, 3, "dtype"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 4, "out"));
  if (dtype && *dtype != out->dtype) {
    return op_fail(ErrorCode::kNotSupported, op, "dtype argument {} is not supported; expected None or the out's dtype ({})",
                   int(*dtype), scalar_type_name(out->dtype));
  }
  bool int_acc = false;
  if (mean) {
    HF2PTE_RETURN_IF_ERROR(need_float(op, *x, "self"));
    HF2PTE_RETURN_IF_ERROR(need_float(op, *out, "out"));
  } else {
    const auto ok_in = [](ScalarType t) { return is_float_dt(t) || is_index_dt(t) || t == ScalarType::kBool; };
    HF2PTE_RETURN_IF_ERROR(need(ok_in(x->dtype), op, "self", x->dtype, "f32, f16, bf16, i64, i32, bool"));
    HF2PTE_RETURN_IF_ERROR(
        need(is_float_dt(out->dtype) || is_index_dt(out->dtype), op, "out", out->dtype, "f32, f16, bf16, i64, i32"));
    if (is_float_dt(x->dtype) && !is_float_dt(out->dtype)) {
      return op_fail(ErrorCode::kInvalidArgument, op, "a floating sum cannot be written to {}",
                     scalar_type_name(out->dtype));
    }
    int_acc = !is_float_dt(x->dtype) && !is_float_dt(out->dtype);
  }
  return run_reduce(ctx, op, mean ? Red::kMean : Red::kSum, *x, dims, keepdim, *out, int_acc);
}

/// amax.out: (self, dim=[], keepdim, *, out); [] reduces every dim.
Status launch_amax(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "self"));
  std::vector<int64_t> dims;
  HF2PTE_RETURN_IF_ERROR(int_list_arg(op, a, 1, "dim", false, &dims));
  HF2PTE_ASSIGN_OR_RETURN(bool keepdim, bool_arg(op, a, 2, "keepdim"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 3, "out"));
  if (out->dtype != x->dtype) {
    return op_fail(ErrorCode::kInvalidArgument, op, "out dtype {} must equal self dtype {}",
                   scalar_type_name(out->dtype), scalar_type_name(x->dtype));
  }
  HF2PTE_RETURN_IF_ERROR(
      need(is_float_dt(x->dtype) || is_index_dt(x->dtype), op, "self", x->dtype, "f32, f16, bf16, i64, i32"));
  // A zero-size reduced dim with a non-empty out has no maximum.
  int64_t count = 1;
  if (dims.empty()) {
    count = x->numel();
  } else {
    for (int64_t d : dims) {
      HF2PTE_ASSIGN_OR_RETURN(int64_t nd, normalize_dim(op, d, x->rank));
      if (x->rank > 0) count *= x->sizes[size_t(nd)];
    }
  }
  if (count == 0 && x->numel() != 0) {
    return op_fail(ErrorCode::kInvalidArgument, op, "cannot reduce over a zero-size dim");
  }
  return run_reduce(ctx, op, Red::kMax, *x, dims, keepdim, *out, !is_float_dt(x->dtype));
}

struct SoftmaxParams {
  const void* in;
  void* out;
  ScalarType dtype;
  int64_t outer, n, inner;
};

/// One block per row (the softmax dim is innermost): max, sum of exp, write.
__global__ void softmax_rows_kernel(const SoftmaxParams p) {
  __shared__ float smem[33];
  for (int64_t row = blockIdx.x; row < p.outer; row += gridDim.x) {
    const int64_t base = row * p.n;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < p.n; j += blockDim.x) m = red_combine(Red::kMax, m, load_f(p.in, p.dtype, base + j));
    m = block_reduce(Red::kMax, m, smem);
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < p.n; j += blockDim.x) s += expf(load_f(p.in, p.dtype, base + j) - m);
    s = block_reduce(Red::kSum, s, smem);
    const float inv = 1.f / s;
    for (int64_t j = threadIdx.x; j < p.n; j += blockDim.x) {
      store_f(p.out, p.dtype, base + j, expf(load_f(p.in, p.dtype, base + j) - m) * inv);
    }
  }
}

/// One thread per (outer, inner) pair; neighbouring threads read neighbouring columns.
__global__ void softmax_strided_kernel(const SoftmaxParams p) {
  const int64_t total = p.outer * p.inner;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += step) {
    const int64_t base = (t / p.inner) * p.n * p.inner + t % p.inner;
    float m = -INFINITY;
    for (int64_t j = 0; j < p.n; ++j) m = red_combine(Red::kMax, m, load_f(p.in, p.dtype, base + j * p.inner));
    float s = 0.f;
    for (int64_t j = 0; j < p.n; ++j) s += expf(load_f(p.in, p.dtype, base + j * p.inner) - m);
    const float inv = 1.f / s;
    for (int64_t j = 0; j < p.n; ++j) {
      const int64_t o = base + j * p.inner;
      store_f(p.out, p.dtype, o, expf(load_f(p.in, p.dtype, o) - m) * inv);
    }
  }
}

Status launch_softmax(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim_arg, int_arg(op, a, 1, "dim"));
  HF2PTE_ASSIGN_OR_RETURN(bool half_to_float, bool_arg(op, a, 2, "half_to_float"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 3, "out"));
  HF2PTE_RETURN_IF_ERROR(need_float(op, *x, "self"));
  if (out->dtype != x->dtype) {
    return op_fail(ErrorCode::kNotSupported, op, "out has dtype {}; expected self's ({})",
                   scalar_type_name(out->dtype), scalar_type_name(x->dtype));
  }
  if (half_to_float) {
    return op_fail(ErrorCode::kNotSupported, op, "half_to_float=True is not supported (the out has self's dtype)");
  }
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim, normalize_dim(op, dim_arg, x->rank));
  HF2PTE_RETURN_IF_ERROR(check_shape(op, *out, x->shape()));
  SoftmaxParams p{x->data, out->data, x->dtype, 1, 1, 1};
  if (x->rank > 0) {
    p.outer = product(x->shape().first(size_t(dim)));
    p.n = x->sizes[size_t(dim)];
    p.inner = product(x->shape().subspan(size_t(dim) + 1));
  }
  if (p.outer * p.n * p.inner == 0) return Status::ok();
  if (p.inner == 1 && p.n >= 32) {
    const int threads = p.n >= 4096 ? 512 : (p.n >= 512 ? 256 : 64);
    const unsigned grid = unsigned(std::min<int64_t>(p.outer, int64_t(std::max(ctx.sm_count, 1)) * 64));
    softmax_rows_kernel<<<grid, threads, 0, ctx.stream>>>(p);
  } else {
    softmax_strided_kernel<<<grid_for(ctx, p.outer * p.inner), kThreads, 0, ctx.stream>>>(p);
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------
// Matrix products. y[b] = alpha * x[b] @ w[b] + beta * bias, all row-major.
//
// Decode (M <= 4) is bound by reading w once: the GEMV kernel gives each
// block a tile of 8 * VEC columns (VEC = 16 bytes of elements per thread, so
// 8 lanes read one full 128-byte line of a row and a warp 4 rows per load),
// spreads the rows of its K-chunk over 8 warps with 4 loads in flight per
// thread, and adds up the row groups (shuffles) and warps (shared memory).
// When column tiles alone leave SMs idle, K is split over blockIdx.y:
// partial sums go to scratch and the last block of a tile (an atomic ticket)
// adds them in a fixed order, so results do not depend on timing.

constexpr int kGemvThreads = 256;
constexpr int kGemvWarps = kGemvThreads / 32;
constexpr int kGemvMaxM = 4;
constexpr int kGemvUnroll = 4;

struct GemvParams {
  const void* x;  ///< [M, K] per batch
  const void* w;  ///< [K, N] per batch
  void* y;        ///< [M, N] per batch
  const void* bias;  ///< addmm's self, read at m * bias_s0 + n * bias_s1 when beta != 0
  int64_t K, N;
  int M;
  int split;      ///< K-chunks (gridDim.y)
  int64_t k_chunk;
  int64_t x_bs, w_bs, y_bs;  ///< batch strides (elements)
  int64_t bias_s0, bias_s1;
  float alpha, beta;
  float* partial;      ///< [batch, split, M, N] when split > 1
  unsigned* counters;  ///< [batch, tiles]
  int64_t tiles;
};

/// One thread's slice of a weight row: 16 bytes (VEC elements), or one element.
template <typename T, int VEC>
using WRaw = std::conditional_t<VEC == 1, T, uint4>;

template <typename T, int VEC>
__device__ __forceinline__ WRaw<T, VEC> load_w(const T* p) {
  if constexpr (VEC == 1) {
    return __ldg(p);
  } else {
    static_assert(VEC * sizeof(T) == 16, "one 16-byte load per thread");
    return __ldg(reinterpret_cast<const uint4*>(p));
  }
}

/// Widens a loaded slice to f32 (kept packed until here to save registers).
template <typename T, int VEC>
__device__ __forceinline__ void widen(const WRaw<T, VEC>& raw, float (&v)[VEC]) {
  if constexpr (VEC == 1) {
    v[0] = to_f(raw);
  } else {
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[i] = to_f(e[i]);
  }
}

template <typename T>
__device__ __forceinline__ void gemv_store(const GemvParams& p, int64_t b, int m, int64_t col, float acc) {
  float v = p.alpha * acc;
  if (p.beta != 0.f) v += p.beta * to_f(static_cast<const T*>(p.bias)[m * p.bias_s0 + col * p.bias_s1]);
  static_cast<T*>(p.y)[b * p.y_bs + m * p.N + col] = from_f<T>(v);
}

/// MAXM: 1 for single-row decode (fewer accumulators, more blocks per SM), else 4.
template <typename T, int VEC, int MAXM>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(const GemvParams p) {
  // 16-byte slices: 8 lanes cover one 128-byte line of a row and a warp
  // loads 4 rows at once. Scalar fallback: 32 lanes along one row.
  constexpr int kLanesPerRow = VEC == 1 ? 32 : 8;
  constexpr int kRowsPerWarp = 32 / kLanesPerRow;
  constexpr int kRowStep = kGemvWarps * kRowsPerWarp;  // rows the block loads at once
  constexpr int kTile = kLanesPerRow * VEC;            // columns per block
  __shared__ float red[kGemvWarps][MAXM][kTile];
  __shared__ bool is_last;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int group = lane / kLanesPerRow, slot = lane % kLanesPerRow;
  const int64_t tile = blockIdx.x;
  const int s = int(blockIdx.y);
  const int64_t b = blockIdx.z;
  const int M = MAXM == 1 ? 1 : p.M;
  const T* x = static_cast<const T*>(p.x) + b * p.x_bs;
  const T* w = static_cast<const T*>(p.w) + b * p.w_bs;
  const int64_t col0 = tile * kTile + int64_t(slot) * VEC;
  const int64_t k_begin = int64_t(s) * p.k_chunk;
  const int64_t k_end = min(p.K, k_begin + p.k_chunk);

  float acc[MAXM][VEC];
#pragma unroll
  for (int m = 0; m < MAXM; ++m) {
#pragma unroll
    for (int v = 0; v < VEC; ++v) acc[m][v] = 0.f;
  }
  // acc[m] += x[m, k] * w[k, col0 .. col0 + VEC)
  auto fma_row = [&](const WRaw<T, VEC>& raw, int64_t k) {
    float wv[VEC];
    widen<T, VEC>(raw, wv);
#pragma unroll
    for (int m = 0; m < MAXM; ++m) {
      if (m < M) {
        const float xv = to_f(__ldg(x + m * p.K + k));
#pragma unroll
        for (int v = 0; v < VEC; ++v) acc[m][v] = fmaf(xv, wv[v], acc[m][v]);
      }
    }
  };
  if (col0 < p.N) {
    const T* wc = w + col0;
    int64_t k = k_begin + warp * kRowsPerWarp + group;
    // kGemvUnroll independent 16-byte loads in flight per thread.
    for (; k + (kGemvUnroll - 1) * kRowStep < k_end; k += kGemvUnroll * kRowStep) {
      WRaw<T, VEC> raw[kGemvUnroll];
#pragma unroll
      for (int u = 0; u < kGemvUnroll; ++u) raw[u] = load_w<T, VEC>(wc + (k + u * kRowStep) * p.N);
#pragma unroll
      for (int u = 0; u < kGemvUnroll; ++u) fma_row(raw[u], k + u * kRowStep);
    }
    for (; k < k_end; k += kRowStep) fma_row(load_w<T, VEC>(wc + k * p.N), k);
  }
  // Add up the row groups of the warp (all lanes take part), then the warps.
#pragma unroll
  for (int m = 0; m < MAXM; ++m) {
#pragma unroll
    for (int v = 0; v < VEC; ++v) {
#pragma unroll
      for (int o = kLanesPerRow; o < 32; o <<= 1) acc[m][v] += __shfl_xor_sync(0xffffffffu, acc[m][v], o);
    }
  }
  if (group == 0) {
#pragma unroll
    for (int m = 0; m < MAXM; ++m) {
      if (m < M) {
#pragma unroll
        for (int v = 0; v < VEC; ++v) red[warp][m][slot * VEC + v] = acc[m][v];
      }
    }
  }
  __syncthreads();
  const int per_block = M * kTile;
  for (int e = threadIdx.x; e < per_block; e += kGemvThreads) {
    const int m = e / kTile, c = e % kTile;
    const int64_t col = tile * kTile + c;
    float sum = 0.f;
#pragma unroll
    for (int wi = 0; wi < kGemvWarps; ++wi) sum += red[wi][m][c];
    if (col >= p.N) continue;
    if (p.split == 1) {
      gemv_store<T>(p, b, m, col, sum);
    } else {
      p.partial[((b * p.split + s) * M + m) * p.N + col] = sum;
    }
  }
  if (p.split == 1) return;
  // Split-K: the last block of this tile to finish adds up the partials.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned prev = atomicAdd(&p.counters[b * p.tiles + tile], 1u);
    is_last = prev == unsigned(p.split - 1);
  }
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  for (int e = threadIdx.x; e < per_block; e += kGemvThreads) {
    const int m = e / kTile, c = e % kTile;
    const int64_t col = tile * kTile + c;
    if (col >= p.N) continue;
    float sum = 0.f;
#pragma unroll 4
    for (int s2 = 0; s2 < p.split; ++s2) sum += __ldcg(&p.partial[((b * p.split + s2) * M + m) * p.N + col]);
    gemv_store<T>(p, b, m, col, sum);
  }
  if (threadIdx.x == 0) p.counters[b * p.tiles + tile] = 0;  // ready for the next launch
}

template <int VEC>
constexpr int64_t gemv_tile() {
  return VEC == 1 ? 32 : 8 * VEC;
}

/// How many K-chunks: enough blocks for ~3 per SM (each keeps 4 x 16 bytes
/// per thread in flight, which with 3 blocks per SM saturates HBM), no more:
/// every extra chunk writes and re-reads M x N f32 partials and lengthens
/// the final sum. Chunks keep >= 64 rows; partials must fit the scratch.
int64_t choose_split(const DeviceContext& ctx, const GemvParams& p, int64_t base, int64_t batch) {
  const int64_t target = 3 * int64_t(std::max(ctx.sm_count, 1));
  if (base >= target || p.K < 128 || ctx.scratch == nullptr || ctx.counters == nullptr ||
      base > int64_t(ctx.num_counters)) {
    return 1;
  }
  int64_t split = ceil_div(target, base);
  split = std::min<int64_t>(split, p.K / 64);
  split = std::min<int64_t>(split, int64_t(ctx.scratch_floats) / std::max<int64_t>(1, batch * p.M * p.N));
  return std::clamp<int64_t>(split, 1, 65535);
}

template <typename T, int VEC, int MAXM>
void launch_gemv_typed(const DeviceContext& ctx, GemvParams& p, int64_t batch) {
  p.tiles = ceil_div(p.N, gemv_tile<VEC>());
  int64_t split = choose_split(ctx, p, p.tiles * batch, batch);
  p.k_chunk = split > 1 ? ceil_div(p.K, split) : p.K;
  if (split > 1) split = ceil_div(p.K, p.k_chunk);  // no empty chunks
  p.split = int(split);
  p.partial = ctx.scratch;
  p.counters = ctx.counters;
  const dim3 grid(unsigned(p.tiles), unsigned(split), unsigned(batch));
  gemv_kernel<T, VEC, MAXM><<<grid, kGemvThreads, 0, ctx.stream>>>(p);
}

template <typename T>
void launch_gemv_for(const DeviceContext& ctx, GemvParams& p, int64_t batch, bool vec) {
  constexpr int kVec = int(16 / sizeof(T));
  if (vec) {
    p.M == 1 ? launch_gemv_typed<T, kVec, 1>(ctx, p, batch) : launch_gemv_typed<T, kVec, kGemvMaxM>(ctx, p, batch);
  } else {
    p.M == 1 ? launch_gemv_typed<T, 1, 1>(ctx, p, batch) : launch_gemv_typed<T, 1, kGemvMaxM>(ctx, p, batch);
  }
}

Status launch_gemv(const DeviceContext& ctx, ScalarType dt, GemvParams& p, int64_t batch) {
  const size_t es = element_size(dt);
  const int64_t vec_elems = int64_t(16 / es);
  // 16-byte loads need every row start aligned: N (and the batch stride) a
  // multiple of the vector, w itself 16-byte aligned.
  const bool vec = p.N % vec_elems == 0 && p.w_bs % vec_elems == 0 && reinterpret_cast<uintptr_t>(p.w) % 16 == 0;
  switch (dt) {
    case ScalarType::kFloat: launch_gemv_for<float>(ctx, p, batch, vec); break;
    case ScalarType::kBFloat16: launch_gemv_for<__nv_bfloat16>(ctx, p, batch, vec); break;
    default: launch_gemv_for<__half>(ctx, p, batch, vec); break;
  }
  return Status::ok();
}

/// cuBLAS (column-major): row-major C = A @ B is column-major C^T = B^T @ A^T,
/// so the operands are passed swapped and nothing is transposed.
Status launch_gemm(const DeviceContext& ctx, OpId op, ScalarType dt, const void* a, const void* b, void* c,
                   int64_t batch, int64_t M, int64_t K, int64_t N, float alpha, float beta) {
  if (ctx.cublas == nullptr || ctx.blas == nullptr) return op_fail(ErrorCode::kInternal, op, "no cuBLAS handle");
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (M > kIntMax || N > kIntMax || K > kIntMax || batch > kIntMax) {
    return op_fail(ErrorCode::kNotSupported, op, "matrix sizes above 2^31 are not supported (M={}, K={}, N={})", M, K,
                   N);
  }
  const cudaDataType t = dt == ScalarType::kFloat      ? CUDA_R_32F
                         : dt == ScalarType::kBFloat16 ? CUDA_R_16BF
                                                       : CUDA_R_16F;
  const cublasStatus_t st = ctx.blas->gemm_strided_batched_ex(
      ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, int(N), int(M), int(K), &alpha, b, t, int(std::max<int64_t>(N, 1)),
      K * N, a, t, int(std::max<int64_t>(K, 1)), M * K, &beta, c, t, int(std::max<int64_t>(N, 1)), M * N, int(batch),
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) {
    return op_fail(ErrorCode::kInternal, op, "cublasGemmStridedBatchedEx failed: {}", ctx.blas->status_string(st));
  }
  return Status::ok();
}

Status check_mm_dtypes(OpId op, std::initializer_list<std::pair<const DevTensor*, const char*>> ts) {
  const ScalarType first = ts.begin()->first->dtype;
  for (const auto& [t, what] : ts) {
    HF2PTE_RETURN_IF_ERROR(need_float(op, *t, what));
    if (t->dtype != first) {
      return op_fail(ErrorCode::kNotSupported, op, "{} has dtype {}, {} has {}; expected one dtype",
                     ts.begin()->second, scalar_type_name(first), what, scalar_type_name(t->dtype));
    }
  }
  return Status::ok();
}

/// mm, bmm and addmm.
Status launch_matmul(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  const bool addmm = op == OpId::AddmmOut;
  const bool batched = op == OpId::BmmOut;
  const size_t first = addmm ? 1 : 0;
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, first, addmm ? "mat1" : "self"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* w, tensor_arg(op, a, first + 1, "mat2"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, addmm ? 5 : 2, "out"));
  const DevTensor* bias = nullptr;
  float alpha = 1.f, beta = 0.f;
  if (addmm) {
    HF2PTE_ASSIGN_OR_RETURN(bias, tensor_arg(op, a, 0, "self"));
    HF2PTE_ASSIGN_OR_RETURN(ScalarVal be, scalar_arg(op, a, 3, "beta"));
    HF2PTE_ASSIGN_OR_RETURN(ScalarVal al, scalar_arg(op, a, 4, "alpha"));
    alpha = float(al.as_double());
    beta = float(be.as_double());
    HF2PTE_RETURN_IF_ERROR(check_mm_dtypes(op, {{bias, "self"}, {x, "mat1"}, {w, "mat2"}, {out, "out"}}));
  } else {
    HF2PTE_RETURN_IF_ERROR(check_mm_dtypes(op, {{x, "self"}, {w, "mat2"}, {out, "out"}}));
  }
  const int rank = batched ? 3 : 2;
  if (x->rank != rank || w->rank != rank) {
    return op_fail(ErrorCode::kInvalidArgument, op, "operands must have rank {}; got {} and {}", rank,
                   shape_str(x->shape()), shape_str(w->shape()));
  }
  const int o = batched ? 1 : 0;
  const int64_t batch = batched ? x->sizes[0] : 1;
  const int64_t M = x->sizes[size_t(o)], K = x->sizes[size_t(o) + 1], N = w->sizes[size_t(o) + 1];
  if (w->sizes[size_t(o)] != K || (batched && w->sizes[0] != batch)) {
    return op_fail(ErrorCode::kInvalidArgument, op, "shapes {} and {} cannot be multiplied", shape_str(x->shape()),
                   shape_str(w->shape()));
  }
  std::vector<int64_t> shape = batched ? std::vector<int64_t>{batch, M, N} : std::vector<int64_t>{M, N};
  HF2PTE_RETURN_IF_ERROR(check_shape(op, *out, shape));
  std::array<int64_t, kMaxDims> bias_st{};
  if (addmm) {
    std::vector<int64_t> bshape;
    const DevTensor mn{nullptr, out->dtype, 2, {M, N}};
    if (bias->rank > 2 || !broadcast_shape({bias, &mn}, &bshape) || bshape != shape) {
      return op_fail(ErrorCode::kInvalidArgument, op, "self {} cannot be broadcast to {}", shape_str(bias->shape()),
                     shape_str(shape));
    }
    bias_st = broadcast_strides(*bias, shape);
  }
  if (out->numel() == 0) return Status::ok();
  if (M <= kGemvMaxM && batch <= 65535 && ceil_div(N, 8) <= int64_t(std::numeric_limits<int>::max())) {
    GemvParams p{};
    p.x = x->data;
    p.w = w->data;
    p.y = out->data;
    p.bias = bias != nullptr ? bias->data : nullptr;
    p.K = K;
    p.N = N;
    p.M = int(M);
    p.x_bs = M * K;
    p.w_bs = K * N;
    p.y_bs = M * N;
    p.bias_s0 = bias_st[0];
    p.bias_s1 = bias_st[1];
    p.alpha = alpha;
    p.beta = addmm ? beta : 0.f;
    return launch_gemv(ctx, out->dtype, p, batch);
  }
  if (addmm && beta != 0.f) {
    // C starts as self broadcast to [M, N]; cuBLAS then adds alpha * A @ B.
    const auto dst_st = contiguous_strides(shape);
    HF2PTE_RETURN_IF_ERROR(strided_copy(ctx, op, shape, bias->data, bias->dtype, bias_st.data(), out->data,
                                        out->dtype, dst_st.data()));
  }
  return launch_gemm(ctx, op, out->dtype, x->data, w->data, out->data, batch, M, K, N, alpha, addmm ? beta : 0.f);
}

// ---------------------------------------------------------------------------
// Indexing: row gather (embedding, index_select) and index_put_.

struct GatherParams {
  const void* src;
  void* dst;
  const void* idx;
  bool idx32;
  int64_t outer, n, dsize;  ///< out row (o, j) = src row (o, idx[j]); src has dsize rows per o
  int64_t vecs;             ///< V-sized pieces per row
  int* flag;
  int node;
};

template <typename V>
__global__ void gather_rows_kernel(const GatherParams p) {
  const int64_t total = p.outer * p.n * p.vecs;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += step) {
    const int64_t v = t % p.vecs, r = t / p.vecs;
    const int64_t j = r % p.n, o = r / p.n;
    const int64_t id = p.idx32 ? int64_t(static_cast<const int32_t*>(p.idx)[j]) : static_cast<const int64_t*>(p.idx)[j];
    if (id < 0 || id >= p.dsize) {
      if (v == 0) flag_error(p.flag, p.node);
      continue;
    }
    static_cast<V*>(p.dst)[r * p.vecs + v] = static_cast<const V*>(p.src)[(o * p.dsize + id) * p.vecs + v];
  }
}

void launch_gather(const DeviceContext& ctx, GatherParams p, int64_t row_bytes) {
  const auto aligned = [&](size_t a) {
    return row_bytes % int64_t(a) == 0 && reinterpret_cast<uintptr_t>(p.src) % a == 0 &&
           reinterpret_cast<uintptr_t>(p.dst) % a == 0;
  };
  p.flag = ctx.error_flag;
  p.node = ctx.node_index;
  auto go = [&](auto tag) {
    using V = decltype(tag);
    p.vecs = row_bytes / int64_t(sizeof(V));
    gather_rows_kernel<V><<<grid_for(ctx, p.outer * p.n * p.vecs), kThreads, 0, ctx.stream>>>(p);
  };
  if (aligned(16)) {
    go(uint4{});
  } else if (aligned(8)) {
    go(uint2{});
  } else if (aligned(4)) {
    go(uint32_t{});
  } else if (aligned(2)) {
    go(uint16_t{});
  } else {
    go(uint8_t{});
  }
}

Status launch_embedding(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* weight, tensor_arg(op, a, 0, "weight"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* indices, tensor_arg(op, a, 1, "indices"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 5, "out"));
  // padding_idx, scale_grad_by_freq and sparse only affect the gradient.
  if (weight->rank != 2) {
    return op_fail(ErrorCode::kInvalidArgument, op, "weight must have rank 2; got shape {}",
                   shape_str(weight->shape()));
  }
  if (weight->dtype != out->dtype) {
    return op_fail(ErrorCode::kInvalidArgument, op, "weight and out must have the same dtype; got {} and {}",
                   scalar_type_name(weight->dtype), scalar_type_name(out->dtype));
  }
  HF2PTE_RETURN_IF_ERROR(need_standard(op, *weight, "weight"));
  HF2PTE_RETURN_IF_ERROR(need(is_index_dt(indices->dtype), op, "indices", indices->dtype, "i64, i32"));
  if (indices->rank >= kMaxDims) {
    return op_fail(ErrorCode::kNotSupported, op, "indices of rank {} give an out of rank above {}", indices->rank,
                   kMaxDims);
  }
  std::vector<int64_t> shape(indices->shape().begin(), indices->shape().end());
  shape.push_back(weight->sizes[1]);
  HF2PTE_RETURN_IF_ERROR(check_shape(op, *out, shape));
  GatherParams p{};
  p.src = weight->data;
  p.dst = out->data;
  p.idx = indices->data;
  p.idx32 = indices->dtype == ScalarType::kInt;
  p.outer = 1;
  p.n = indices->numel();
  p.dsize = weight->sizes[0];
  const int64_t row_bytes = weight->sizes[1] * int64_t(element_size(weight->dtype));
  if (p.n == 0 || row_bytes == 0) return Status::ok();
  launch_gather(ctx, p, row_bytes);
  return Status::ok();
}

Status launch_index_select(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "self"));
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim_arg, int_arg(op, a, 1, "dim"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* index, tensor_arg(op, a, 2, "index"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 3, "out"));
  if (x->dtype != out->dtype) {
    return op_fail(ErrorCode::kInvalidArgument, op, "self and out must have the same dtype; got {} and {}",
                   scalar_type_name(x->dtype), scalar_type_name(out->dtype));
  }
  HF2PTE_RETURN_IF_ERROR(need_standard(op, *x, "self"));
  HF2PTE_RETURN_IF_ERROR(need(is_index_dt(index->dtype), op, "index", index->dtype, "i64, i32"));
  if (index->rank > 1) {
    return op_fail(ErrorCode::kInvalidArgument, op, "index must be a vector; got shape {}", shape_str(index->shape()));
  }
  HF2PTE_ASSIGN_OR_RETURN(int64_t dim, normalize_dim(op, dim_arg, x->rank));
  const int64_t n = index->numel();
  if (x->rank == 0 && n != 1) {
    return op_fail(ErrorCode::kInvalidArgument, op, "index of a 0-dim tensor must have one element; got {}", n);
  }
  std::vector<int64_t> shape(x->shape().begin(), x->shape().end());
  GatherParams p{};
  p.src = x->data;
  p.dst = out->data;
  p.idx = index->data;
  p.idx32 = index->dtype == ScalarType::kInt;
  p.n = n;
  int64_t inner = 1;
  if (x->rank > 0) {
    shape[size_t(dim)] = n;
    p.outer = product(x->shape().first(size_t(dim)));
    p.dsize = x->sizes[size_t(dim)];
    inner = product(x->shape().subspan(size_t(dim) + 1));
  } else {
    p.outer = 1;
    p.dsize = 1;
  }
  HF2PTE_RETURN_IF_ERROR(check_shape(op, *out, shape));
  const int64_t row_bytes = inner * int64_t(element_size(x->dtype));
  if (p.outer * n == 0 || row_bytes == 0) return Status::ok();
  launch_gather(ctx, p, row_bytes);
  return Status::ok();
}

constexpr int kMaxIndexTensors = 4;

struct IndexPutParams {
  int rank;
  int64_t numel;
  int64_t sizes[kMaxDims];    ///< the indexed shape
  int64_t self_st[kMaxDims];  ///< self's strides on its plain dims (0 on index dims)
  int64_t val_st[kMaxDims];   ///< values broadcast to the indexed shape
  int nidx;
  const void* idx[kMaxIndexTensors];
  bool idx32[kMaxIndexTensors];
  int64_t idx_st[kMaxIndexTensors][kMaxDims];  ///< index tensors broadcast over the index dims
  int64_t dim_stride[kMaxIndexTensors], dim_size[kMaxIndexTensors];  ///< self's indexed dims
  void* self;
  const void* values;
  ScalarType dtype;
  bool accumulate;
  int* flag;
  int node;
};

/// Adds `v` to a bf16/f16 element through a CAS on its aligned 32-bit word
/// (rounded once per addition, as the reference does).
__device__ void atomic_add_16(uint16_t* addr, float v, bool bf16) {
  auto* word = reinterpret_cast<unsigned*>(reinterpret_cast<uintptr_t>(addr) & ~uintptr_t(3));
  const bool hi = (reinterpret_cast<uintptr_t>(addr) & 2) != 0;
  unsigned old = *word, assumed;
  do {
    assumed = old;
    const unsigned short cur = hi ? (unsigned short)(assumed >> 16) : (unsigned short)(assumed & 0xffffu);
    unsigned short next;
    if (bf16) {
      next = __bfloat16_as_ushort(__float2bfloat16_rn(__bfloat162float(__ushort_as_bfloat16(cur)) + v));
    } else {
      next = __half_as_ushort(__float2half_rn(__half2float(__ushort_as_half(cur)) + v));
    }
    const unsigned repl = hi ? ((assumed & 0xffffu) | (unsigned(next) << 16)) : ((assumed & 0xffff0000u) | next);
    old = atomicCAS(word, assumed, repl);
  } while (old != assumed);
}

__global__ void index_put_kernel(const IndexPutParams p) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < p.numel; i += step) {
    int64_t so = 0, vo = 0, io[kMaxIndexTensors] = {}, rem = i;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t idx = rem % p.sizes[d];
      rem /= p.sizes[d];
      so += idx * p.self_st[d];
      vo += idx * p.val_st[d];
#pragma unroll
      for (int k = 0; k < kMaxIndexTensors; ++k) io[k] += idx * p.idx_st[k][d];
    }
    bool ok = true;
    for (int k = 0; k < p.nidx; ++k) {
      int64_t v = p.idx32[k] ? int64_t(static_cast<const int32_t*>(p.idx[k])[io[k]])
                             : static_cast<const int64_t*>(p.idx[k])[io[k]];
      if (v < -p.dim_size[k] || v >= p.dim_size[k]) {
        ok = false;
        break;
      }
      if (v < 0) v += p.dim_size[k];  // negative indices count from the end
      so += v * p.dim_stride[k];
    }
    if (!ok) {
      flag_error(p.flag, p.node);
      continue;
    }
    if (!p.accumulate) {
      // Duplicate indices race; which write wins is unspecified (torch's is too on CUDA).
      switch (p.dtype) {
        case ScalarType::kFloat: static_cast<float*>(p.self)[so] = static_cast<const float*>(p.values)[vo]; break;
        case ScalarType::kLong: static_cast<int64_t*>(p.self)[so] = static_cast<const int64_t*>(p.values)[vo]; break;
        case ScalarType::kBool:
          static_cast<uint8_t*>(p.self)[so] = static_cast<const uint8_t*>(p.values)[vo] != 0 ? 1 : 0;
          break;
        default:  // f16, bf16
          static_cast<uint16_t*>(p.self)[so] = static_cast<const uint16_t*>(p.values)[vo];
          break;
      }
    } else {
      switch (p.dtype) {
        case ScalarType::kFloat: atomicAdd(static_cast<float*>(p.self) + so, static_cast<const float*>(p.values)[vo]); break;
        case ScalarType::kLong:
          atomicAdd(reinterpret_cast<unsigned long long*>(p.self) + so,
                    (unsigned long long)static_cast<const int64_t*>(p.values)[vo]);
          break;
        case ScalarType::kBFloat16:
          atomic_add_16(static_cast<uint16_t*>(p.self) + so,
                        __bfloat162float(static_cast<const __nv_bfloat16*>(p.values)[vo]), true);
          break;
        case ScalarType::kHalf:
          atomic_add_16(static_cast<uint16_t*>(p.self) + so, __half2float(static_cast<const __half*>(p.values)[vo]),
                        false);
          break;
        default: break;  // bool: rejected on the host
      }
    }
  }
}

/// index_put_(self, indices, values, accumulate): numpy advanced indexing. The
/// broadcast index dims replace the indexed dims in place when those are
/// adjacent, else they go first (the portable kernel's rule).
Status launch_index_put(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* self, tensor_arg(op, a, 0, "self"));
  if (a.size() < 2 || (a[1].kind != ValueKind::kOptTensorList && a[1].kind != ValueKind::kTensorList)) {
    return op_fail(ErrorCode::kInvalidProgram, op, "argument 'indices' must be a tensor list");
  }
  const auto& indices = a[1].list;
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* values, tensor_arg(op, a, 2, "values"));
  HF2PTE_ASSIGN_OR_RETURN(bool accumulate, bool_arg(op, a, 3, "accumulate"));
  if (self->dtype != values->dtype) {
    return op_fail(ErrorCode::kInvalidArgument, op, "self and values must have the same dtype; got {} and {}",
                   scalar_type_name(self->dtype), scalar_type_name(values->dtype));
  }
  HF2PTE_RETURN_IF_ERROR(need_standard(op, *self, "self"));
  if (accumulate && self->dtype == ScalarType::kBool) {
    return op_fail(ErrorCode::kNotSupported, op, "accumulate=True is not supported for bool tensors");
  }
  const int rank = self->rank;
  if (int(indices.size()) > rank) {
    return op_fail(ErrorCode::kInvalidArgument, op, "too many indices for a tensor of rank {}; got {}", rank,
                   indices.size());
  }
  IndexPutParams p{};
  std::vector<int> idx_dims;
  std::vector<const DevTensor*> idx_tensors;
  for (size_t k = 0; k < indices.size(); ++k) {
    if (!indices[k]) continue;
    const DevTensor& t = *indices[k];
    if (t.dtype == ScalarType::kBool) {
      return op_fail(ErrorCode::kNotSupported, op,
                     "boolean mask indices are not supported; expected i64 or i32 at indices[{}]", k);
    }
    HF2PTE_RETURN_IF_ERROR(need(is_index_dt(t.dtype), op, "indices", t.dtype, "i64, i32"));
    idx_dims.push_back(int(k));
    idx_tensors.push_back(&t);
  }
  if (idx_tensors.size() > size_t(kMaxIndexTensors)) {
    return op_fail(ErrorCode::kNotSupported, op, "more than {} index tensors are not supported on the device; got {}",
                   kMaxIndexTensors, idx_tensors.size());
  }
  std::vector<int64_t> bshape;
  {
    int brank = 0;
    for (const DevTensor* t : idx_tensors) brank = std::max(brank, t->rank);
    bshape.assign(size_t(brank), 1);
    for (const DevTensor* t : idx_tensors) {
      for (int j = 0; j < t->rank; ++j) {
        const int64_t s = t->sizes[size_t(j)];
        int64_t& r = bshape[size_t(brank - t->rank + j)];
        if (s == 1) continue;
        if (r != 1 && r != s) return op_fail(ErrorCode::kInvalidArgument, op, "index shapes cannot be broadcast together");
        r = s;
      }
    }
  }
  bool adjacent = true;
  for (size_t k = 1; k < idx_dims.size(); ++k) adjacent &= idx_dims[k] == idx_dims[k - 1] + 1;

  const auto self_cst = contiguous_strides(self->shape());
  std::vector<int64_t> shape;
  auto push_plain = [&](int d) {
    p.self_st[shape.size()] = self_cst[size_t(d)];
    shape.push_back(self->sizes[size_t(d)]);
  };
  auto push_broadcast = [&]() {
    for (size_t k = 0; k < idx_tensors.size(); ++k) {
      const auto bs = broadcast_strides(*idx_tensors[k], bshape);
      for (size_t j = 0; j < bshape.size(); ++j) p.idx_st[k][shape.size() + j] = bs[j];
    }
    shape.insert(shape.end(), bshape.begin(), bshape.end());
  };
  auto is_indexed = [&](int d) { return d < int(indices.size()) && indices[size_t(d)].has_value(); };
  const size_t needed = bshape.size() + size_t(rank) - idx_dims.size();
  if (needed > size_t(kMaxDims)) return op_fail(ErrorCode::kNotSupported, op, "indexed shape has rank above {}", kMaxDims);
  if (!idx_dims.empty() && !adjacent) push_broadcast();
  for (int d = 0; d < rank; ++d) {
    if (!is_indexed(d)) {
      push_plain(d);
    } else if (adjacent && d == idx_dims.front()) {
      push_broadcast();
    }
  }
  // values must broadcast to the indexed shape without widening it.
  bool fits = values->rank <= int(shape.size());
  for (int d = 0; fits && d < values->rank; ++d) {
    const int64_t v = values->sizes[size_t(values->rank - 1 - d)];
    fits = v == 1 || v == shape[shape.size() - 1 - size_t(d)];
  }
  if (!fits) {
    return op_fail(ErrorCode::kInvalidArgument, op, "values of shape {} cannot be broadcast to indexed shape {}",
                   shape_str(values->shape()), shape_str(shape));
  }
  const auto vst = broadcast_strides(*values, shape);
  p.rank = int(shape.size());
  p.numel = product(shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    p.sizes[d] = shape[d];
    p.val_st[d] = vst[d];
  }
  p.nidx = int(idx_tensors.size());
  for (size_t k = 0; k < idx_tensors.size(); ++k) {
    p.idx[k] = idx_tensors[k]->data;
    p.idx32[k] = idx_tensors[k]->dtype == ScalarType::kInt;
    p.dim_stride[k] = self_cst[size_t(idx_dims[k])];
    p.dim_size[k] = self->sizes[size_t(idx_dims[k])];
  }
  p.self = self->data;
  p.values = values->data;
  p.dtype = self->dtype;
  p.accumulate = accumulate;
  p.flag = ctx.error_flag;
  p.node = ctx.node_index;
  if (p.numel == 0) return Status::ok();
  index_put_kernel<<<grid_for(ctx, p.numel), kThreads, 0, ctx.stream>>>(p);
  return Status::ok();
}

// ---------------------------------------------------------------------------
// 2-D convolution (implicit GEMM) and max pooling, NCHW.
//
// Convolution per group g is a GEMM: out[o, q] = sum_k w[o, k] * col[k, q]
// with o in the group's opg output channels, k = (c, i, j) over its Cg input
// channels and the KH x KW taps (weight rows are contiguous in k), and q =
// (n, y, x) over every output pixel of the batch (folding N into the columns
// keeps tiles full when images are small, e.g. a 14x14 ViT patch grid). A
// block computes a BM x BN tile of (o, q): each K-step stages a BM x BK slab
// of weights and a BK x BN slab of input patches (im2col on the fly, zeros in
// the padding) in shared memory as f32, and each thread accumulates TM x TN
// outputs in registers; the next slab's global loads are issued before the
// current one is consumed. Bias is added at the end and the sum rounded once.

constexpr int kConvThreads = 256;
constexpr int kConvBK = 16;

struct ConvParams {
  const void* in;    ///< [N, C, H, W]
  const void* w;     ///< [O, Cg, KH, KW]
  const void* bias;  ///< [O] or null
  void* out;         ///< [N, O, OH, OW]
  int64_t C, O, OW;
  int64_t P;     ///< OH * OW
  int64_t cols;  ///< N * P
  int H, W, sh, sw, ph, pw, dh, dw;  ///< tap coordinates stay ints (checked on the host): fewer registers
  int64_t Cg, opg;        ///< input channels and output channels per group
  int64_t m_tiles;        ///< BM-row tiles per group
  int64_t y_tiles;        ///< groups * m_tiles
  int K, KHW, KW;         ///< K = Cg * KH * KW (checked to fit an int)
};

template <typename T, int BM, int BN, int TM, int TN>
__global__ void __launch_bounds__(kConvThreads) conv2d_kernel(const ConvParams p) {
  constexpr int BK = kConvBK;
  constexpr int TX = BN / TN, TY = BM / TM;
  static_assert(TX * TY == kConvThreads, "one thread per TM x TN sub-tile");
  static_assert(kConvThreads % BN == 0 && kConvThreads % BK == 0, "whole rows per load pass");
  constexpr int kALoads = BM * BK / kConvThreads, kAStep = kConvThreads / BK;
  constexpr int kBLoads = BK * BN / kConvThreads, kBStep = kConvThreads / BN;
  // +1 column: the transposed weight stores would otherwise hit one bank 16 times.
  __shared__ float As[BK][BM + 1];
  __shared__ float Bs[BK][BN];

  const T* in = static_cast<const T*>(p.in);
  const T* w = static_cast<const T*>(p.w);
  const int t = threadIdx.x;
  const int tx = t % TX, ty = t / TX;
  // Consecutive threads compute (and write) consecutive pixels: coalesced stores, no smem bank conflicts.
  const int a_k = t % BK, a_m = t / BK;    // weight loads: 16 threads read 16 consecutive k of one row
  const int b_q = t % BN, b_k = t / BN;    // patch loads: one fixed column (pixel) per thread
  const int64_t q0 = int64_t(blockIdx.x) * BN;
  const int64_t HW = int64_t(p.H) * p.W;

  // This thread's load column, decomposed once: image n and the patch's top-left tap.
  const int64_t qb = q0 + b_q;
  const bool q_ok = qb < p.cols;
  int64_t n = 0;
  int iy0 = 0, ix0 = 0;
  if (q_ok) {
    n = qb / p.P;
    const int64_t pix = qb - n * p.P;
    const int y = int(pix / p.OW), x = int(pix - int64_t(y) * p.OW);
    iy0 = y * p.sh - p.ph;
    ix0 = x * p.sw - p.pw;
  }
  const int k_tiles = (p.K + BK - 1) / BK;

  for (int64_t yt = blockIdx.y; yt < p.y_tiles; yt += gridDim.y) {
    const int64_t g = yt / p.m_tiles;
    const int64_t m0 = (yt - g * p.m_tiles) * BM;  // first output channel of the tile, within the group
    const T* wg = w + (g * p.opg + m0) * int64_t(p.K);
    const T* ing = in + (n * p.C + g * p.Cg) * HW;

    float ra[kALoads], rb[kBLoads];
    auto load = [&](int k0) {
#pragma unroll
      for (int r = 0; r < kALoads; ++r) {
        const int m = a_m + r * kAStep, k = k0 + a_k;
        ra[r] = (m0 + m < p.opg && k < p.K) ? to_f(wg[int64_t(m) * p.K + k]) : 0.f;
      }
#pragma unroll
      for (int r = 0; r < kBLoads; ++r) {
        const int k = k0 + b_k + r * kBStep;
        float v = 0.f;
        if (q_ok && k < p.K) {
          const int c = k / p.KHW, rem = k - c * p.KHW;
          const int i = rem / p.KW, j = rem - i * p.KW;
          const int iy = iy0 + i * p.dh, ix = ix0 + j * p.dw;
          if (iy >= 0 && iy < p.H && ix >= 0 && ix < p.W) v = to_f(ing[int64_t(c) * HW + int64_t(iy) * p.W + ix]);
        }
        rb[r] = v;
      }
    };

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
    }
    if (k_tiles > 0) load(0);
    for (int kt = 0; kt < k_tiles; ++kt) {
#pragma unroll
      for (int r = 0; r < kALoads; ++r) As[a_k][a_m + r * kAStep] = ra[r];
#pragma unroll
      for (int r = 0; r < kBLoads; ++r) Bs[b_k + r * kBStep][b_q] = rb[r];
      __syncthreads();
      if (kt + 1 < k_tiles) load((kt + 1) * BK);  // in flight while this slab is consumed
#pragma unroll
      for (int kk = 0; kk < BK; ++kk) {
        float a[TM], b[TN];
#pragma unroll
        for (int i = 0; i < TM; ++i) a[i] = As[kk][ty + i * TY];
#pragma unroll
        for (int j = 0; j < TN; ++j) b[j] = Bs[kk][tx + j * TX];
#pragma unroll
        for (int i = 0; i < TM; ++i) {
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
      }
      __syncthreads();  // the slab is overwritten next step
    }

    T* out = static_cast<T*>(p.out);
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int64_t m = m0 + ty + i * TY;
      if (m >= p.opg) continue;
      const int64_t o = g * p.opg + m;
      const float bv = p.bias != nullptr ? to_f(static_cast<const T*>(p.bias)[o]) : 0.f;
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const int64_t q = q0 + tx + j * TX;
        if (q >= p.cols) continue;
        const int64_t nn = q / p.P, pix = q - nn * p.P;
        out[(nn * p.O + o) * p.P + pix] = from_f<T>(acc[i][j] + bv);
      }
    }
  }
}

template <typename T, int BM, int BN, int TM, int TN>
void launch_conv_tile(const DeviceContext& ctx, ConvParams& p, int64_t groups) {
  p.m_tiles = ceil_div(p.opg, BM);
  p.y_tiles = groups * p.m_tiles;
  // Channel tiles beyond the grid's y limit are looped over inside the kernel.
  const dim3 grid(unsigned(ceil_div(p.cols, BN)), unsigned(std::min<int64_t>(p.y_tiles, 65535)));
  conv2d_kernel<T, BM, BN, TM, TN><<<grid, kConvThreads, 0, ctx.stream>>>(p);
}

template <typename T>
void launch_conv_typed(const DeviceContext& ctx, ConvParams& p, int64_t groups) {
  // Few output channels per group (a small stem, depthwise-like groups): a
  // short, wide tile wastes less of the block than 64 x 64.
  if (p.opg <= 16) {
    launch_conv_tile<T, 16, 128, 2, 4>(ctx, p, groups);
  } else {
    launch_conv_tile<T, 64, 64, 4, 4>(ctx, p, groups);
  }
}

/// One element of a stride/padding/dilation list: [] gives `dflt`, [v] is both dims.
int64_t pick_2d(const std::vector<int64_t>& v, size_t i, int64_t dflt) {
  return v.empty() ? dflt : v[v.size() == 1 ? 0 : i];
}

/// convolution.out(input, weight, bias?, stride, padding, dilation, transposed,
/// output_padding, groups, *, out): 2-D, not transposed (the portable kernel's set).
Status launch_convolution(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "input"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* w, tensor_arg(op, a, 1, "weight"));
  const DevTensor* bias = nullptr;
  if (a.size() > 2 && a[2].kind != ValueKind::kNone) {
    HF2PTE_ASSIGN_OR_RETURN(bias, tensor_arg(op, a, 2, "bias"));
  }
  std::vector<int64_t> stride, padding, dilation, output_padding;
  HF2PTE_RETURN_IF_ERROR(int_list_arg(op, a, 3, "stride", false, &stride));
  HF2PTE_RETURN_IF_ERROR(int_list_arg(op, a, 4, "padding", false, &padding));
  HF2PTE_RETURN_IF_ERROR(int_list_arg(op, a, 5, "dilation", false, &dilation));
  HF2PTE_ASSIGN_OR_RETURN(bool transposed, bool_arg(op, a, 6, "transposed"));
  HF2PTE_RETURN_IF_ERROR(int_list_arg(op, a, 7, "output_padding", false, &output_padding));  // unused unless transposed
  HF2PTE_ASSIGN_OR_RETURN(int64_t groups, int_arg(op, a, 8, "groups"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 9, "out"));
  for (const DevTensor* t : {w, out}) {
    if (t->dtype != x->dtype) {
      return op_fail(ErrorCode::kInvalidArgument, op, "weight and out must be {} like the input; got {}",
                     scalar_type_name(x->dtype), scalar_type_name(t->dtype));
    }
  }
  if (transposed) return op_fail(ErrorCode::kNotSupported, op, "transposed convolution is not supported");
  if (x->rank != 4 || w->rank != 4) {
    return op_fail(ErrorCode::kNotSupported, op, "only 2-D convolution is supported; input {}, weight {}",
                   shape_str(x->shape()), shape_str(w->shape()));
  }
  if (stride.size() > 2 || padding.size() > 2 || dilation.size() > 2) {
    return op_fail(ErrorCode::kInvalidArgument, op, "stride {}, padding {} and dilation {} must have at most 2 elements",
                   shape_str(stride), shape_str(padding), shape_str(dilation));
  }
  HF2PTE_RETURN_IF_ERROR(need_float(op, *x, "input"));
  const int64_t N = x->sizes[0], C = x->sizes[1], H = x->sizes[2], W = x->sizes[3];
  const int64_t O = w->sizes[0], Cg = w->sizes[1], KH = w->sizes[2], KW = w->sizes[3];
  const int64_t sh = pick_2d(stride, 0, 1), sw = pick_2d(stride, 1, 1);
  const int64_t ph = pick_2d(padding, 0, 0), pw = pick_2d(padding, 1, 0);
  const int64_t dh = pick_2d(dilation, 0, 1), dw = pick_2d(dilation, 1, 1);
  if (!(groups >= 1 && C == Cg * groups && O % groups == 0 && sh > 0 && sw > 0 && dh > 0 && dw > 0 && ph >= 0 &&
        pw >= 0)) {
    return op_fail(ErrorCode::kInvalidArgument, op, "input {} weight {} groups {} stride [{}, {}] do not match",
                   shape_str(x->shape()), shape_str(w->shape()), groups, sh, sw);
  }
  if (bias != nullptr && !(bias->rank == 1 && bias->sizes[0] == O && bias->dtype == x->dtype)) {
    return op_fail(ErrorCode::kInvalidArgument, op, "bias must be {} [{}]", scalar_type_name(x->dtype), O);
  }
  // Floor division: a kernel larger than the padded input gives no output (not one).
  const int64_t span_h = dh * (KH - 1) + 1, span_w = dw * (KW - 1) + 1;
  if (H + 2 * ph < span_h || W + 2 * pw < span_w) {
    return op_fail(ErrorCode::kInvalidArgument, op, "kernel {} is larger than padded input {}", shape_str(w->shape()),
                   shape_str(x->shape()));
  }
  const int64_t OH = (H + 2 * ph - span_h) / sh + 1, OW = (W + 2 * pw - span_w) / sw + 1;
  HF2PTE_RETURN_IF_ERROR(check_shape(op, *out, std::vector<int64_t>{N, O, OH, OW}));
  if (out->numel() == 0) return Status::ok();
  const int64_t K = Cg * KH * KW;
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  // Tap indices and coordinates are ints (fast division, fewer registers); the
  // pixel tiles (>= 64 wide) go on grid x.
  if (K > kIntMax - kConvBK || H + 2 * ph > kIntMax || W + 2 * pw > kIntMax || sh > kIntMax || sw > kIntMax ||
      ceil_div(N * OH * OW, 64) > kIntMax) {
    return op_fail(ErrorCode::kNotSupported, op, "convolution too large for the device kernel: input {}, weight {}",
                   shape_str(x->shape()), shape_str(w->shape()));
  }
  ConvParams p{};
  p.in = x->data;
  p.w = w->data;
  p.bias = bias != nullptr ? bias->data : nullptr;
  p.out = out->data;
  p.C = C;
  p.H = int(H);
  p.W = int(W);
  p.O = O;
  p.OW = OW;
  p.P = OH * OW;
  p.cols = N * p.P;
  p.sh = int(sh);
  p.sw = int(sw);
  p.ph = int(ph);
  p.pw = int(pw);
  p.dh = int(dh);
  p.dw = int(dw);
  p.Cg = Cg;
  p.opg = O / groups;
  p.K = int(K);
  p.KHW = int(KH * KW);
  p.KW = int(KW);
  switch (x->dtype) {
    case ScalarType::kFloat: launch_conv_typed<float>(ctx, p, groups); break;
    case ScalarType::kBFloat16: launch_conv_typed<__nv_bfloat16>(ctx, p, groups); break;
    default: launch_conv_typed<__half>(ctx, p, groups); break;
  }
  return Status::ok();
}

struct PoolParams {
  const void* in;  ///< [N, C, H, W]
  void* out;       ///< [N, C, OH, OW]
  int64_t* indices;
  int64_t total;  ///< N * C * OH * OW
  int64_t H, W, OH, OW;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};

/// One thread per output: the first largest in-bounds tap, or the first NaN.
template <typename T>
__global__ void max_pool2d_kernel(const PoolParams p) {
  const T* in = static_cast<const T*>(p.in);
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < p.total; e += step) {
    const int64_t x = e % p.OW, r = e / p.OW;
    const int64_t y = r % p.OH, plane = r / p.OH;
    const T* src = in + plane * p.H * p.W;
    float best = -INFINITY;
    int64_t at = -1;
    bool nan = false;  // a NaN tap is final
    for (int64_t i = 0; i < p.kh && !nan; ++i) {
      const int64_t iy = y * p.sh - p.ph + i * p.dh;
      if (iy < 0 || iy >= p.H) continue;
      for (int64_t j = 0; j < p.kw && !nan; ++j) {
        const int64_t ix = x * p.sw - p.pw + j * p.dw;
        if (ix < 0 || ix >= p.W) continue;
        const float v = to_f(src[iy * p.W + ix]);
        if (at < 0 || v > best || isnan(v)) {
          best = v;
          at = iy * p.W + ix;
          nan = isnan(v);
        }
      }
    }
    // The winner is copied as stored: a max rounds nothing.
    static_cast<T*>(p.out)[e] = at >= 0 ? src[at] : from_f<T>(-INFINITY);
    p.indices[e] = at;
  }
}

/// max_pool2d_with_indices.out(self, kernel_size, stride=[], padding, dilation,
/// ceil_mode, *, out, indices): two outs, values and int64 h * W + w indices.
Status launch_max_pool2d(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "self"));
  std::vector<int64_t> kernel, stride, padding, dilation;
  HF2PTE_RETURN_IF_ERROR(int_list_arg(op, a, 1, "kernel_size", false, &kernel));
  HF2PTE_RETURN_IF_ERROR(int_list_arg(op, a, 2, "stride", false, &stride));
  HF2PTE_RETURN_IF_ERROR(int_list_arg(op, a, 3, "padding", false, &padding));
  HF2PTE_RETURN_IF_ERROR(int_list_arg(op, a, 4, "dilation", false, &dilation));
  HF2PTE_ASSIGN_OR_RETURN(bool ceil_mode, bool_arg(op, a, 5, "ceil_mode"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 6, "out"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* indices, tensor_arg(op, a, 7, "indices"));
  if (out->dtype != x->dtype) {
    return op_fail(ErrorCode::kInvalidArgument, op, "out is {}; expected the input's {}", scalar_type_name(out->dtype),
                   scalar_type_name(x->dtype));
  }
  HF2PTE_RETURN_IF_ERROR(need(indices->dtype == ScalarType::kLong, op, "indices", indices->dtype, "i64"));
  if (ceil_mode) return op_fail(ErrorCode::kNotSupported, op, "ceil_mode is not supported");
  if (x->rank != 4 || kernel.empty() || kernel.size() > 2 || stride.size() > 2 || padding.size() > 2 ||
      dilation.size() > 2) {
    return op_fail(ErrorCode::kNotSupported, op, "expected a 4-D input and 1- or 2-element lists; input {}",
                   shape_str(x->shape()));
  }
  const int64_t kh = pick_2d(kernel, 0, 1), kw = pick_2d(kernel, 1, 1);
  const int64_t sh = pick_2d(stride, 0, kh), sw = pick_2d(stride, 1, kw);
  const int64_t ph = pick_2d(padding, 0, 0), pw = pick_2d(padding, 1, 0);
  const int64_t dh = pick_2d(dilation, 0, 1), dw = pick_2d(dilation, 1, 1);
  if (!(kh > 0 && kw > 0 && sh > 0 && sw > 0 && dh > 0 && dw > 0 && ph >= 0 && pw >= 0 && 2 * ph <= kh &&
        2 * pw <= kw)) {
    return op_fail(ErrorCode::kInvalidArgument, op,
                   "kernel [{}, {}] stride [{}, {}] padding [{}, {}] dilation [{}, {}] are invalid", kh, kw, sh, sw, ph,
                   pw, dh, dw);
  }
  const int64_t N = x->sizes[0], C = x->sizes[1], H = x->sizes[2], W = x->sizes[3];
  if (H + 2 * ph < dh * (kh - 1) + 1 || W + 2 * pw < dw * (kw - 1) + 1) {
    return op_fail(ErrorCode::kInvalidArgument, op, "kernel [{}, {}] is larger than the padded input {}", kh, kw,
                   shape_str(x->shape()));
  }
  HF2PTE_RETURN_IF_ERROR(need_float(op, *x, "self"));
  const int64_t OH = (H + 2 * ph - dh * (kh - 1) - 1) / sh + 1, OW = (W + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
  const std::vector<int64_t> shape{N, C, OH, OW};
  HF2PTE_RETURN_IF_ERROR(check_shape(op, *out, shape));
  HF2PTE_RETURN_IF_ERROR(check_shape(op, *indices, shape));
  PoolParams p{x->data, out->data, static_cast<int64_t*>(indices->data), out->numel(), H, W, OH, OW,
               kh, kw, sh, sw, ph, pw, dh, dw};
  if (p.total == 0) return Status::ok();
  const unsigned grid = grid_for(ctx, p.total);
  switch (x->dtype) {
    case ScalarType::kFloat: max_pool2d_kernel<float><<<grid, kThreads, 0, ctx.stream>>>(p); break;
    case ScalarType::kBFloat16: max_pool2d_kernel<__nv_bfloat16><<<grid, kThreads, 0, ctx.stream>>>(p); break;
    default: max_pool2d_kernel<__half><<<grid, kThreads, 0, ctx.stream>>>(p); break;
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------
// Quantized ops (quantized_decomposed, docs/quantization.md): per-token
// dynamic activation quantization, the int8/int4-weight mixed linear, and the
// 8-/4-bit embeddings, with the portable kernels' arithmetic
// (src/kernels/portable/quantized.cpp).

/// Rows of the last dim ("tokens") of `t`.
int64_t token_rows(const DevTensor& t) {
  const int64_t n = t.rank == 0 ? 1 : t.sizes[size_t(t.rank - 1)];
  return n > 0 ? t.numel() / n : 0;
}

/// A required `ScalarType` argument that must be `want` (the quantized ops take int8 / float32 only).
Status need_dtype_arg(OpId op, std::span<const DevArg> a, size_t i, const char* what, ScalarType want) {
  HF2PTE_ASSIGN_OR_RETURN(std::optional<ScalarType> t, opt_dtype_arg(op, a, i, what));
  if (!t || *t != want) {
    return op_fail(ErrorCode::kNotSupported, op, "{} {}; only {}", what, t ? scalar_type_name(*t) : "None",
                   scalar_type_name(want));
  }
  return Status::ok();
}

Status need_dtype(OpId op, const DevTensor& t, ScalarType want, const char* what) {
  return need(t.dtype == want, op, what, t.dtype, std::string(scalar_type_name(want)).c_str());
}

/// Per-token scales (f64) and zero points (i64), one per row of `x`.
Status need_token_params(OpId op, const DevTensor& x, const DevTensor& scale, const DevTensor& zp) {
  HF2PTE_RETURN_IF_ERROR(need_dtype(op, scale, ScalarType::kDouble, "scales"));
  HF2PTE_RETURN_IF_ERROR(need_dtype(op, zp, ScalarType::kLong, "zero_points"));
  const int64_t rows = token_rows(x);
  if (scale.numel() != rows || zp.numel() != rows) {
    return op_fail(ErrorCode::kInvalidArgument, op, "{} tokens but {} scales and {} zero points", rows, scale.numel(),
                   zp.numel());
  }
  return Status::ok();
}

/// One block per token: its min and max (with 0), then upstream's parameters
/// (quant/per_token_qparams.h, shared with the portable kernel).
__global__ void token_qparams_kernel(const float* x, int64_t n, double* scale, int64_t* zero_point) {
  __shared__ float lo_s[kThreads], hi_s[kThreads];
  const float* row = x + int64_t(blockIdx.x) * n;
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    lo = fminf(lo, row[i]);
    hi = fmaxf(hi, row[i]);
  }
  lo_s[threadIdx.x] = lo;
  hi_s[threadIdx.x] = hi;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) {
      lo_s[threadIdx.x] = fminf(lo_s[threadIdx.x], lo_s[threadIdx.x + s]);
      hi_s[threadIdx.x] = fmaxf(hi_s[threadIdx.x], hi_s[threadIdx.x + s]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) quant::per_token_qparams(lo_s[0], hi_s[0], scale + blockIdx.x, zero_point + blockIdx.x);
}

Status launch_choose_qparams_per_token(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "input"));
  HF2PTE_RETURN_IF_ERROR(need_dtype_arg(op, a, 1, "dtype", ScalarType::kChar));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* scale, tensor_arg(op, a, 2, "scale_out"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* zp, tensor_arg(op, a, 3, "zero_point_out"));
  HF2PTE_RETURN_IF_ERROR(need_dtype(op, *x, ScalarType::kFloat, "input"));
  if (x->rank < 1) return op_fail(ErrorCode::kInvalidArgument, op, "input must have rank >= 1");
  std::vector<int64_t> shape(x->shape().begin(), x->shape().end());
  shape.back() = 1;
  HF2PTE_RETURN_IF_ERROR(check_shape(op, *scale, shape));
  HF2PTE_RETURN_IF_ERROR(check_shape(op, *zp, shape));
  HF2PTE_RETURN_IF_ERROR(need_token_params(op, *x, *scale, *zp));
  const int64_t rows = token_rows(*x);
  if (rows == 0) return Status::ok();
  if (rows > int64_t(INT32_MAX)) return op_fail(ErrorCode::kNotSupported, op, "{} tokens", rows);
  token_qparams_kernel<<<unsigned(rows), kThreads, 0, ctx.stream>>>(static_cast<const float*>(x->data),
                                                                      x->sizes[size_t(x->rank - 1)],
                                                                      static_cast<double*>(scale->data),
                                                                      static_cast<int64_t*>(zp->data));
  return Status::ok();
}

struct TokenQuantParams {
  const void* in;
  void* out;
  const double* scale;
  const int64_t* zp;
  int64_t n, total, qmin, qmax;
};

/// quantize_val: q = zp + round(x / scale) in f32 (the int32 zero point added
/// as a float, as the portable kernel adds it), clamped to [qmin, qmax].
__global__ void quantize_per_token_kernel(const TokenQuantParams p) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < p.total; i += step) {
    const int64_t t = i / p.n;
    const float inv = 1.0f / float(p.scale[t]);
    const float q = float(int32_t(p.zp[t])) + rintf(__fmul_rn(inv, static_cast<const float*>(p.in)[i]));
    const int64_t qi = isnan(q) ? p.qmin : int64_t(fminf(fmaxf(q, -9.2e18f), 9.2e18f));
    static_cast<int8_t*>(p.out)[i] = int8_t(qi < p.qmin ? p.qmin : qi > p.qmax ? p.qmax : qi);
  }
}

/// out = (q - zp) * float(scale).
__global__ void dequantize_per_token_kernel(const TokenQuantParams p) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < p.total; i += step) {
    const int64_t t = i / p.n;
    const int32_t q = static_cast<const int8_t*>(p.in)[i];
    static_cast<float*>(p.out)[i] = __fmul_rn(float(q - int32_t(p.zp[t])), float(p.scale[t]));
  }
}

/// quantize_per_token(input, scales, zero_points, qmin, qmax, dtype, out) and
/// dequantize_per_token(input, ..., dtype, output_dtype, out).
Status launch_per_token(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  const bool quantize = op == OpId::QuantizePerTokenOut;
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "input"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* scale, tensor_arg(op, a, 1, "scales"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* zp, tensor_arg(op, a, 2, "zero_points"));
  HF2PTE_ASSIGN_OR_RETURN(int64_t qmin, int_arg(op, a, 3, "quant_min"));
  HF2PTE_ASSIGN_OR_RETURN(int64_t qmax, int_arg(op, a, 4, "quant_max"));
  HF2PTE_RETURN_IF_ERROR(need_dtype_arg(op, a, 5, "dtype", ScalarType::kChar));
  if (!quantize) HF2PTE_RETURN_IF_ERROR(need_dtype_arg(op, a, 6, "output_dtype", ScalarType::kFloat));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, quantize ? 6 : 7, "out"));
  if (!(qmin < qmax && qmin >= -128 && qmax <= 127)) {
    return op_fail(ErrorCode::kInvalidArgument, op, "quant range [{}, {}] outside [-128, 127]", qmin, qmax);
  }
  HF2PTE_RETURN_IF_ERROR(need_dtype(op, *x, quantize ? ScalarType::kFloat : ScalarType::kChar, "input"));
  HF2PTE_RETURN_IF_ERROR(need_dtype(op, *out, quantize ? ScalarType::kChar : ScalarType::kFloat, "out"));
  HF2PTE_RETURN_IF_ERROR(need_token_params(op, *x, *scale, *zp));
  HF2PTE_RETURN_IF_ERROR(check_shape(op, *out, x->shape()));
  TokenQuantParams p{x->data, out->data, static_cast<const double*>(scale->data), static_cast<const int64_t*>(zp->data),
                     x->rank == 0 ? 1 : x->sizes[size_t(x->rank - 1)], x->numel(), qmin, qmax};
  if (p.total == 0) return Status::ok();
  if (quantize) {
    quantize_per_token_kernel<<<grid_for(ctx, p.total), kThreads, 0, ctx.stream>>>(p);
  } else {
    dequantize_per_token_kernel<<<grid_for(ctx, p.total), kThreads, 0, ctx.stream>>>(p);
  }
  return Status::ok();
}

struct MixedLinearParams {
  const float* x;      ///< [M, K]
  const int8_t* w;     ///< [N, K]
  const float* scale;  ///< [N, G]
  float* out;          ///< [M, N]
  int64_t M, N, K, G, group;
};

constexpr int kMixedRows = 4;  ///< rows of x per warp (decode has 1)

/// One warp per output column n and kMixedRows rows of x, then a warp sum per
/// row; each product is scaled by its group's scale. `kBy4`: the lanes stream
/// the weight row four int8 at a time (K and the group size multiples of 4,
/// x 16-byte aligned), else one element each. Decode reads each weight byte
/// once; prefill reads a row from L2 once per kMixedRows tokens.
template <bool kBy4>
__global__ void mixed_linear_kernel(const MixedLinearParams p) {
  const int lane = threadIdx.x % 32;
  const int64_t n = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int64_t m0 = int64_t(blockIdx.y) * kMixedRows;
  if (n >= p.N) return;  // the whole warp: one column per warp
  const int rows = int(min(int64_t(kMixedRows), p.M - m0));
  float acc[kMixedRows] = {};
  const float* srow = p.scale + n * p.G;
  if constexpr (kBy4) {
    const char4* wrow = reinterpret_cast<const char4*>(p.w + n * p.K);
    for (int64_t k4 = lane; k4 < p.K / 4; k4 += 32) {
      const char4 q = wrow[k4];
      const float s = srow[(k4 * 4) / p.group];
      const float w0 = float(q.x) * s, w1 = float(q.y) * s, w2 = float(q.z) * s, w3 = float(q.w) * s;
      for (int r = 0; r < rows; ++r) {
        const float4 xv = reinterpret_cast<const float4*>(p.x + (m0 + r) * p.K)[k4];
        acc[r] += xv.x * w0 + xv.y * w1 + xv.z * w2 + xv.w * w3;
      }
    }
  } else {
    for (int64_t k = lane; k < p.K; k += 32) {
      const float wv = float(p.w[n * p.K + k]) * srow[k / p.group];
      for (int r = 0; r < rows; ++r) acc[r] += p.x[(m0 + r) * p.K + k] * wv;
    }
  }
  for (int r = 0; r < rows; ++r) {
    float v = acc[r];
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
    if (lane == 0) p.out[(m0 + r) * p.N + n] = v;
  }
}

/// mixed_linear(input f32 [M, K], weight i8 [N, K], weight_scales f32 [N] or
/// [N, G], weight_zero_points None, dtype f32 or None, out [M, N]).
Status launch_mixed_linear(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* x, tensor_arg(op, a, 0, "input"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* w, tensor_arg(op, a, 1, "weight"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* scales, tensor_arg(op, a, 2, "weight_scales"));
  if (a.size() < 6 || a[3].kind != ValueKind::kNone) {
    return op_fail(ErrorCode::kNotSupported, op, "weight zero points are not supported");
  }
  HF2PTE_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, opt_dtype_arg(op, a, 4, "dtype"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 5, "out"));
  if (dtype && *dtype != ScalarType::kFloat) {
    return op_fail(ErrorCode::kNotSupported, op, "dtype {}; only float32", scalar_type_name(*dtype));
  }
  HF2PTE_RETURN_IF_ERROR(need_dtype(op, *x, ScalarType::kFloat, "input"));
  HF2PTE_RETURN_IF_ERROR(need_dtype(op, *w, ScalarType::kChar, "weight"));
  HF2PTE_RETURN_IF_ERROR(need_dtype(op, *scales, ScalarType::kFloat, "weight_scales"));
  HF2PTE_RETURN_IF_ERROR(need_dtype(op, *out, ScalarType::kFloat, "out"));
  if (x->rank != 2 || w->rank != 2 || (scales->rank != 1 && scales->rank != 2)) {
    return op_fail(ErrorCode::kInvalidArgument, op, "input {} and weight {} must be 2-D, scales {} 1-D or 2-D",
                   shape_str(x->shape()), shape_str(w->shape()), shape_str(scales->shape()));
  }
  MixedLinearParams p{static_cast<const float*>(x->data), static_cast<const int8_t*>(w->data),
                      static_cast<const float*>(scales->data), static_cast<float*>(out->data),
                      x->sizes[0], w->sizes[0], x->sizes[1], scales->rank == 2 ? scales->sizes[1] : 1, 0};
  if (w->sizes[1] != p.K || scales->sizes[0] != p.N || p.G < 1 || p.K % p.G != 0) {
    return op_fail(ErrorCode::kInvalidArgument, op, "input {} x weight {} with scales {}", shape_str(x->shape()),
                   shape_str(w->shape()), shape_str(scales->shape()));
  }
  HF2PTE_RETURN_IF_ERROR(check_shape(op, *out, std::vector<int64_t>{p.M, p.N}));
  p.group = p.K / p.G;
  if (p.M == 0 || p.N == 0) return Status::ok();
  if (p.K == 0) return cuda_check(cudaMemsetAsync(out->data, 0, size_t(p.M * p.N) * sizeof(float), ctx.stream), op,
                                  "cudaMemsetAsync");
  const int64_t row_blocks = ceil_div(p.M, kMixedRows);
  if (row_blocks > 65535) return op_fail(ErrorCode::kNotSupported, op, "{} rows", p.M);
  constexpr int kWarps = kThreads / 32;
  const dim3 grid(unsigned(ceil_div(p.N, kWarps)), unsigned(row_blocks));
  const bool by4 = p.K % 4 == 0 && p.group % 4 == 0 && reinterpret_cast<uintptr_t>(p.x) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(p.w) % 4 == 0;
  if (by4) {
    mixed_linear_kernel<true><<<grid, kThreads, 0, ctx.stream>>>(p);
  } else {
    mixed_linear_kernel<false><<<grid, kThreads, 0, ctx.stream>>>(p);
  }
  return Status::ok();
}

struct QEmbeddingParams {
  const uint8_t* w;  ///< [rows, row_bytes]
  const float* scale;
  const float* zp;   ///< or null
  const void* idx;
  bool idx32;
  float* out;
  int64_t count, dim, rows, row_bytes, G, group;
  int bits;
  int* flag;
  int node;
};

/// out[i, j] = (q(idx[i], j) - zp) * scale[idx[i], j / group]; 4-bit values
/// are upstream's embedding_4bit packing (even column in the high nibble, +8).
__global__ void quantized_embedding_kernel(const QEmbeddingParams p) {
  const int64_t total = p.count * p.dim;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += step) {
    const int64_t i = t / p.dim, j = t % p.dim;
    const int64_t v = p.idx32 ? int64_t(static_cast<const int32_t*>(p.idx)[i]) : static_cast<const int64_t*>(p.idx)[i];
    if (v < 0 || v >= p.rows) {
      if (j == 0) flag_error(p.flag, p.node);
      continue;
    }
    const uint8_t* row = p.w + v * p.row_bytes;
    int32_t q;
    if (p.bits == 8) {
      q = int32_t(int8_t(row[j]));
    } else {
      const uint8_t b = row[j / 2];
      q = int32_t(j % 2 == 0 ? b >> 4 : b & 0xF) - 8;
    }
    const int64_t s = v * p.G + j / p.group;
    const float zp = p.zp ? p.zp[s] : 0.0f;
    p.out[t] = __fmul_rn(__fsub_rn(float(q), zp), p.scale[s]);
  }
}

/// embedding_byte / embedding_4bit(weight, weight_scales, weight_zero_points?,
/// quant_min, quant_max, indices, out).
Status launch_quantized_embedding(DeviceContext& ctx, OpId op, std::span<const DevArg> a) {
  const int bits = op == OpId::EmbeddingByteOut ? 8 : 4;
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* w, tensor_arg(op, a, 0, "weight"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* scales, tensor_arg(op, a, 1, "weight_scales"));
  const DevTensor* zps = nullptr;
  if (a.size() > 2 && a[2].kind != ValueKind::kNone) {
    HF2PTE_ASSIGN_OR_RETURN(zps, tensor_arg(op, a, 2, "weight_zero_points"));
  }
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* indices, tensor_arg(op, a, 5, "indices"));
  HF2PTE_ASSIGN_OR_RETURN(const DevTensor* out, tensor_arg(op, a, 6, "out"));
  HF2PTE_RETURN_IF_ERROR(need_dtype(op, *w, bits == 8 ? ScalarType::kChar : ScalarType::kByte, "weight"));
  HF2PTE_RETURN_IF_ERROR(need_dtype(op, *scales, ScalarType::kFloat, "weight_scales"));
  HF2PTE_RETURN_IF_ERROR(need_dtype(op, *out, ScalarType::kFloat, "out"));
  HF2PTE_RETURN_IF_ERROR(need(is_index_dt(indices->dtype), op, "indices", indices->dtype, "i64, i32"));
  if (w->rank != 2 || (scales->rank != 1 && scales->rank != 2)) {
    return op_fail(ErrorCode::kInvalidArgument, op, "weight {} must be 2-D and scales {} 1-D or 2-D",
                   shape_str(w->shape()), shape_str(scales->shape()));
  }
  if (zps != nullptr) {
    HF2PTE_RETURN_IF_ERROR(need_dtype(op, *zps, ScalarType::kFloat, "weight_zero_points"));
    if (zps->numel() != scales->numel()) {
      return op_fail(ErrorCode::kInvalidArgument, op, "{} zero points for {} scales", zps->numel(), scales->numel());
    }
  }
  QEmbeddingParams p{};
  p.rows = w->sizes[0];
  p.row_bytes = w->sizes[1];
  p.dim = p.row_bytes * (8 / bits);
  p.G = scales->rank == 2 ? scales->sizes[1] : 1;
  if (scales->sizes[0] != p.rows || p.G < 1 || p.dim % p.G != 0) {
    return op_fail(ErrorCode::kInvalidArgument, op, "scales {} for weight {}", shape_str(scales->shape()),
                   shape_str(w->shape()));
  }
  if (indices->rank >= kMaxDims) {
    return op_fail(ErrorCode::kNotSupported, op, "indices of rank {}", indices->rank);
  }
  std::vector<int64_t> shape(indices->shape().begin(), indices->shape().end());
  shape.push_back(p.dim);
  HF2PTE_RETURN_IF_ERROR(check_shape(op, *out, shape));
  p.w = static_cast<const uint8_t*>(w->data);
  p.scale = static_cast<const float*>(scales->data);
  p.zp = zps ? static_cast<const float*>(zps->data) : nullptr;
  p.idx = indices->data;
  p.idx32 = indices->dtype == ScalarType::kInt;
  p.out = static_cast<float*>(out->data);
  p.count = indices->numel();
  p.group = p.dim / p.G;
  p.bits = bits;
  p.flag = ctx.error_flag;
  p.node = ctx.node_index;
  if (p.count == 0 || p.dim == 0) return Status::ok();
  quantized_embedding_kernel<<<grid_for(ctx, p.count * p.dim), kThreads, 0, ctx.stream>>>(p);
  return Status::ok();
}

// ---------------------------------------------------------------------------
// The table.

struct LauncherRow {
  OpId op;
  OpLauncher fn;
};

constexpr LauncherRow kLaunchers[] = {
    {OpId::AddOut, launch_arith},
    {OpId::AddScalarOut, launch_arith},
    {OpId::SubOut, launch_arith},
    {OpId::MulOut, launch_arith},
    {OpId::MulScalarOut, launch_arith},
    {OpId::DivOut, launch_div},
    {OpId::NegOut, launch_neg},
    {OpId::RsqrtOut, launch_unary_float},
    {OpId::SigmoidOut, launch_unary_float},
    {OpId::TanhOut, launch_unary_float},
    {OpId::ErfOut, launch_unary_float},
    {OpId::ExpOut, launch_unary_float},
    {OpId::Log1pOut, launch_unary_float},
    {OpId::ClampOut, launch_clamp},
    {OpId::MaximumOut, launch_maximum},
    {OpId::PowTensorScalarOut, launch_pow},
    {OpId::LeTensorOut, launch_compare},
    {OpId::LtTensorOut, launch_compare},
    {OpId::GtTensorOut, launch_compare},
    {OpId::GeTensorOut, launch_compare},
    {OpId::EqTensorOut, launch_compare},
    {OpId::WhereSelfOut, launch_where},
    {OpId::MeanOut, launch_sum_mean},
    {OpId::SumIntListOut, launch_sum_mean},
    {OpId::AmaxOut, launch_amax},
    {OpId::SoftmaxOut, launch_softmax},
    {OpId::MmOut, launch_matmul},
    {OpId::BmmOut, launch_matmul},
    {OpId::AddmmOut, launch_matmul},
    {OpId::EmbeddingOut, launch_embedding},
    {OpId::IndexSelectOut, launch_index_select},
    {OpId::IndexPut_, launch_index_put},
    {OpId::ViewCopyOut, launch_view},
    {OpId::PermuteCopyOut, launch_permute},
    {OpId::SliceCopyTensorOut, launch_slice},
    {OpId::CatOut, launch_cat},
    {OpId::CloneOut, launch_clone},
    {OpId::ToDimOrderCopyOut, launch_clone},
    {OpId::ExpandCopyOut, launch_expand},
    {OpId::ConvolutionOut, launch_convolution},
    {OpId::MaxPool2dWithIndicesOut, launch_max_pool2d},
    {OpId::ChooseQparamsPerTokenAsymmetricOut, launch_choose_qparams_per_token},
    {OpId::QuantizePerTokenOut, launch_per_token},
    {OpId::DequantizePerTokenOut, launch_per_token},
    {OpId::MixedLinearOut, launch_mixed_linear},
    {OpId::EmbeddingByteOut, launch_quantized_embedding},
    {OpId::Embedding4bitOut, launch_quantized_embedding},
};

}  // namespace

OpLauncher find_launcher(OpId op) {
  for (const LauncherRow& row : kLaunchers) {
    if (row.op == op) return row.fn;
  }
  return nullptr;
}

std::string kernel_image_problem() {
  cudaFuncAttributes attr{};
  const cudaError_t e = cudaFuncGetAttributes(&attr, copy_convert_kernel);
  if (e == cudaSuccess) return "";
  (void)cudaGetLastError();  // not sticky; clear it
  int dev = 0, major = 0, minor = 0;
  (void)cudaGetDevice(&dev);
  (void)cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  (void)cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return fmt::format("this build has no CUDA kernels that run on device {} (sm_{}{}): {}", dev, major, minor,
                     cudaGetErrorString(e));
}

}  // namespace hf2pte::cuda
