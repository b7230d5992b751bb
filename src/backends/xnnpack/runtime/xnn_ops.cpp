// Executes a compiled XnnGraph: per node, propagate shapes from the current
// input shapes (bounded dynamic shapes, docs/xnnpack-payload.md §8), bind the
// output storage, then compute with plain loops. Quantized 8-bit values take
// part in elementwise nodes through dequantize -> float -> quantize; the
// static-quant fully-connected path accumulates in int32 as XNNPACK does.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>

#include "backends/xnnpack/runtime/scratch.h"
#include "core/half.h"
#include "backends/xnnpack/runtime/xnn_graph.h"
#include "kernels/optimized/gemm.h"
#include "kernels/optimized/simd_kernels.h"
#include "kernels/optimized/thread_pool.h"

namespace hf2pte::xnn {

namespace {

using Shape = std::vector<int64_t>;

std::atomic<NodeTimeSink*> g_node_time_sink{nullptr};

Result<int64_t> checked_numel(const Shape& s) {
  uint64_t n = 1;
  for (int64_t d : s) {
    HF2PTE_CHECK_OR_RETURN(d >= 0, kInvalidProgram, "negative dim {}", d);
    if (d != 0 && n > kMaxValueBytes / uint64_t(d)) {
      return make_error(ErrorCode::kOutOfRange, "shape [{}] is too large", fmt::join(s, ", "));
    }
    n *= uint64_t(d);
  }
  return int64_t(n);
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

/// Contiguous strides (in elements) of `s`.
Shape strides_of(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

/// Calls fn(linear_out_index, idx) for every index of `shape`, row-major.
template <typename Fn>
void for_each_index(const Shape& shape, Fn&& fn) {
  const int64_t n = numel(shape);
  std::array<int64_t, kMaxRank + 1> idx{};
  for (int64_t i = 0; i < n; ++i) {
    fn(i, idx.data());
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

/// Element `i` of a float-like value as float.
inline float load(const XValue& v, size_t i) {
  switch (v.dtype) {
    case XDtype::kFp32:
    case XDtype::kQDInt8: return static_cast<const float*>(v.data)[i];  // qdint8 is held as float
    case XDtype::kFp16: return half_to_float(static_cast<const uint16_t*>(v.data)[i]);
    case XDtype::kQInt8: return float(int32_t(static_cast<const int8_t*>(v.data)[i]) - v.zero_point) * v.scale;
    case XDtype::kQUInt8: return float(int32_t(static_cast<const uint8_t*>(v.data)[i]) - v.zero_point) * v.scale;
    default: return float(static_cast<const int32_t*>(v.data)[i]);
  }
}

/// Stores `f` into element `i`, quantizing 8-bit values the way XNNPACK's
/// convert does: round-to-nearest-even of x * (1 / scale), plus zero point.
inline void store(XValue& v, size_t i, float f) {
  switch (v.dtype) {
    case XDtype::kFp32:
    case XDtype::kQDInt8: static_cast<float*>(v.data)[i] = f; return;
    case XDtype::kFp16: static_cast<uint16_t*>(v.data)[i] = float_to_half(f); return;  // nearest even
    case XDtype::kQInt8: {
      const float q = std::nearbyint(f * (1.0f / v.scale)) + float(v.zero_point);
      static_cast<int8_t*>(v.data)[i] = int8_t(std::clamp(q, -128.0f, 127.0f));
      return;
    }
    case XDtype::kQUInt8: {
      const float q = std::nearbyint(f * (1.0f / v.scale)) + float(v.zero_point);
      static_cast<uint8_t*>(v.data)[i] = uint8_t(std::clamp(q, 0.0f, 255.0f));
      return;
    }
    default: static_cast<int32_t*>(v.data)[i] = int32_t(f); return;
  }
}

class Runner {
 public:
  Runner(XnnGraph& g, OutputBinder& binder) : g_(g), binder_(binder), arena_(thread_scratch()) {}

  Status run() {
    arena_.begin_run();
    Status st = run_nodes();
    arena_.end_run();
    return st;
  }

 private:
  Status run_nodes() {
    ready_.assign(g_.values.size(), 0);
    held_.assign(g_.values.size(), ScratchSpan{});
    for (size_t i = 0; i < g_.values.size(); ++i) {
      const XValue& v = g_.values[i];
      ready_[i] = v.is_constant || v.is_input;
    }
    NodeTimeSink* sink = g_node_time_sink.load(std::memory_order_relaxed);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const XNode& n = g_.nodes[i];
      const auto t0 = sink != nullptr ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      Status st = std::visit([&](const auto& p) { return exec(n, p); }, n.params);
      if (sink != nullptr) {
        sink->add(n.name, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      if (!st) return st.with_context(fmt::format("xnode {} {}, debug_handle {}", i, n.name, n.debug_handle));
      for (uint32_t dead : g_.release_after[i]) arena_.release(std::exchange(held_[dead], ScratchSpan{}));
    }
    for (uint32_t e = 0; e < g_.external_values.size(); ++e) {
      const uint32_t vi = g_.external_values[e];
      HF2PTE_CHECK_OR_RETURN(vi == kInvalidId || !g_.values[vi].is_output || ready_[vi], kInvalidProgram,
                             "external output {} is never written", e);
    }
    return Status::ok();
  }

  Result<XValue*> input(uint32_t vi) {
    HF2PTE_CHECK_OR_RETURN(ready_[vi], kInvalidProgram, "xvalue {} is read before any node writes it", vi);
    return &g_.values[vi];
  }

  /// Gives value `vi` the shape `shape` and storage for it: the caller's
  /// tensor for an external output, else a span of the thread's scratch arena
  /// (released after the value's last reader). `shape` must not be `vi`'s own.
  Result<XValue*> output(uint32_t vi, const Shape& shape) {
    XValue& v = g_.values[vi];
    HF2PTE_CHECK_OR_RETURN(shape.size() <= kMaxRank, kInvalidProgram, "output rank {} > {}", shape.size(), kMaxRank);
    HF2PTE_ASSIGN_OR_RETURN(int64_t n, checked_numel(shape));
    const uint64_t bytes = uint64_t(n) * xdtype_size(v.dtype);
    HF2PTE_CHECK_OR_RETURN(bytes <= kMaxValueBytes, kOutOfRange, "xvalue {} needs {} bytes", vi, bytes);
    if (v.is_output) {
      HF2PTE_ASSIGN_OR_RETURN(v.data, binder_.bind_output(v.external_id, shape));
    } else if (v.forwarded_by != kInvalidId) {
      // Stored in the reshape's output: bound here at the reshaped shape.
      const auto& r = std::get<ReshapeParams>(g_.nodes[v.forwarded_by].params);
      XValue& y = g_.values[r.output];
      HF2PTE_ASSIGN_OR_RETURN(auto y_shape, reshaped(shape, r.new_shape));
      HF2PTE_ASSIGN_OR_RETURN(v.data, binder_.bind_output(y.external_id, y_shape));
      y.data = v.data;
    } else {
      held_[vi] = arena_.alloc(bytes);
      v.data = held_[vi].data;
    }
    v.shape.assign(shape.begin(), shape.end());
    ready_[vi] = 1;
    return &v;
  }

  static float clamp_om(const XNode& n, float f) { return std::min(std::max(f, n.out_min), n.out_max); }

  Status exec(const XNode& n, const UnaryParams& p);
  Status exec(const XNode& n, const BinaryParams& p);
  Status exec(const XNode& n, const FullyConnectedParams& p);
  Status exec(const XNode& n, const BatchMatMulParams& p);
  Status exec(const XNode& n, const SoftmaxParams& p);
  Status exec(const XNode& n, const TransposeParams& p);
  Status exec(const XNode& n, const ReshapeParams& p);
  Status exec(const XNode& n, const SliceParams& p);
  Status exec(const XNode& n, const ConcatParams& p);
  Status exec(const XNode& n, const PadParams& p);
  Status exec(const XNode& n, const ConvParams& p);
  Status exec(const XNode& n, const PoolParams& p);
  Status exec(const XNode& n, const GlobalPoolParams& p);
  /// The window of `p` over NHWC input `x` (output size included), or an
  /// error naming the shapes when it does not fit.
  static Result<kernels::Window2d> window_over(const XValue& x, const WindowParams& p);

  XnnGraph& g_;
  OutputBinder& binder_;
  std::vector<uint8_t> ready_;
  ScratchArena& arena_;
  std::vector<ScratchSpan> held_;  ///< per value: its scratch storage this run
};

float apply_unary(UnaryKind k, float x, float alpha) {
  switch (k) {
    case UnaryKind::kSigmoid: return 1.0f / (1.0f + std::exp(-x));
    case UnaryKind::kTanh: return std::tanh(x);
    case UnaryKind::kGelu: return 0.5f * x * (1.0f + std::erf(x * float(M_SQRT1_2)));
    case UnaryKind::kNeg: return -x;
    case UnaryKind::kExp: return std::exp(x);
    case UnaryKind::kSqrt: return std::sqrt(x);
    case UnaryKind::kRsqrt: return 1.0f / std::sqrt(x);
    case UnaryKind::kSquare: return x * x;
    case UnaryKind::kAbs: return std::fabs(x);
    case UnaryKind::kFloor: return std::floor(x);
    case UnaryKind::kCeil: return std::ceil(x);
    case UnaryKind::kLog: return std::log(x);
    case UnaryKind::kSin: return std::sin(x);
    case UnaryKind::kCos: return std::cos(x);
    case UnaryKind::kHardswish: return x * std::min(std::max(x + 3.0f, 0.0f), 6.0f) / 6.0f;
    case UnaryKind::kLeakyRelu: return x > 0 ? x : alpha * x;
    case UnaryKind::kElu: return x > 0 ? x : alpha * std::expm1(x);
    case UnaryKind::kClamp:  // bounds applied by the caller (output_min_max)
    case UnaryKind::kCopy:
    case UnaryKind::kConvert: return x;
  }
  return x;
}

/// y[i] = f(i) for i < n, in fixed blocks of 8 plus a tail: the fixed inner
/// trip count lets -O2's cheap vectorizer turn each block into SIMD code.
/// `y` must not alias what f reads (outputs are fresh storage).
template <typename F>
inline void blocked(float* __restrict y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int64_t j = 0; j < 8; ++j) y[i + j] = f(i + j);
  }
  for (; i < n; ++i) y[i] = f(i);
}

/// The unary kinds LLM graphs run on every token, as one branch-free loop
/// each (blocked() ones vectorize; same expressions as apply_unary, so the
/// results are identical; sigmoid and GELU are the kernels' SIMD ones, within a few ulp / 1.5e-7).
/// False for the other kinds.
bool unary_f32_fast(UnaryKind k, const float* __restrict x, float* __restrict y, size_t count) {
  const auto n = int64_t(count);
  switch (k) {
    case UnaryKind::kNeg: blocked(y, n, [&](int64_t i) { return -x[i]; }); return true;
    case UnaryKind::kSquare: blocked(y, n, [&](int64_t i) { return x[i] * x[i]; }); return true;
    case UnaryKind::kRsqrt:
      for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / std::sqrt(x[i]);
      return true;
    case UnaryKind::kSigmoid: kernels::sigmoid_f32(x, y, n); return true;
    case UnaryKind::kGelu: kernels::gelu_f32(x, y, n); return true;
    case UnaryKind::kAbs: blocked(y, n, [&](int64_t i) { return std::fabs(x[i]); }); return true;
    default:
      return false;
  }
}

// fp32 -> qdint8: per row, XNNPACK's asymmetric int8 parameters (range widened
// to include 0, zero point nudged to an integer), then each value rounded to
// that grid. Stored as float: see XValue::num_nonbatch_dims.
void quantize_rows(const XValue& x, XValue& y) {
  const size_t rank = x.shape.size();
  const size_t nb = std::min(rank, size_t(y.num_nonbatch_dims));
  int64_t row = 1;
  for (size_t d = rank - nb; d < rank; ++d) row *= x.shape[d];
  const int64_t count = numel(x.shape);
  if (row == 0 || count == 0) return;
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(y.data);
  for (int64_t r = 0; r < count / row; ++r) {
    const float* xr = in + r * row;
    float lo = 0.0f, hi = 0.0f;
    for (int64_t i = 0; i < row; ++i) {
      lo = std::min(lo, xr[i]);
      hi = std::max(hi, xr[i]);
    }
    const float inv_scale = lo == hi ? 1.0f : 255.0f / (hi - lo);
    const float zp_min_err = -128.0f + lo * inv_scale, zp_max_err = 127.0f + hi * inv_scale;
    float zp = zp_min_err + zp_max_err > 0 ? -128.0f - lo * inv_scale : 127.0f - hi * inv_scale;
    zp = std::nearbyint(std::clamp(zp, -128.0f, 127.0f));
    const float scale = 1.0f / inv_scale;
    for (int64_t i = 0; i < row; ++i) {
      const float q = std::clamp(std::nearbyint(xr[i] * inv_scale) + zp, -128.0f, 127.0f);
      out[r * row + i] = (q - zp) * scale;
    }
  }
}

Status Runner::exec(const XNode& n, const UnaryParams& p) {
  if (p.fused) return Status::ok();  // its readers quantize the fp32 input themselves
  HF2PTE_ASSIGN_OR_RETURN(XValue * x, input(p.input));
  HF2PTE_ASSIGN_OR_RETURN(XValue * y, output(p.output, x->shape));
  const size_t count = size_t(numel(x->shape));
  if (p.kind == UnaryKind::kConvert && y->dtype == XDtype::kQDInt8) {
    quantize_rows(*x, *y);
    return Status::ok();
  }
  const bool same_encoding = x->dtype == y->dtype && x->scale == y->scale && x->zero_point == y->zero_point;
  if ((p.kind == UnaryKind::kCopy || p.kind == UnaryKind::kConvert) && same_encoding) {
    std::memmove(y->data, x->data, count * xdtype_size(x->dtype));
    return Status::ok();
  }
  // fp16 <-> fp32 (the widening around an fp16 graph's computing nodes): one
  // vector conversion per row, rounding to nearest even as the scalar store does.
  if (p.kind == UnaryKind::kConvert && x->dtype == XDtype::kFp16 && y->dtype == XDtype::kFp32) {
    kernels::simd().half_to_float_row(static_cast<const uint16_t*>(x->data), static_cast<float*>(y->data),
                                      int64_t(count));
    return Status::ok();
  }
  if (p.kind == UnaryKind::kConvert && x->dtype == XDtype::kFp32 && y->dtype == XDtype::kFp16) {
    kernels::simd().float_to_half_row(static_cast<const float*>(x->data), static_cast<uint16_t*>(y->data),
                                      int64_t(count));
    return Status::ok();
  }
  // Only Clamp honours output_min_max among unary nodes (§7).
  const bool clamp = p.kind == UnaryKind::kClamp;
  if (x->dtype == XDtype::kFp32 && y->dtype == XDtype::kFp32) {
    const float* in = static_cast<const float*>(x->data);
    float* out = static_cast<float*>(y->data);
    if (unary_f32_fast(p.kind, in, out, count)) return Status::ok();
    for (size_t i = 0; i < count; ++i) {
      const float r = apply_unary(p.kind, in[i], p.alpha);
      out[i] = clamp ? clamp_om(n, r) : r;
    }
    return Status::ok();
  }
  for (size_t i = 0; i < count; ++i) {
    const float r = apply_unary(p.kind, load(*x, i), p.alpha);
    store(*y, i, clamp ? clamp_om(n, r) : r);
  }
  return Status::ok();
}

float apply_binary(BinaryKind k, float a, float b) {
  switch (k) {
    case BinaryKind::kAdd: return a + b;
    case BinaryKind::kSub: return a - b;
    case BinaryKind::kMul: return a * b;
    case BinaryKind::kDiv: return a / b;
    case BinaryKind::kMin: return std::min(a, b);
    case BinaryKind::kMax: return std::max(a, b);
  }
  return 0.0f;
}

using BroadcastStrides = std::array<int64_t, kMaxRank>;

/// One binary loop over `n` outputs; each operand either a contiguous run
/// (step 1) or one value repeated (step 0).
template <typename Op>
void binary_run(Op op, const float* __restrict a, bool a_vec, const float* __restrict b, bool b_vec,
                float* __restrict y, int64_t n) {
  if (a_vec && b_vec) {
    blocked(y, n, [&](int64_t i) { return op(a[i], b[i]); });
  } else if (a_vec) {
    const float bv = b[0];
    blocked(y, n, [&](int64_t i) { return op(a[i], bv); });
  } else if (b_vec) {
    const float av = a[0];
    blocked(y, n, [&](int64_t i) { return op(av, b[i]); });
  } else {
    std::fill(y, y + n, op(a[0], b[0]));
  }
}

/// Blocks [o0, o1) of the outer index (dims [0, split)).
template <typename Op>
void binary_blocks(Op op, const float* a, const float* b, float* y, int64_t o0, int64_t o1, int64_t inner,
                   const std::array<int64_t, kMaxRank + 1>& oa, const std::array<int64_t, kMaxRank + 1>& ob,
                   const Shape& out, size_t split, bool a_vec, bool b_vec) {
  // Offsets of the outer index advance like an odometer, started at o0.
  std::array<int64_t, kMaxRank + 1> idx{};
  int64_t ia = 0, ib = 0;
  for (size_t d = split, rest = size_t(o0); d-- > 0;) {
    idx[d] = int64_t(rest % size_t(out[d]));
    rest /= size_t(out[d]);
    ia += idx[d] * oa[d];
    ib += idx[d] * ob[d];
  }
  for (int64_t o = o0; o < o1; ++o) {
    binary_run(op, a + ia, a_vec, b + ib, b_vec, y + o * inner, inner);
    for (size_t d = split; d-- > 0;) {
      ia += oa[d];
      ib += ob[d];
      if (++idx[d] < out[d]) break;
      ia -= oa[d] * out[d];
      ib -= ob[d] * out[d];
      idx[d] = 0;
    }
  }
}

/// fp32 binary node with numpy broadcasting in blocks: the output splits
/// into outer dims (any broadcast, walked per block) and the longest run of
/// trailing dims where each operand is either contiguous like the output or
/// constant (a bias row, a per-row scale, a scalar). One tight loop per block,
/// the same float expressions as apply_binary. `sa`/`sb` are the operands'
/// element strides per output dim (0 where broadcast).
bool binary_f32_fast(BinaryKind k, const Shape& out, const XValue& a, const BroadcastStrides& sa, const XValue& b,
                     const BroadcastStrides& sb, float* y) {
  const size_t rank = out.size();
  if (rank > kMaxRank) return false;
  const int64_t total = numel(out);
  if (total == 0) return true;
  // Largest suffix [split, rank) where each operand is all-contiguous or all-constant.
  auto suffix_kind = [&](const BroadcastStrides& st, size_t from, bool& vec) {
    int64_t expect = 1;
    bool contiguous = true, constant = true;
    for (size_t d = rank; d-- > from;) {
      if (out[d] == 1) continue;
      contiguous = contiguous && st[d] == expect;
      constant = constant && st[d] == 0;
      expect *= out[d];
    }
    vec = !constant;
    return contiguous || constant;
  };
  size_t split = rank;
  bool a_vec = false, b_vec = false;
  for (size_t s = 0; s <= rank; ++s) {
    bool av = false, bv = false;
    if (suffix_kind(sa, s, av) && suffix_kind(sb, s, bv)) {
      split = s;
      a_vec = av;
      b_vec = bv;
      break;
    }
  }
  int64_t inner = 1;
  for (size_t d = split; d < rank; ++d) inner *= out[d];
  const int64_t outer = total / inner;
  std::array<int64_t, kMaxRank + 1> oa{}, ob{};
  for (size_t d = 0; d < split; ++d) oa[d] = sa[d], ob[d] = sb[d];
  const float* pa = static_cast<const float*>(a.data);
  const float* pb = static_cast<const float*>(b.data);
  // Large outputs across the pool: whole blocks per task, or pieces of the one
  // block when nothing broadcasts (SiLU's gate * up at prefill).
  auto run = [&](auto op) {
    constexpr int64_t kPerTask = 1 << 16;
    if (outer == 1) {
      kernels::parallel_for(inner, inner >= 4 * kPerTask ? kPerTask : inner, [&](int64_t i0, int64_t i1) {
        binary_run(op, pa + (a_vec ? i0 : 0), a_vec, pb + (b_vec ? i0 : 0), b_vec, y + i0, i1 - i0);
      });
      return;
    }
    const int64_t blocks_per_task = std::max<int64_t>(1, kPerTask / std::max<int64_t>(inner, 1));
    kernels::parallel_for(outer, total >= 4 * kPerTask ? blocks_per_task : outer, [&](int64_t o0, int64_t o1) {
      binary_blocks(op, pa, pb, y, o0, o1, inner, oa, ob, out, split, a_vec, b_vec);
    });
  };
  switch (k) {
    case BinaryKind::kAdd: run([](float u, float v) { return u + v; }); return true;
    case BinaryKind::kSub: run([](float u, float v) { return u - v; }); return true;
    case BinaryKind::kMul: run([](float u, float v) { return u * v; }); return true;
    case BinaryKind::kDiv: run([](float u, float v) { return u / v; }); return true;
    case BinaryKind::kMin: run([](float u, float v) { return std::min(u, v); }); return true;
    case BinaryKind::kMax: run([](float u, float v) { return std::max(u, v); }); return true;
  }
  return false;
}

Status Runner::exec(const XNode& n, const BinaryParams& p) {
  HF2PTE_ASSIGN_OR_RETURN(XValue * a, input(p.input1));
  HF2PTE_ASSIGN_OR_RETURN(XValue * b, input(p.input2));
  // Numpy broadcasting, aligned at the innermost dim.
  const size_t rank = std::max(a->shape.size(), b->shape.size());
  HF2PTE_CHECK_OR_RETURN(rank <= kMaxRank, kInvalidProgram, "binary operand rank {} > {}", rank, kMaxRank);
  // Element strides per output dim (0 where broadcast), on the stack: this
  // runs for every elementwise node of every call.
  Shape out(rank);
  BroadcastStrides sa{}, sb{};
  const size_t oa = rank - a->shape.size(), ob = rank - b->shape.size();
  int64_t step_a = 1, step_b = 1;
  for (size_t d = rank; d-- > 0;) {
    const int64_t da = d >= oa ? a->shape[d - oa] : 1, db = d >= ob ? b->shape[d - ob] : 1;
    HF2PTE_CHECK_OR_RETURN(da == db || da == 1 || db == 1, kInvalidArgument,
                           "shapes [{}] and [{}] do not broadcast", fmt::join(a->shape, ", "),
                           fmt::join(b->shape, ", "));
    out[d] = da == 1 ? db : da;
    if (da != 1) sa[d] = step_a;
    if (db != 1) sb[d] = step_b;
    step_a *= da;
    step_b *= db;
  }
  HF2PTE_ASSIGN_OR_RETURN(XValue * y, output(p.output, out));
  const bool om = p.kind != BinaryKind::kMin && p.kind != BinaryKind::kMax;
  auto finish = [&](float r) { return om ? clamp_om(n, r) : r; };
  const bool all_f32 = a->dtype == XDtype::kFp32 && b->dtype == XDtype::kFp32 && y->dtype == XDtype::kFp32;
  if (all_f32 && binary_f32_fast(p.kind, out, *a, sa, *b, sb, static_cast<float*>(y->data))) {
    if (om && (std::isfinite(n.out_min) || std::isfinite(n.out_max))) {
      float* py = static_cast<float*>(y->data);
      for (int64_t i = 0, e = numel(out); i < e; ++i) py[i] = clamp_om(n, py[i]);
    }
    return Status::ok();
  }
  for_each_index(out, [&](int64_t i, const int64_t* idx) {
    int64_t ia = 0, ib = 0;
    for (size_t d = 0; d < rank; ++d) {
      ia += idx[d] * sa[d];
      ib += idx[d] * sb[d];
    }
    store(*y, size_t(i), finish(apply_binary(p.kind, load(*a, size_t(ia)), load(*b, size_t(ib)))));
  });
  return Status::ok();
}

Status Runner::exec(const XNode& n, const FullyConnectedParams& p) {
  HF2PTE_ASSIGN_OR_RETURN(XValue * x, input(p.input));
  HF2PTE_CHECK_OR_RETURN(!x->shape.empty() && x->shape.back() == p.k, kInvalidArgument,
                         "input [{}] does not end in the filter's input size {}", fmt::join(x->shape, ", "), p.k);
  Shape out_shape = x->shape;
  out_shape.back() = p.n;
  HF2PTE_ASSIGN_OR_RETURN(XValue * y, output(p.output, out_shape));
  const int64_t rows = numel(x->shape) / std::max<int64_t>(p.k, 1);
  if (!p.quantized) {
    float* outp = static_cast<float*>(y->data);
    if (rows * p.n == 0) return Status::ok();
    if (p.k == 0) {
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < p.n; ++j) outp[r * p.n + j] = p.bias_f.empty() ? 0.0f : p.bias_f[size_t(j)];
      }
    } else {
      const float* in = static_cast<const float*>(x->data);
      const float* bias = p.bias_f.empty() ? nullptr : p.bias_f.data();
      if (p.qfilter != nullptr && p.dynamic) {
        // One quantization row = the trailing quant_dims dims (a multiple of k).
        const size_t nb = std::min(x->shape.size(), size_t(std::max(p.quant_dims, 1)));
        int64_t quant_row = 1;
        for (size_t d = x->shape.size() - nb; d < x->shape.size(); ++d) quant_row *= x->shape[d];
        kernels::qgemm_dynamic(rows, in, quant_row, *p.qfilter, bias, outp);
      } else if (p.qfilter != nullptr) {
        kernels::qgemm_weight_only(rows, in, *p.qfilter, bias, outp);
      } else if (p.weights_nk_f16 != nullptr) {
        kernels::gemm_f32_f16nt(rows, p.n, p.k, in, p.weights_nk_f16, outp, bias);
      } else if (p.weights_kn_f16 != nullptr) {
        kernels::gemm_f32_h16(ScalarType::kHalf, rows, p.n, p.k, in, p.weights_kn_f16, outp, bias);
      } else if (p.weights_kn != nullptr) {
        kernels::gemm_f32(rows, p.n, p.k, 1.0f, in, p.weights_kn, 0.0f, outp, bias);
      } else {
        kernels::gemm_f32_nt(rows, p.n, p.k, in, p.weights_nk != nullptr ? p.weights_nk : p.weights.data(), outp, bias);
      }
    }
    if (std::isfinite(n.out_min) || std::isfinite(n.out_max)) {
      for (int64_t i = 0, e = rows * p.n; i < e; ++i) outp[i] = clamp_om(n, outp[i]);
    }
    return Status::ok();
  }
  // Static int8: int32 accumulation of (x - x_zp)(w - w_zp) + bias, then
  // fp32 requantization with round-to-nearest-even (XNNPACK's qs8 "fp32" path).
  const int8_t* in = static_cast<const int8_t*>(x->data);
  int8_t* outp = static_cast<int8_t*>(y->data);
  const float lo = std::isfinite(n.out_min) ? std::max(-128.0f, std::nearbyint(n.out_min / y->scale) + float(y->zero_point))
                                            : -128.0f;
  const float hi = std::isfinite(n.out_max) ? std::min(127.0f, std::nearbyint(n.out_max / y->scale) + float(y->zero_point))
                                            : 127.0f;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < p.n; ++j) {
      int32_t acc = p.bias_q.empty() ? 0 : p.bias_q[size_t(j)];
      const int8_t* wr = p.weights_q.data() + j * p.k;
      for (int64_t i = 0; i < p.k; ++i) {
        acc += (int32_t(in[r * p.k + i]) - x->zero_point) * (int32_t(wr[i]) - p.weight_zero_point);
      }
      const float q = std::nearbyint(float(acc) * p.requant[size_t(j)]) + float(y->zero_point);
      outp[r * p.n + j] = int8_t(std::clamp(q, lo, hi));
    }
  }
  return Status::ok();
}

Status Runner::exec(const XNode&, const BatchMatMulParams& p) {
  HF2PTE_ASSIGN_OR_RETURN(XValue * a, input(p.input1));
  HF2PTE_ASSIGN_OR_RETURN(XValue * b, input(p.input2));
  HF2PTE_CHECK_OR_RETURN(a->shape.size() >= 2 && b->shape.size() >= 2, kInvalidArgument,
                         "batch matmul operands need rank >= 2, got {} and {}", a->shape.size(), b->shape.size());
  const int64_t m = a->shape[a->shape.size() - 2], k = a->shape.back();
  const int64_t kb = p.transpose_b ? b->shape.back() : b->shape[b->shape.size() - 2];
  const int64_t nn = p.transpose_b ? b->shape[b->shape.size() - 2] : b->shape.back();
  HF2PTE_CHECK_OR_RETURN(k == kb, kInvalidArgument, "batch matmul inner dims differ: {} vs {}", k, kb);
  const Shape ba(a->shape.begin(), a->shape.end() - 2), bb(b->shape.begin(), b->shape.end() - 2);
  const size_t rank = std::max(ba.size(), bb.size());
  Shape batch(rank), sa(rank, 0), sb(rank, 0);
  const Shape ta = strides_of(ba), tb = strides_of(bb);
  for (size_t d = 0; d < rank; ++d) {
    const size_t oa = rank - ba.size(), ob = rank - bb.size();
    const int64_t da = d >= oa ? ba[d - oa] : 1, db = d >= ob ? bb[d - ob] : 1;
    HF2PTE_CHECK_OR_RETURN(da == db || da == 1 || db == 1, kInvalidArgument, "batch dims do not broadcast");
    batch[d] = da == 1 ? db : da;
    if (d >= oa && da != 1) sa[d] = ta[d - oa];
    if (d >= ob && db != 1) sb[d] = tb[d - ob];
  }
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(nn);
  HF2PTE_ASSIGN_OR_RETURN(XValue * y, output(p.output, out_shape));
  const float* pa = static_cast<const float*>(a->data);
  const float* pb = static_cast<const float*>(b->data);
  float* py = static_cast<float*>(y->data);
  // B's batches: contiguous, or apart by the stride of the view it is bound to.
  const int64_t b_batch = b->batch_stride != 0 ? b->batch_stride : k * nn;
  if (ba == bb && k > 0) {  // no broadcasting: the batched GEMM of the optimized kernels
    kernels::batched_gemm_f32(numel(batch), m, nn, k, pa, pb, p.transpose_b, py, b_batch);
    return Status::ok();
  }
  for_each_index(batch, [&](int64_t bi, const int64_t* idx) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d < rank; ++d) {
      oa += idx[d] * sa[d];
      ob += idx[d] * sb[d];
    }
    const float* A = pa + oa * m * k;
    const float* B = pb + ob * b_batch;
    float* Y = py + bi * m * nn;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < nn; ++j) {
        float acc = 0.0f;
        for (int64_t t = 0; t < k; ++t) acc += A[i * k + t] * (p.transpose_b ? B[j * k + t] : B[t * nn + j]);
        Y[i * nn + j] = acc;
      }
    }
  });
  return Status::ok();
}

Status Runner::exec(const XNode&, const SoftmaxParams& p) {
  HF2PTE_ASSIGN_OR_RETURN(XValue * x, input(p.input));
  HF2PTE_ASSIGN_OR_RETURN(XValue * y, output(p.output, x->shape));
  const int64_t inner = x->shape.empty() ? 1 : x->shape.back();
  if (inner == 0) return Status::ok();
  kernels::softmax_rows_f32(static_cast<const float*>(x->data), static_cast<float*>(y->data), numel(x->shape) / inner,
                            inner);
  return Status::ok();
}

/// Copies `src` (shape `in`, contiguous) into `dst` through an index map:
/// element `idx` of the output reads input offset `map(idx)`.
template <typename Map>
void gather_bytes(void* dst, const void* src, size_t esize, const Shape& out, Map&& map) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  for_each_index(out, [&](int64_t i, const int64_t* idx) {
    std::memcpy(d + size_t(i) * esize, s + size_t(map(idx)) * esize, esize);
  });
}

/// The same permutation over fewer dims: size-1 dims dropped and input dims
/// that stay adjacent and in order in the output merged, so NCHW <-> NHWC
/// ([N, C, H, W] with [0, 2, 3, 1]) becomes the batched 2-D transpose
/// [N, C, HW] with [0, 2, 1] that kernels::permute_4byte runs fast.
void collapse_permutation(const Shape& shape, const std::vector<uint32_t>& perm, Shape& cshape, Shape& cperm) {
  std::vector<int64_t> order;  // output order of the input dims that are not 1
  for (uint32_t d : perm) if (shape[d] != 1) order.push_back(d);
  // Runs of consecutive input dims: each becomes one dim.
  std::vector<std::pair<int64_t, int64_t>> runs;  // (first input dim, size), in output order
  for (size_t k = 0; k < order.size(); ++k) {
    if (k > 0 && order[k] == order[k - 1] + 1) {
      runs.back().second *= shape[size_t(order[k])];
      continue;
    }
    runs.push_back({order[k], shape[size_t(order[k])]});
  }
  std::vector<size_t> by_input(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) by_input[i] = i;
  std::sort(by_input.begin(), by_input.end(), [&](size_t a, size_t b) { return runs[a].first < runs[b].first; });
  cshape.assign(runs.size(), 1);
  cperm.assign(runs.size(), 0);
  std::vector<int64_t> input_pos(runs.size());
  for (size_t i = 0; i < by_input.size(); ++i) {
    cshape[i] = runs[by_input[i]].second;
    input_pos[by_input[i]] = int64_t(i);
  }
  for (size_t k = 0; k < runs.size(); ++k) cperm[k] = input_pos[k];
}

Status Runner::exec(const XNode&, const TransposeParams& p) {
  HF2PTE_ASSIGN_OR_RETURN(XValue * x, input(p.input));
  HF2PTE_CHECK_OR_RETURN(p.perm.size() == x->shape.size(), kInvalidArgument, "perm has {} entries for rank {}",
                         p.perm.size(), x->shape.size());
  Shape out(x->shape.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = x->shape[p.perm[i]];
  HF2PTE_ASSIGN_OR_RETURN(XValue * y, output(p.output, out));
  if (xdtype_size(x->dtype) == 4) {
    Shape cshape, cperm;
    collapse_permutation(x->shape, p.perm, cshape, cperm);
    if (cshape.size() <= 1) {
      std::memcpy(y->data, x->data, size_t(numel(x->shape)) * 4);
      return Status::ok();
    }
    if (kernels::permute_4byte(x->data, y->data, cshape, cperm)) return Status::ok();
  }
  const Shape st = strides_of(x->shape);
  gather_bytes(y->data, x->data, xdtype_size(x->dtype), out, [&](const int64_t* idx) {
    int64_t off = 0;
    for (size_t i = 0; i < out.size(); ++i) off += idx[i] * st[p.perm[i]];
    return off;
  });
  return Status::ok();
}

Status Runner::exec(const XNode& n, const ReshapeParams& p) {
  HF2PTE_ASSIGN_OR_RETURN(XValue * x, input(p.input));
  HF2PTE_ASSIGN_OR_RETURN(Shape out, reshaped(x->shape, p.new_shape));
  const int64_t count = numel(x->shape);
  XValue& yv = g_.values[p.output];
  if (p.forwarded) {
    // The producer already wrote the output (Runner::output bound it).
    yv.shape = std::move(out);
    ready_[p.output] = 1;
    return Status::ok();
  }
  if (is_view(g_, n)) {
    // Values are written once per run and no node writes its inputs, so an
    // internal reshape just views its input's storage (no copy).
    yv.shape = std::move(out);
    yv.data = x->data;
    ready_[p.output] = 1;
    return Status::ok();
  }
  HF2PTE_ASSIGN_OR_RETURN(XValue * y, output(p.output, out));
  std::memmove(y->data, x->data, size_t(count) * xdtype_size(x->dtype));
  return Status::ok();
}

Status Runner::exec(const XNode&, const SliceParams& p) {
  HF2PTE_ASSIGN_OR_RETURN(XValue * x, input(p.input));
  HF2PTE_CHECK_OR_RETURN(p.offsets.size() == x->shape.size(), kInvalidArgument,
                         "slice has {} offsets for rank {}", p.offsets.size(), x->shape.size());
  Shape out(x->shape.size());
  for (size_t d = 0; d < out.size(); ++d) {
    const int64_t off = p.offsets[d], dim = x->shape[d];
    // Size 0 means "to the end" (the v1 slice API, §7).
    const int64_t size = p.sizes[d] == 0 ? dim - off : int64_t(p.sizes[d]);
    HF2PTE_CHECK_OR_RETURN(off <= dim && size >= 0 && off + size <= dim, kInvalidArgument,
                           "slice [{}, +{}) exceeds dim {} of size {}", off, size, d, dim);
    out[d] = size;
  }
  HF2PTE_ASSIGN_OR_RETURN(XValue * y, output(p.output, out));
  if (numel(out) == 0) return Status::ok();
  // One memcpy per contiguous run: the sliced dim farthest in, together with
  // the whole dims after it (RoPE's halves of every head: runs of head_dim / 2).
  const Shape st = strides_of(x->shape);
  size_t last = out.size();
  while (last > 0 && out[last - 1] == x->shape[last - 1]) --last;
  const size_t esize = xdtype_size(x->dtype);
  const size_t run_dim = last == 0 ? 0 : last - 1;
  const int64_t run = out.empty() ? 1 : out[run_dim] * st[run_dim];  // elements
  const Shape outer(out.begin(), out.begin() + int64_t(run_dim));
  auto* dst = static_cast<uint8_t*>(y->data);
  const auto* src = static_cast<const uint8_t*>(x->data);
  for_each_index(outer, [&](int64_t i, const int64_t* idx) {
    int64_t off = out.empty() ? 0 : int64_t(p.offsets[run_dim]) * st[run_dim];
    for (size_t d = 0; d < run_dim; ++d) off += (idx[d] + int64_t(p.offsets[d])) * st[d];
    std::memcpy(dst + size_t(i * run) * esize, src + size_t(off) * esize, size_t(run) * esize);
  });
  return Status::ok();
}

Status Runner::exec(const XNode&, const ConcatParams& p) {
  std::vector<XValue*> ins;
  for (uint32_t vi : p.inputs) {
    HF2PTE_ASSIGN_OR_RETURN(XValue * v, input(vi));
    ins.push_back(v);
  }
  const Shape& first = ins[0]->shape;
  HF2PTE_CHECK_OR_RETURN(p.axis < first.size(), kInvalidArgument, "concat axis {} for rank {}", p.axis, first.size());
  Shape out = first;
  out[p.axis] = 0;
  for (XValue* v : ins) {
    HF2PTE_CHECK_OR_RETURN(v->shape.size() == first.size(), kInvalidArgument, "concat inputs differ in rank");
    for (size_t d = 0; d < first.size(); ++d) {
      HF2PTE_CHECK_OR_RETURN(d == p.axis || v->shape[d] == first[d], kInvalidArgument,
                             "concat inputs [{}] and [{}] differ off the axis", fmt::join(first, ", "),
                             fmt::join(v->shape, ", "));
    }
    out[p.axis] += v->shape[p.axis];
  }
  HF2PTE_ASSIGN_OR_RETURN(XValue * y, output(p.output, out));
  const size_t esize = xdtype_size(y->dtype);
  int64_t outer = 1;
  for (size_t d = 0; d < p.axis; ++d) outer *= out[d];
  const int64_t out_block = numel(out) / std::max<int64_t>(outer, 1);
  auto* dst = static_cast<uint8_t*>(y->data);
  int64_t col = 0;
  for (XValue* v : ins) {
    const int64_t block = numel(v->shape) / std::max<int64_t>(outer, 1);
    const auto* src = static_cast<const uint8_t*>(v->data);
    for (int64_t o = 0; o < outer && block > 0; ++o) {
      std::memcpy(dst + size_t(o * out_block + col) * esize, src + size_t(o * block) * esize, size_t(block) * esize);
    }
    col += block;
  }
  return Status::ok();
}

Status Runner::exec(const XNode&, const PadParams& p) {
  HF2PTE_ASSIGN_OR_RETURN(XValue * x, input(p.input));
  HF2PTE_CHECK_OR_RETURN(p.pre.size() <= x->shape.size(), kInvalidArgument, "{} paddings for rank {}",
                         p.pre.size(), x->shape.size());
  Shape out = x->shape, pre(x->shape.size(), 0);
  for (size_t d = 0; d < p.pre.size(); ++d) {
    pre[d] = p.pre[d];
    out[d] += int64_t(p.pre[d]) + int64_t(p.post[d]);
  }
  HF2PTE_ASSIGN_OR_RETURN(XValue * y, output(p.output, out));
  // fp32 or fp16 (Compiler::add_movement): the padding value in the output's encoding.
  const size_t esize = xdtype_size(y->dtype);
  uint8_t fill[4];
  if (esize == 2) {
    const uint16_t h = float_to_half(p.value);
    std::memcpy(fill, &h, 2);
  } else {
    std::memcpy(fill, &p.value, 4);
  }
  auto* py = static_cast<uint8_t*>(y->data);
  const int64_t total = numel(out);
  for (int64_t i = 0; i < total; ++i) std::memcpy(py + size_t(i) * esize, fill, esize);
  const Shape so = strides_of(out);
  const auto* px = static_cast<const uint8_t*>(x->data);
  for_each_index(x->shape, [&](int64_t i, const int64_t* idx) {
    int64_t off = 0;
    for (size_t d = 0; d < out.size(); ++d) off += (idx[d] + pre[d]) * so[d];
    std::memcpy(py + size_t(off) * esize, px + size_t(i) * esize, esize);
  });
  return Status::ok();
}

Result<kernels::Window2d> Runner::window_over(const XValue& x, const WindowParams& p) {
  HF2PTE_CHECK_OR_RETURN(x.shape.size() == 4, kInvalidArgument, "input [{}] is not 4-D NHWC", fmt::join(x.shape, ", "));
  kernels::Window2d w = p.window;
  w.n = x.shape[0];
  w.ih = x.shape[1];
  w.iw = x.shape[2];
  w.oh = kernels::window_output_size(w.ih, w.pad_top, p.pad_bottom, w.kernel_h, w.stride_h, w.dilation_h);
  w.ow = kernels::window_output_size(w.iw, w.pad_left, p.pad_right, w.kernel_w, w.stride_w, w.dilation_w);
  HF2PTE_CHECK_OR_RETURN(w.oh > 0 && w.ow > 0, kInvalidArgument, "window {}x{} does not fit the padded input [{}]",
                         w.kernel_h, w.kernel_w, fmt::join(x.shape, ", "));
  return w;
}

Status Runner::exec(const XNode& n, const ConvParams& p) {
  HF2PTE_ASSIGN_OR_RETURN(XValue * x, input(p.input));
  HF2PTE_ASSIGN_OR_RETURN(kernels::Window2d w, window_over(*x, p.win));
  const int64_t cin = p.groups * p.cin_g, cout = p.groups * p.cout_g;
  HF2PTE_CHECK_OR_RETURN(x->shape[3] == cin, kInvalidArgument, "input [{}] has {} channels; the filter takes {}",
                         fmt::join(x->shape, ", "), x->shape[3], cin);
  const Shape out_shape{w.n, w.oh, w.ow, cout};
  const float* residual = nullptr;
  if (p.residual != kInvalidId) {
    HF2PTE_ASSIGN_OR_RETURN(XValue * r, input(p.residual));
    HF2PTE_CHECK_OR_RETURN(r->shape == out_shape, kInvalidArgument, "residual [{}] differs from the conv output [{}]",
                           fmt::join(r->shape, ", "), fmt::join(out_shape, ", "));
    residual = static_cast<const float*>(r->data);
  }
  HF2PTE_ASSIGN_OR_RETURN(XValue * y, output(p.output, out_shape));
  const auto* in = static_cast<const float*>(x->data);
  auto* out = static_cast<float*>(y->data);
  if (p.depthwise) {
    kernels::depthwise_conv2d_nhwc_f32(w, cin, p.cout_g, in, p.weights, p.bias_f, n.out_min, n.out_max, out);
  } else if (p.winograd != nullptr && kernels::winograd_pays(w, cin)) {
    kernels::conv2d_3x3_winograd_nhwc_f32(w, *p.winograd, in, p.bias_f, residual, n.out_min, n.out_max, out);
  } else if (p.packed != nullptr) {
    kernels::conv2d_packed_nhwc_f32(w, *p.packed, in, residual, n.out_min, n.out_max, out);
  } else {
    kernels::conv2d_nhwc_f32(w, p.groups, p.cin_g, p.cout_g, in, p.weights, p.bias_f, residual, n.out_min, n.out_max,
                             out);
  }
  return Status::ok();
}

Status Runner::exec(const XNode& n, const PoolParams& p) {
  HF2PTE_ASSIGN_OR_RETURN(XValue * x, input(p.input));
  HF2PTE_ASSIGN_OR_RETURN(kernels::Window2d w, window_over(*x, p.win));
  HF2PTE_ASSIGN_OR_RETURN(XValue * y, output(p.output, Shape{w.n, w.oh, w.ow, x->shape[3]}));
  kernels::max_pool2d_nhwc_f32(w, x->shape[3], static_cast<const float*>(x->data), n.out_min, n.out_max,
                               static_cast<float*>(y->data));
  return Status::ok();
}

Status Runner::exec(const XNode& n, const GlobalPoolParams& p) {
  HF2PTE_ASSIGN_OR_RETURN(XValue * x, input(p.input));
  HF2PTE_CHECK_OR_RETURN(x->shape.size() == 4, kInvalidArgument, "input [{}] is not 4-D NHWC", fmt::join(x->shape, ", "));
  const int64_t c = x->shape[3];
  HF2PTE_ASSIGN_OR_RETURN(XValue * y, output(p.output, Shape{x->shape[0], 1, 1, c}));
  kernels::global_avg_pool_nhwc_f32(x->shape[0], x->shape[1] * x->shape[2], c, static_cast<const float*>(x->data),
                                    n.out_min, n.out_max, static_cast<float*>(y->data));
  return Status::ok();
}

}  // namespace

Status run_graph(XnnGraph& g, OutputBinder& binder) { return Runner(g, binder).run(); }

void set_node_time_sink(NodeTimeSink* sink) { g_node_time_sink.store(sink); }

}  // namespace hf2pte::xnn
