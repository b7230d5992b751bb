// The CUDA device executor against the CPU reference executor (portable
// kernels): every op of kCudaOps runs in a small hand-built program on both,
// and the outputs must agree (f32 to 1e-5, bf16 to about one ulp). Without a
// usable device every test is skipped with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/runtime/cuda_program.h"
#include "backends/cuda/runtime/device.h"
#include "backends/cuda/runtime/reference_executor.h"
#include "backends/cuda/schema/op_set.h"
#include "core/half.h"
#include "kernels/portable/kernels.h"
#include "runtime/evalue.h"
#include "runtime/tensor.h"

namespace hf2pte::cuda {
namespace {

#define SKIP_WITHOUT_DEVICE()                                 \
  do {                                                        \
    const std::string reason_ = device_unavailable_reason(); \
    if (!reason_.empty()) GTEST_SKIP() << reason_;            \
  } while (0)

using ST = ScalarType;

// ---------------------------------------------------------------------------
// Host data.

struct HostData {
  ST dtype = ST::kFloat;
  std::vector<int64_t> sizes;
  std::vector<uint8_t> bytes;
};

int64_t numel_of(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

HostData make(ST dt, std::vector<int64_t> sizes, const std::vector<double>& values) {
  HostData d{dt, std::move(sizes), {}};
  const size_t es = element_size(dt);
  d.bytes.resize(values.size() * es);
  for (size_t i = 0; i < values.size(); ++i) {
    uint8_t* p = d.bytes.data() + i * es;
    const double v = values[i];
    switch (dt) {
      case ST::kFloat: { const float f = float(v); std::memcpy(p, &f, 4); break; }
      case ST::kBFloat16: { const uint16_t h = float_to_bf16(float(v)); std::memcpy(p, &h, 2); break; }
      case ST::kHalf: { const uint16_t h = float_to_half(float(v)); std::memcpy(p, &h, 2); break; }
      case ST::kLong: { const int64_t x = int64_t(v); std::memcpy(p, &x, 8); break; }
      case ST::kInt: { const int32_t x = int32_t(v); std::memcpy(p, &x, 4); break; }
      case ST::kBool: *p = v != 0 ? 1 : 0; break;
      case ST::kChar: { const int8_t x = int8_t(v); std::memcpy(p, &x, 1); break; }
      case ST::kByte: *p = uint8_t(v); break;
      case ST::kDouble: std::memcpy(p, &v, 8); break;
      default: ADD_FAILURE() << "test helper: unsupported dtype"; break;
    }
  }
  return d;
}

std::vector<double> values_of(const HostData& d) {
  const size_t es = element_size(d.dtype);
  const size_t n = es ? d.bytes.size() / es : 0;
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = d.bytes.data() + i * es;
    switch (d.dtype) {
      case ST::kFloat: { float f; std::memcpy(&f, p, 4); out[i] = f; break; }
      case ST::kBFloat16: { uint16_t h; std::memcpy(&h, p, 2); out[i] = bf16_to_float(h); break; }
      case ST::kHalf: { uint16_t h; std::memcpy(&h, p, 2); out[i] = half_to_float(h); break; }
      case ST::kLong: { int64_t x; std::memcpy(&x, p, 8); out[i] = double(x); break; }
      case ST::kInt: { int32_t x; std::memcpy(&x, p, 4); out[i] = x; break; }
      case ST::kBool: out[i] = *p != 0; break;
      case ST::kChar: out[i] = double(int8_t(*p)); break;
      case ST::kByte: out[i] = double(*p); break;
      case ST::kDouble: std::memcpy(&out[i], p, 8); break;
      default: break;
    }
  }
  return out;
}

/// Uniform values in [lo, hi); integers and bools are rounded down from that.
HostData random_data(ST dt, std::vector<int64_t> sizes, uint32_t seed, double lo = -2, double hi = 2) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(size_t(numel_of(sizes)));
  const bool integral = dt == ST::kLong || dt == ST::kInt || dt == ST::kBool || dt == ST::kChar || dt == ST::kByte;
  for (double& x : v) x = integral ? std::floor(dist(gen)) : dist(gen);
  return make(dt, std::move(sizes), v);
}

/// Values drawn from a few levels, so comparisons see ties.
HostData level_data(ST dt, std::vector<int64_t> sizes, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(-2, 2);
  std::vector<double> v(size_t(numel_of(sizes)));
  for (double& x : v) x = dist(gen) * 0.5;
  return make(dt, std::move(sizes), v);
}

struct Tol {
  double rtol = 1e-5;
  double atol = 1e-6;
  bool atol_scaled = false;  ///< atol is relative to the largest |reference| value
};
constexpr Tol kF32{1e-5, 1e-6, false};
constexpr Tol kBf16{1e-2, 1e-3, false};
constexpr Tol kExact{0, 0, false};

void expect_close(const HostData& got, const HostData& want, const Tol& tol, const std::string& what) {
  ASSERT_EQ(int(got.dtype), int(want.dtype)) << what;
  ASSERT_EQ(got.sizes, want.sizes) << what;
  const auto g = values_of(got), w = values_of(want);
  ASSERT_EQ(g.size(), w.size()) << what;
  double scale = 0;
  for (double x : w) scale = std::max(scale, std::isfinite(x) ? std::abs(x) : 0.0);
  const double atol = tol.atol_scaled ? tol.atol * scale : tol.atol;
  int reported = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) && std::isnan(w[i])) continue;
    if (g[i] == w[i]) continue;
    if (std::abs(g[i] - w[i]) <= atol + tol.rtol * std::abs(w[i])) continue;
    if (reported++ < 5) ADD_FAILURE() << what << ": element " << i << " is " << g[i] << "; expected " << w[i];
  }
  EXPECT_EQ(reported, 0) << what << ": " << reported << " of " << g.size() << " elements differ";
}

// ---------------------------------------------------------------------------
// Hand-built programs.

class ProgramBuilder {
 public:
  uint32_t c(int64_t v) {
    Expr e;
    e.kind = ExprKind::kConst;
    e.value = v;
    p_.exprs.push_back(e);
    return uint32_t(p_.exprs.size() - 1);
  }
  /// A dim read from input `input`, axis `axis`; returns its expr.
  uint32_t dim(const std::string& name, int64_t lo, int64_t hi, uint32_t input, uint32_t axis) {
    p_.dims.push_back({name, lo, hi, input, axis});
    Expr e;
    e.kind = ExprKind::kDim;
    e.value = int64_t(p_.dims.size() - 1);
    p_.exprs.push_back(e);
    return uint32_t(p_.exprs.size() - 1);
  }

  uint32_t tensor(ST dt, const std::vector<int64_t>& sizes, TensorRole role) {
    std::vector<uint32_t> exprs;
    for (int64_t s : sizes) exprs.push_back(c(s));
    return tensor_dyn(dt, exprs, sizes, role);
  }
  /// A tensor whose sizes are exprs, bounded by `max_sizes`.
  uint32_t tensor_dyn(ST dt, const std::vector<uint32_t>& exprs, const std::vector<int64_t>& max_sizes,
                      TensorRole role) {
    TensorInfo ti;
    ti.dtype = dt;
    ti.sizes = exprs;
    ti.max_sizes = max_sizes;
    ti.role = role;
    ti.capacity_bytes = uint64_t(numel_of(max_sizes)) * element_size(dt);
    const uint32_t t = uint32_t(p_.tensors.size());
    if (role == TensorRole::kInput || role == TensorRole::kState) {
      ti.io_index = p_.num_inputs++;
      p_.input_tensor.push_back(t);
    } else if (role == TensorRole::kOutput) {
      ti.io_index = p_.num_outputs++;
      p_.output_tensor.push_back(t);
    } else if (role == TensorRole::kIntermediate) {
      ti.arena_offset = (p_.arena_bytes + 255) / 256 * 256;
      p_.arena_bytes = ti.arena_offset + ti.capacity_bytes;
    }
    p_.tensors.push_back(std::move(ti));
    return t;
  }
  uint32_t constant(const HostData& d) {
    const uint32_t t = tensor(d.dtype, d.sizes, TensorRole::kConstant);
    const std::string key = "const" + std::to_string(t);
    p_.tensors[t].key = key;
    (*consts_)[key] = d.bytes;
    return t;
  }

  uint32_t value(ValueInfo v) {
    p_.values.push_back(std::move(v));
    return uint32_t(p_.values.size() - 1);
  }
  uint32_t v_tensor(uint32_t t) {
    ValueInfo v;
    v.kind = ValueKind::kTensor;
    v.tensor = t;
    return value(v);
  }
  uint32_t v_int(int64_t x) {
    ValueInfo v;
    v.kind = ValueKind::kInt;
    v.exprs = {c(x)};
    return value(v);
  }
  uint32_t v_double(double x) {
    ValueInfo v;
    v.kind = ValueKind::kDouble;
    v.f = x;
    return value(v);
  }
  uint32_t v_bool(bool x) {
    ValueInfo v;
    v.kind = ValueKind::kBool;
    v.b = x;
    return value(v);
  }
  uint32_t v_ints(const std::vector<int64_t>& xs) {
    ValueInfo v;
    v.kind = ValueKind::kIntList;
    for (int64_t x : xs) v.exprs.push_back(c(x));
    return value(v);
  }
  uint32_t v_list(const std::vector<int32_t>& tensors, bool optional) {
    ValueInfo v;
    v.kind = optional ? ValueKind::kOptTensorList : ValueKind::kTensorList;
    v.tensors = tensors;
    return value(v);
  }
  uint32_t v_none() { return value(ValueInfo{}); }
  uint32_t v_dtype(ST t) {
    ValueInfo v;
    v.kind = ValueKind::kScalarType;
    v.scalar_type = t;
    return value(v);
  }

  void node(OpId op, std::vector<uint32_t> args, std::string name = "") {
    p_.nodes.push_back({op, std::move(args), name.empty() ? "node" + std::to_string(p_.nodes.size()) : name});
  }

  std::shared_ptr<const CudaProgram> program() const { return std::make_shared<const CudaProgram>(p_); }
  ConstantLookup lookup() const {
    auto consts = consts_;
    return [consts](std::string_view key) -> Result<std::span<const uint8_t>> {
      auto it = consts->find(std::string(key));
      if (it == consts->end()) return Status(ErrorCode::kNotFound, "no constant " + std::string(key));
      return std::span<const uint8_t>(it->second);
    };
  }
 private:
  CudaProgram p_;
  std::shared_ptr<std::map<std::string, std::vector<uint8_t>>> consts_ =
      std::make_shared<std::map<std::string, std::vector<uint8_t>>>();
};

/// Runs one call of `ex` with `inputs` (their bytes are passed in place, so a
/// state input mutated on the CPU is updated here); returns the outputs.
template <typename Executor>
Result<std::vector<HostData>> run_once(Executor& ex, const CudaProgram& p, std::vector<HostData>& inputs) {
  std::vector<std::unique_ptr<rt::Tensor>> tensors;
  std::vector<rt::EValue> evs(inputs.size() + p.num_outputs);
  std::vector<rt::EValue*> args;
  std::vector<std::vector<uint8_t>> out_bytes(p.num_outputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    tensors.push_back(std::make_unique<rt::Tensor>(inputs[i].dtype, inputs[i].sizes, std::vector<uint8_t>{},
                                                   inputs[i].bytes.data(), inputs[i].bytes.size(),
                                                   rt::ShapeDynamism::kDynamicBound));
  }
  for (uint32_t j = 0; j < p.num_outputs; ++j) {
    const TensorInfo& ti = p.tensors[p.output_tensor[j]];
    out_bytes[j].assign(std::max<size_t>(ti.capacity_bytes, 1), 0xAB);  // garbage: every byte must be written
    tensors.push_back(std::make_unique<rt::Tensor>(ti.dtype, ti.max_sizes, std::vector<uint8_t>{},
                                                   out_bytes[j].data(), ti.capacity_bytes,
                                                   rt::ShapeDynamism::kDynamicBound));
  }
  for (size_t k = 0; k < tensors.size(); ++k) {
    evs[k].tag = rt::Tag::kTensor;
    evs[k].tensor = tensors[k].get();
    args.push_back(&evs[k]);
  }
  HF2PTE_RETURN_IF_ERROR(ex.execute(args));
  std::vector<HostData> outs;
  for (uint32_t j = 0; j < p.num_outputs; ++j) {
    const rt::Tensor& t = *tensors[inputs.size() + j];
    HostData d{t.dtype(), std::vector<int64_t>(t.sizes().begin(), t.sizes().end()), {}};
    d.bytes.assign(out_bytes[j].begin(), out_bytes[j].begin() + ptrdiff_t(t.nbytes()));
    outs.push_back(std::move(d));
  }
  return outs;
}

/// A one-node (or few-node) program under test: inputs, constants, outputs.
struct Case {
  ProgramBuilder b;
  std::vector<HostData> inputs;

  uint32_t in(const HostData& d) {
    inputs.push_back(d);
    return b.v_tensor(b.tensor(d.dtype, d.sizes, TensorRole::kInput));
  }
  uint32_t weight(const HostData& d) { return b.v_tensor(b.constant(d)); }
  uint32_t out(ST dt, const std::vector<int64_t>& sizes) { return b.v_tensor(b.tensor(dt, sizes, TensorRole::kOutput)); }

  /// Runs the program on the device and on the reference and compares every output.
  void check(const Tol& tol) {
    const auto program = b.program();
    const auto lookup = b.lookup();
    auto dev = make_device_executor(program, lookup);
    ASSERT_TRUE(dev.is_ok()) << dev.status().message();
    auto ref = ReferenceExecutor::make(program, lookup, portable_registry());
    ASSERT_TRUE(ref.is_ok()) << ref.status().message();
    auto dev_inputs = inputs, ref_inputs = inputs;
    auto got = run_once(**dev, *program, dev_inputs);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    auto want = run_once(**ref, *program, ref_inputs);
    ASSERT_TRUE(want.is_ok()) << want.status().message();
    ASSERT_EQ(got->size(), want->size());
    for (size_t j = 0; j < got->size(); ++j) expect_close((*got)[j], (*want)[j], tol, "output " + std::to_string(j));
  }
};

// ---------------------------------------------------------------------------
// Elementwise.

TEST(CudaDeviceTest, AddBroadcastBf16WithAlpha) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t x = k.in(random_data(ST::kBFloat16, {2, 3, 4}, 1));
  const uint32_t y = k.in(random_data(ST::kBFloat16, {4}, 2));
  k.b.node(OpId::AddOut, {x, y, k.b.v_int(2), k.out(ST::kBFloat16, {2, 3, 4})});
  k.check(kBf16);
}

TEST(CudaDeviceTest, AddBroadcastBothSidesF32) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t x = k.in(random_data(ST::kFloat, {3, 1}, 3));
  const uint32_t y = k.in(random_data(ST::kFloat, {1, 4}, 4));
  k.b.node(OpId::AddOut, {x, y, k.b.v_double(0.5), k.out(ST::kFloat, {3, 4})});
  k.check(kF32);
}

TEST(CudaDeviceTest, AddBf16AndInt64) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t x = k.in(random_data(ST::kBFloat16, {5, 6}, 5));
  const uint32_t y = k.in(random_data(ST::kLong, {6}, 6, -5, 5));
  k.b.node(OpId::AddOut, {x, y, k.b.v_int(1), k.out(ST::kBFloat16, {5, 6})});
  k.check(kBf16);
}

TEST(CudaDeviceTest, AddAndMulScalar) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t x = k.in(random_data(ST::kBFloat16, {7, 9}, 7));
  k.b.node(OpId::AddScalarOut, {x, k.b.v_double(1.5), k.b.v_int(1), k.out(ST::kBFloat16, {7, 9})});
  const uint32_t y = k.in(random_data(ST::kFloat, {33}, 8));
  k.b.node(OpId::MulScalarOut, {y, k.b.v_int(3), k.out(ST::kFloat, {33})});
  const uint32_t i = k.in(random_data(ST::kLong, {10}, 9, -100, 100));
  k.b.node(OpId::AddScalarOut, {i, k.b.v_int(7), k.b.v_int(2), k.out(ST::kLong, {10})});
  k.check(kBf16);
}

TEST(CudaDeviceTest, SubMulDiv) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t x = k.in(random_data(ST::kFloat, {4, 5}, 10));
  const uint32_t y = k.in(random_data(ST::kFloat, {4, 5}, 11, 0.5, 3));
  k.b.node(OpId::SubOut, {x, y, k.b.v_double(2.0), k.out(ST::kFloat, {4, 5})});
  k.b.node(OpId::MulOut, {x, y, k.out(ST::kFloat, {4, 5})});
  k.b.node(OpId::DivOut, {x, y, k.out(ST::kFloat, {4, 5})});
  const uint32_t xb = k.in(random_data(ST::kBFloat16, {2, 1, 8}, 12));
  const uint32_t yb = k.in(random_data(ST::kBFloat16, {3, 1}, 13));
  k.b.node(OpId::MulOut, {xb, yb, k.out(ST::kBFloat16, {2, 3, 8})});
  k.check(kF32);
}

TEST(CudaDeviceTest, NegFloatAndInt) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t x = k.in(random_data(ST::kBFloat16, {3, 4}, 14));
  k.b.node(OpId::NegOut, {x, k.out(ST::kBFloat16, {3, 4})});
  const uint32_t i = k.in(random_data(ST::kLong, {5}, 15, -50, 50));
  k.b.node(OpId::NegOut, {i, k.out(ST::kLong, {5})});
  k.check(kExact);
}

TEST(CudaDeviceTest, UnaryFloatOps) {
  SKIP_WITHOUT_DEVICE();
  for (ST dt : {ST::kFloat, ST::kBFloat16}) {
    Case k;
    const uint32_t pos = k.in(random_data(dt, {4, 37}, 16, 0.1, 4));
    const uint32_t any = k.in(random_data(dt, {4, 37}, 17, -3, 3));
    k.b.node(OpId::RsqrtOut, {pos, k.out(dt, {4, 37})});
    k.b.node(OpId::SigmoidOut, {any, k.out(dt, {4, 37})});
    k.b.node(OpId::TanhOut, {any, k.out(dt, {4, 37})});
    k.b.node(OpId::ErfOut, {any, k.out(dt, {4, 37})});
    k.b.node(OpId::ExpOut, {any, k.out(dt, {4, 37})});
    k.b.node(OpId::Log1pOut, {pos, k.out(dt, {4, 37})});
    k.check(dt == ST::kFloat ? kF32 : kBf16);
  }
}

TEST(CudaDeviceTest, RsqrtOfInt64GivesFloat) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t x = k.in(random_data(ST::kLong, {6}, 18, 1, 100));
  k.b.node(OpId::RsqrtOut, {x, k.out(ST::kFloat, {6})});
  k.check(kF32);
}

TEST(CudaDeviceTest, ClampMaximumPow) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t x = k.in(random_data(ST::kBFloat16, {5, 8}, 19));
  const uint32_t y = k.in(random_data(ST::kBFloat16, {8}, 20));
  k.b.node(OpId::ClampOut, {x, k.b.v_double(-0.5), k.b.v_double(0.75), k.out(ST::kBFloat16, {5, 8})});
  k.b.node(OpId::ClampOut, {x, k.b.v_none(), k.b.v_int(1), k.out(ST::kBFloat16, {5, 8})});
  k.b.node(OpId::MaximumOut, {x, y, k.out(ST::kBFloat16, {5, 8})});
  k.b.node(OpId::PowTensorScalarOut, {x, k.b.v_double(2.0), k.out(ST::kBFloat16, {5, 8})});
  const uint32_t p = k.in(random_data(ST::kFloat, {9}, 21, 0.1, 5));
  k.b.node(OpId::PowTensorScalarOut, {p, k.b.v_double(0.5), k.out(ST::kFloat, {9})});
  const uint32_t i = k.in(random_data(ST::kLong, {9}, 22, -6, 6));
  k.b.node(OpId::PowTensorScalarOut, {i, k.b.v_int(3), k.out(ST::kLong, {9})});
  k.check(kBf16);
}

TEST(CudaDeviceTest, Comparisons) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t x = k.in(level_data(ST::kBFloat16, {3, 4, 5}, 23));
  const uint32_t y = k.in(level_data(ST::kBFloat16, {4, 1}, 24));
  for (OpId op : {OpId::LeTensorOut, OpId::LtTensorOut, OpId::GtTensorOut, OpId::GeTensorOut, OpId::EqTensorOut}) {
    k.b.node(op, {x, y, k.out(ST::kBool, {3, 4, 5})});
  }
  const uint32_t i = k.in(random_data(ST::kLong, {6}, 25, -3, 3));
  const uint32_t j = k.in(random_data(ST::kLong, {6}, 26, -3, 3));
  k.b.node(OpId::LtTensorOut, {i, j, k.out(ST::kBool, {6})});
  k.check(kExact);
}

TEST(CudaDeviceTest, WhereBroadcast) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t cond = k.in(random_data(ST::kBool, {2, 1, 4}, 27, 0, 2));
  const uint32_t a = k.in(random_data(ST::kBFloat16, {2, 3, 4}, 28));
  const uint32_t b = k.in(random_data(ST::kBFloat16, {4}, 29));
  k.b.node(OpId::WhereSelfOut, {cond, a, b, k.out(ST::kBFloat16, {2, 3, 4})});
  const uint32_t c = k.in(random_data(ST::kFloat, {1}, 30));
  k.b.node(OpId::WhereSelfOut, {cond, a, c, k.out(ST::kFloat, {2, 3, 4})});
  k.check(kExact);
}

// ---------------------------------------------------------------------------
// Reductions and softmax.

TEST(CudaDeviceTest, MeanLastDimKeepdim) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t x = k.in(random_data(ST::kBFloat16, {2, 3, 256}, 31));
  k.b.node(OpId::MeanOut, {x, k.b.v_ints({-1}), k.b.v_bool(true), k.b.v_none(), k.out(ST::kBFloat16, {2, 3, 1})});
  const uint32_t y = k.in(random_data(ST::kFloat, {4, 8}, 32));  // short rows: the generic kernel
  k.b.node(OpId::MeanOut, {y, k.b.v_ints({-1}), k.b.v_bool(true), k.b.v_none(), k.out(ST::kFloat, {4, 1})});
  const uint32_t z = k.in(random_data(ST::kFloat, {3, 4, 100}, 33));
  k.b.node(OpId::MeanOut, {z, k.b.v_none(), k.b.v_bool(false), k.b.v_none(), k.out(ST::kFloat, {})});
  k.check(kBf16);
}

TEST(CudaDeviceTest, SumAndAmax) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t x = k.in(random_data(ST::kFloat, {3, 4, 5}, 34));
  k.b.node(OpId::SumIntListOut, {x, k.b.v_ints({0, 2}), k.b.v_bool(false), k.b.v_none(), k.out(ST::kFloat, {4})});
  const uint32_t i = k.in(random_data(ST::kLong, {4, 6}, 35, -10, 10));
  k.b.node(OpId::SumIntListOut, {i, k.b.v_none(), k.b.v_bool(false), k.b.v_none(), k.out(ST::kLong, {})});
  const uint32_t y = k.in(random_data(ST::kBFloat16, {4, 300}, 36));
  k.b.node(OpId::AmaxOut, {y, k.b.v_ints({-1}), k.b.v_bool(false), k.out(ST::kBFloat16, {4})});
  k.b.node(OpId::AmaxOut, {x, k.b.v_ints({0}), k.b.v_bool(true), k.out(ST::kFloat, {1, 4, 5})});
  k.check(Tol{1e-5, 1e-5, false});  // f32 vs double sums of +-2 values: absolute slack
}

TEST(CudaDeviceTest, SoftmaxLastDimAndInnerDim) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t x = k.in(random_data(ST::kBFloat16, {3, 5, 200}, 37, -8, 8));
  k.b.node(OpId::SoftmaxOut, {x, k.b.v_int(-1), k.b.v_bool(false), k.out(ST::kBFloat16, {3, 5, 200})});
  const uint32_t y = k.in(random_data(ST::kFloat, {2, 7, 3}, 38, -4, 4));
  k.b.node(OpId::SoftmaxOut, {y, k.b.v_int(1), k.b.v_bool(false), k.out(ST::kFloat, {2, 7, 3})});
  const uint32_t z = k.in(random_data(ST::kFloat, {4, 1000}, 39, -20, 20));
  k.b.node(OpId::SoftmaxOut, {z, k.b.v_int(-1), k.b.v_bool(false), k.out(ST::kFloat, {4, 1000})});
  k.check(kBf16);
}

// ---------------------------------------------------------------------------
// Matrix products.

/// mm(x [M, K], W [K, N]) with W a constant, as every linear layer appears.
void check_mm(ST dt, int64_t M, int64_t K, int64_t N, uint32_t seed) {
  Case k;
  const uint32_t x = k.in(random_data(dt, {M, K}, seed));
  const uint32_t w = k.weight(random_data(dt, {K, N}, seed + 1, -0.1, 0.1));
  k.b.node(OpId::MmOut, {x, w, k.out(dt, {M, N})});
  k.check(dt == ST::kFloat ? Tol{1e-4, 1e-5, true} : Tol{1e-2, 1e-2, true});
}

TEST(CudaDeviceTest, MmDecodeGemvBf16) {
  SKIP_WITHOUT_DEVICE();
  check_mm(ST::kBFloat16, 1, 1024, 2048, 40);  // vectorised GEMV, split over K
  check_mm(ST::kBFloat16, 3, 4096, 512, 42);   // M = 3, long K
  check_mm(ST::kBFloat16, 2, 96, 100, 44);     // N not a multiple of 8: scalar GEMV
}

TEST(CudaDeviceTest, MmCublasBf16) {
  SKIP_WITHOUT_DEVICE();
  check_mm(ST::kBFloat16, 64, 256, 512, 46);
  check_mm(ST::kBFloat16, 17, 2048, 96, 48);
}

TEST(CudaDeviceTest, MmF32) {
  SKIP_WITHOUT_DEVICE();
  check_mm(ST::kFloat, 1, 300, 64, 50);
  check_mm(ST::kFloat, 33, 64, 40, 52);
}

TEST(CudaDeviceTest, Addmm) {
  SKIP_WITHOUT_DEVICE();
  for (int64_t M : {2, 32}) {  // GEMV epilogue, cuBLAS with beta
    Case k;
    const uint32_t bias = k.weight(random_data(ST::kBFloat16, {256}, 54));
    const uint32_t x = k.in(random_data(ST::kBFloat16, {M, 128}, 55));
    const uint32_t w = k.weight(random_data(ST::kBFloat16, {128, 256}, 56, -0.2, 0.2));
    k.b.node(OpId::AddmmOut, {bias, x, w, k.b.v_double(0.5), k.b.v_int(2), k.out(ST::kBFloat16, {M, 256})});
    k.check(Tol{1e-2, 1e-2, true});
  }
}

TEST(CudaDeviceTest, Bmm) {
  SKIP_WITHOUT_DEVICE();
  {
    Case k;  // decode attention shape: batched GEMV
    const uint32_t q = k.in(random_data(ST::kBFloat16, {4, 1, 64}, 57));
    const uint32_t kt = k.in(random_data(ST::kBFloat16, {4, 64, 96}, 58));
    k.b.node(OpId::BmmOut, {q, kt, k.out(ST::kBFloat16, {4, 1, 96})});
    k.check(Tol{1e-2, 1e-2, true});
  }
  {
    Case k;  // cuBLAS strided batched
    const uint32_t a = k.in(random_data(ST::kFloat, {3, 8, 16}, 59));
    const uint32_t b = k.in(random_data(ST::kFloat, {3, 16, 12}, 60));
    k.b.node(OpId::BmmOut, {a, b, k.out(ST::kFloat, {3, 8, 12})});
    k.check(Tol{1e-4, 1e-5, true});
  }
}

// ---------------------------------------------------------------------------
// Quantized ops (--qlinear / --qembedding programs): bit-exact except the
// mixed linear's summation order.

TEST(CudaDeviceTest, ChooseQparamsPerToken) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  // Rows: mixed signs, all positive, all zero (scale 0.1), tiny (scale raised to 6.1e-5).
  std::vector<double> v;
  std::mt19937 gen(90);
  std::uniform_real_distribution<double> d(-3, 2);
  for (int i = 0; i < 40; ++i) v.push_back(d(gen));
  for (int i = 0; i < 40; ++i) v.push_back(std::abs(d(gen)));
  for (int i = 0; i < 40; ++i) v.push_back(0.0);
  for (int i = 0; i < 40; ++i) v.push_back(d(gen) * 1e-5);
  const uint32_t x = k.in(make(ST::kFloat, {4, 40}, v));
  k.b.node(OpId::ChooseQparamsPerTokenAsymmetricOut,
           {x, k.b.v_dtype(ST::kChar), k.out(ST::kDouble, {4, 1}), k.out(ST::kLong, {4, 1})});
  k.check(kExact);
}

TEST(CudaDeviceTest, QuantizeAndDequantizePerToken) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t x = k.in(random_data(ST::kFloat, {3, 50}, 91, -4, 3));
  const uint32_t s = k.in(make(ST::kDouble, {3, 1}, {7.0 / 255, 0.02, 1e-3}));  // the last row saturates
  const uint32_t z = k.in(make(ST::kLong, {3, 1}, {18, -3, 0}));
  k.b.node(OpId::QuantizePerTokenOut, {x, s, z, k.b.v_int(-128), k.b.v_int(127), k.b.v_dtype(ST::kChar),
                                       k.out(ST::kChar, {3, 50})});
  const uint32_t q = k.in(random_data(ST::kChar, {3, 50}, 92, -128, 128));
  k.b.node(OpId::DequantizePerTokenOut, {q, s, z, k.b.v_int(-128), k.b.v_int(127), k.b.v_dtype(ST::kChar),
                                         k.b.v_dtype(ST::kFloat), k.out(ST::kFloat, {3, 50})});
  k.check(kExact);
}

TEST(CudaDeviceTest, MixedLinear) {
  SKIP_WITHOUT_DEVICE();
  struct Shape {
    int64_t M, N, K, G;  // G scales per row (1 = per channel)
  };
  // group 32 decode, per-channel prefill rows beyond one warp's 4, an odd K (scalar path)
  for (const Shape sh : {Shape{1, 40, 64, 2}, Shape{6, 33, 128, 1}, Shape{2, 5, 30, 1}}) {
    Case k;
    const uint32_t x = k.in(random_data(ST::kFloat, {sh.M, sh.K}, 93));
    const uint32_t w = k.weight(random_data(ST::kChar, {sh.N, sh.K}, 94, -8, 8));
    const std::vector<int64_t> ssizes = sh.G == 1 ? std::vector<int64_t>{sh.N} : std::vector<int64_t>{sh.N, sh.G};
    const uint32_t sc = k.weight(random_data(ST::kFloat, ssizes, 95, 0.01, 0.2));
    k.b.node(OpId::MixedLinearOut, {x, w, sc, k.b.v_none(), k.b.v_none(), k.out(ST::kFloat, {sh.M, sh.N})});
    k.check(Tol{1e-5, 1e-5, true});
  }
}

TEST(CudaDeviceTest, QuantizedEmbeddings) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t w8 = k.weight(random_data(ST::kChar, {10, 8}, 96, -128, 128));
  const uint32_t s8 = k.weight(random_data(ST::kFloat, {10}, 97, 0.01, 0.1));
  const uint32_t idx = k.in(make(ST::kLong, {2, 2}, {9, 0, 3, 3}));
  k.b.node(OpId::EmbeddingByteOut, {w8, s8, k.b.v_none(), k.b.v_int(-128), k.b.v_int(127), idx,
                                    k.out(ST::kFloat, {2, 2, 8})});
  const uint32_t w4 = k.weight(random_data(ST::kByte, {6, 4}, 98, 0, 256));  // 8 values per row
  const uint32_t s4 = k.weight(random_data(ST::kFloat, {6, 2}, 99, 0.01, 0.1));  // groups of 4
  const uint32_t idx4 = k.in(make(ST::kInt, {3}, {5, 0, 2}));
  k.b.node(OpId::Embedding4bitOut, {w4, s4, k.b.v_none(), k.b.v_int(-8), k.b.v_int(7), idx4,
                                    k.out(ST::kFloat, {3, 8})});
  k.check(kExact);
}

// ---------------------------------------------------------------------------
// Indexing.

TEST(CudaDeviceTest, Embedding) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t w = k.weight(random_data(ST::kBFloat16, {50, 64}, 61));
  const uint32_t idx = k.in(make(ST::kLong, {2, 3}, {0, 49, 7, 7, 13, 1}));
  k.b.node(OpId::EmbeddingOut,
           {w, idx, k.b.v_int(-1), k.b.v_bool(false), k.b.v_bool(false), k.out(ST::kBFloat16, {2, 3, 64})});
  const uint32_t w2 = k.weight(random_data(ST::kFloat, {10, 5}, 62));  // 20-byte rows
  const uint32_t idx2 = k.in(make(ST::kInt, {4}, {9, 0, 3, 3}));
  k.b.node(OpId::EmbeddingOut,
           {w2, idx2, k.b.v_int(-1), k.b.v_bool(false), k.b.v_bool(false), k.out(ST::kFloat, {4, 5})});
  k.check(kExact);
}

TEST(CudaDeviceTest, IndexSelect) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t x = k.in(random_data(ST::kFloat, {4, 5, 6}, 63));
  const uint32_t idx = k.in(make(ST::kLong, {3}, {4, 0, 2}));
  k.b.node(OpId::IndexSelectOut, {x, k.b.v_int(1), idx, k.out(ST::kFloat, {4, 3, 6})});
  const uint32_t y = k.in(random_data(ST::kBFloat16, {7, 3}, 64));
  const uint32_t idx2 = k.in(make(ST::kInt, {4}, {2, 0, 2, 1}));
  k.b.node(OpId::IndexSelectOut, {y, k.b.v_int(-1), idx2, k.out(ST::kBFloat16, {7, 4})});
  k.check(kExact);
}

/// The KV-cache update: cache[:, :, pos] = values on a state tensor, then a
/// clone to an output so the device copy can be observed.
TEST(CudaDeviceTest, IndexPutIntoStatePersistsAcrossCalls) {
  SKIP_WITHOUT_DEVICE();
  ProgramBuilder b;
  const uint32_t cache_t = b.tensor(ST::kFloat, {1, 2, 8, 4}, TensorRole::kState);
  const uint32_t pos_t = b.tensor(ST::kLong, {2}, TensorRole::kInput);
  const uint32_t val_t = b.tensor(ST::kFloat, {1, 2, 2, 4}, TensorRole::kInput);
  const uint32_t out_t = b.tensor(ST::kFloat, {1, 2, 8, 4}, TensorRole::kOutput);
  const uint32_t cache = b.v_tensor(cache_t);
  b.node(OpId::IndexPut_,
         {cache, b.v_list({-1, -1, int32_t(pos_t)}, true), b.v_tensor(val_t), b.v_bool(false)}, "kv_update");
  b.node(OpId::CloneOut, {cache, b.v_none(), b.v_tensor(out_t)}, "observe");
  const auto program = b.program();
  auto dev = make_device_executor(program, b.lookup());
  ASSERT_TRUE(dev.is_ok()) << dev.status().message();
  auto ref = ReferenceExecutor::make(program, b.lookup(), portable_registry());
  ASSERT_TRUE(ref.is_ok()) << ref.status().message();

  const HostData initial = random_data(ST::kFloat, {1, 2, 8, 4}, 65);
  std::vector<HostData> dev_in = {initial, {}, {}}, ref_in = {initial, {}, {}};
  const std::vector<std::vector<double>> positions = {{0, 1}, {5, -1}};  // -1: the last row
  for (size_t call = 0; call < positions.size(); ++call) {
    dev_in[1] = ref_in[1] = make(ST::kLong, {2}, positions[call]);
    dev_in[2] = ref_in[2] = random_data(ST::kFloat, {1, 2, 2, 4}, 66 + uint32_t(call));
    auto got = run_once(**dev, *program, dev_in);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    auto want = run_once(**ref, *program, ref_in);
    ASSERT_TRUE(want.is_ok()) << want.status().message();
    expect_close((*got)[0], (*want)[0], kExact, "cache after call " + std::to_string(call));
  }
  // The device copy is authoritative: the caller's host buffer is not written.
  EXPECT_EQ(dev_in[0].bytes, initial.bytes);

  // An index outside the cache is reported, naming the node.
  dev_in[1] = make(ST::kLong, {2}, {8, 0});
  auto bad = run_once(**dev, *program, dev_in);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kOutOfRange);
  EXPECT_NE(bad.status().message().find("kv_update"), std::string::npos) << bad.status().message();
}

TEST(CudaDeviceTest, IndexPutAccumulateIntoInput) {
  SKIP_WITHOUT_DEVICE();
  // A plain (non-state) input mutated in place is copied back to the caller.
  ProgramBuilder b;
  const uint32_t self_t = b.tensor(ST::kFloat, {5, 3}, TensorRole::kInput);
  const uint32_t idx_t = b.tensor(ST::kLong, {4}, TensorRole::kInput);
  const uint32_t val_t = b.tensor(ST::kFloat, {3}, TensorRole::kInput);
  const uint32_t out_t = b.tensor(ST::kFloat, {5, 3}, TensorRole::kOutput);
  const uint32_t self = b.v_tensor(self_t);
  b.node(OpId::IndexPut_, {self, b.v_list({int32_t(idx_t)}, true), b.v_tensor(val_t), b.v_bool(true)});
  b.node(OpId::CloneOut, {self, b.v_none(), b.v_tensor(out_t)});
  const auto program = b.program();
  auto dev = make_device_executor(program, b.lookup());
  ASSERT_TRUE(dev.is_ok()) << dev.status().message();
  auto ref = ReferenceExecutor::make(program, b.lookup(), portable_registry());
  ASSERT_TRUE(ref.is_ok()) << ref.status().message();
  std::vector<HostData> in = {random_data(ST::kFloat, {5, 3}, 68), make(ST::kLong, {4}, {1, 3, 1, -1}),
                              make(ST::kFloat, {3}, {0.5, 0.25, 1.0})};
  auto dev_in = in, ref_in = in;
  auto got = run_once(**dev, *program, dev_in);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  auto want = run_once(**ref, *program, ref_in);
  ASSERT_TRUE(want.is_ok()) << want.status().message();
  expect_close((*got)[0], (*want)[0], kF32, "out");
  expect_close(dev_in[0], ref_in[0], kF32, "mutated input");
}

// ---------------------------------------------------------------------------
// Data movement.

TEST(CudaDeviceTest, SliceCopy) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t x = k.in(random_data(ST::kBFloat16, {4, 10}, 69));
  k.b.node(OpId::SliceCopyTensorOut,
           {x, k.b.v_int(1), k.b.v_int(2), k.b.v_int(-1), k.b.v_int(3), k.out(ST::kBFloat16, {4, 3})});
  k.b.node(OpId::SliceCopyTensorOut,
           {x, k.b.v_int(0), k.b.v_int(-3), k.b.v_none(), k.b.v_int(1), k.out(ST::kBFloat16, {3, 10})});
  const uint32_t y = k.in(random_data(ST::kFloat, {2, 300}, 70));
  k.b.node(OpId::SliceCopyTensorOut, {y, k.b.v_int(1), k.b.v_int(10), k.b.v_int(int64_t(1) << 62), k.b.v_int(1),
                                      k.out(ST::kFloat, {2, 290})});
  k.check(kExact);
}

TEST(CudaDeviceTest, Cat) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t a_t = k.b.tensor(ST::kFloat, {2, 3}, TensorRole::kInput);
  const uint32_t b_t = k.b.tensor(ST::kFloat, {2, 5}, TensorRole::kInput);
  const uint32_t e_t = k.b.tensor(ST::kFloat, {0}, TensorRole::kInput);  // skipped, as torch does
  k.inputs = {random_data(ST::kFloat, {2, 3}, 71), random_data(ST::kFloat, {2, 5}, 72), make(ST::kFloat, {0}, {})};
  k.b.node(OpId::CatOut, {k.b.v_list({int32_t(a_t), int32_t(e_t), int32_t(b_t)}, false), k.b.v_int(1),
                          k.out(ST::kFloat, {2, 8})});
  const uint32_t c_t = k.b.tensor(ST::kBFloat16, {4, 96}, TensorRole::kInput);
  const uint32_t d_t = k.b.tensor(ST::kBFloat16, {4, 64}, TensorRole::kInput);
  k.inputs.push_back(random_data(ST::kBFloat16, {4, 96}, 73));
  k.inputs.push_back(random_data(ST::kBFloat16, {4, 64}, 74));
  k.b.node(OpId::CatOut, {k.b.v_list({int32_t(c_t), int32_t(d_t)}, false), k.b.v_int(-1),
                          k.out(ST::kBFloat16, {4, 160})});
  k.b.node(OpId::CatOut, {k.b.v_list({int32_t(d_t), int32_t(d_t)}, false), k.b.v_int(0),
                          k.out(ST::kBFloat16, {8, 64})});
  k.check(kExact);
}

TEST(CudaDeviceTest, PermuteExpandViewClone) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t x = k.in(random_data(ST::kFloat, {2, 3, 4}, 75));
  k.b.node(OpId::PermuteCopyOut, {x, k.b.v_ints({2, 0, 1}), k.out(ST::kFloat, {4, 2, 3})});
  const uint32_t y = k.in(random_data(ST::kBFloat16, {2, 3, 4, 5}, 76));
  k.b.node(OpId::PermuteCopyOut, {y, k.b.v_ints({0, 2, 1, 3}), k.out(ST::kBFloat16, {2, 4, 3, 5})});
  const uint32_t z = k.in(random_data(ST::kBFloat16, {3, 1}, 77));
  k.b.node(OpId::ExpandCopyOut, {z, k.b.v_ints({2, -1, 4}), k.b.v_bool(false), k.out(ST::kBFloat16, {2, 3, 4})});
  k.b.node(OpId::ViewCopyOut, {x, k.b.v_ints({6, -1}), k.out(ST::kFloat, {6, 4})});
  k.b.node(OpId::CloneOut, {y, k.b.v_none(), k.out(ST::kBFloat16, {2, 3, 4, 5})});
  k.check(kExact);
}

TEST(CudaDeviceTest, ToDimOrderCopyConverts) {
  SKIP_WITHOUT_DEVICE();
  Case k;
  const uint32_t x = k.in(random_data(ST::kFloat, {3, 5}, 78));
  k.b.node(OpId::ToDimOrderCopyOut, {x, k.b.v_bool(false), k.b.v_none(), k.out(ST::kBFloat16, {3, 5})});
  const uint32_t i = k.in(random_data(ST::kLong, {7}, 79, -1000, 1000));
  k.b.node(OpId::ToDimOrderCopyOut, {i, k.b.v_bool(false), k.b.v_ints({0}), k.out(ST::kFloat, {7})});
  const uint32_t c = k.in(random_data(ST::kBool, {4}, 80, 0, 2));
  k.b.node(OpId::ToDimOrderCopyOut, {c, k.b.v_bool(false), k.b.v_none(), k.out(ST::kHalf, {4})});
  k.check(kExact);
}

// ---------------------------------------------------------------------------
// Convolution and pooling.

/// A 1- or 2-element window list's value for dim `i` ([] gives `dflt`).
int64_t window_arg(const std::vector<int64_t>& v, size_t i, int64_t dflt) {
  return v.empty() ? dflt : v[v.size() == 1 ? 0 : i];
}

struct ConvSpec {
  std::vector<int64_t> in, weight;  ///< [N, C, H, W], [O, C / groups, KH, KW]
  bool bias = false;
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
};

/// One convolution node (input an input, weight and bias constants) per dtype of `dts`.
void check_conv(const ConvSpec& c, std::initializer_list<ST> dts, uint32_t seed) {
  for (ST dt : dts) {
    SCOPED_TRACE("dtype " + std::string(scalar_type_name(dt)));
    Case k;
    const uint32_t x = k.in(random_data(dt, c.in, seed));
    const uint32_t w = k.weight(random_data(dt, c.weight, seed + 1, -0.5, 0.5));
    const uint32_t b = c.bias ? k.weight(random_data(dt, {c.weight[0]}, seed + 2)) : k.b.v_none();
    std::vector<int64_t> out{c.in[0], c.weight[0]};
    for (size_t i = 0; i < 2; ++i) {
      const int64_t s = window_arg(c.stride, i, 1), p = window_arg(c.padding, i, 0), d = window_arg(c.dilation, i, 1);
      out.push_back((c.in[i + 2] + 2 * p - d * (c.weight[i + 2] - 1) - 1) / s + 1);
    }
    k.b.node(OpId::ConvolutionOut, {x, w, b, k.b.v_ints(c.stride), k.b.v_ints(c.padding), k.b.v_ints(c.dilation),
                                    k.b.v_bool(false), k.b.v_ints({0, 0}), k.b.v_int(c.groups), k.out(dt, out)});
    // f32 sums vs the reference's f64 ones; 16-bit outs may round one ulp apart.
    k.check(dt == ST::kFloat ? Tol{1e-4, 1e-5, true} : Tol{1e-2, 1e-2, true});
  }
}

TEST(CudaDeviceTest, ConvolutionPatchEmbedding) {
  SKIP_WITHOUT_DEVICE();
  // ViT: kernel = stride = 16 over 3 channels, with bias; two images share the pixel tiles.
  check_conv({{2, 3, 32, 32}, {16, 3, 16, 16}, true, {16, 16}, {0, 0}, {1, 1}, 1}, {ST::kFloat, ST::kBFloat16}, 300);
}

TEST(CudaDeviceTest, ConvolutionStridedPadded) {
  SKIP_WITHOUT_DEVICE();
  // 3x3 stride 2 padding 1, no bias; 70 output channels span two 64-row tiles.
  check_conv({{1, 8, 9, 9}, {70, 8, 3, 3}, false, {2, 2}, {1, 1}, {1, 1}, 1}, {ST::kFloat, ST::kBFloat16}, 310);
  // ResNet's stem: 7x7 stride 2 padding 3, given as 1-element lists.
  check_conv({{1, 3, 20, 22}, {64, 3, 7, 7}, false, {2}, {3}, {1}, 1}, {ST::kFloat}, 320);
  // Dilation and the defaults of empty lists (stride 1, padding 0).
  check_conv({{2, 4, 11, 12}, {20, 4, 3, 2}, true, {}, {}, {2, 3}, 1}, {ST::kFloat}, 330);
}

TEST(CudaDeviceTest, ConvolutionGrouped) {
  SKIP_WITHOUT_DEVICE();
  check_conv({{2, 6, 7, 7}, {8, 3, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 2}, {ST::kFloat, ST::kBFloat16}, 340);
  // More output channels per group than one tile holds.
  check_conv({{1, 4, 5, 6}, {40, 2, 1, 1}, false, {1, 1}, {0, 0}, {1, 1}, 2}, {ST::kFloat}, 350);
}

TEST(CudaDeviceTest, ConvolutionWhisperConv1d) {
  SKIP_WITHOUT_DEVICE();
  // Whisper's conv1d as a 2-D convolution with H = 1: kernel 1x3, padding [0, 1], stride 1 and 2.
  check_conv({{1, 8, 1, 20}, {12, 8, 1, 3}, true, {1, 2}, {0, 1}, {1, 1}, 1}, {ST::kFloat, ST::kBFloat16}, 360);
  check_conv({{1, 8, 1, 20}, {24, 8, 1, 3}, true, {1, 1}, {0, 1}, {1, 1}, 1}, {ST::kFloat, ST::kBFloat16}, 370);
}

TEST(CudaDeviceTest, MaxPool2dWithIndices) {
  SKIP_WITHOUT_DEVICE();
  for (ST dt : {ST::kFloat, ST::kBFloat16}) {
    SCOPED_TRACE("dtype " + std::string(scalar_type_name(dt)));
    Case k;
    // Few levels, so windows hold ties (the first tap wins); one NaN (it wins its windows).
    auto v = values_of(level_data(dt, {2, 3, 9, 10}, 380));
    v[size_t(((1 * 3 + 2) * 9 + 4) * 10 + 5)] = std::nan("");
    const uint32_t x = k.in(make(dt, {2, 3, 9, 10}, v));
    // ResNet's 3x3 stride 2 padding 1: [9, 10] -> [5, 5].
    k.b.node(OpId::MaxPool2dWithIndicesOut, {x, k.b.v_ints({3, 3}), k.b.v_ints({2, 2}), k.b.v_ints({1, 1}),
                                             k.b.v_ints({1, 1}), k.b.v_bool(false), k.out(dt, {2, 3, 5, 5}),
                                             k.out(ST::kLong, {2, 3, 5, 5})});
    // 1-element kernel, stride [] (= kernel): [9, 10] -> [4, 5].
    k.b.node(OpId::MaxPool2dWithIndicesOut, {x, k.b.v_ints({2}), k.b.v_ints({}), k.b.v_ints({0}), k.b.v_ints({1}),
                                             k.b.v_bool(false), k.out(dt, {2, 3, 4, 5}),
                                             k.out(ST::kLong, {2, 3, 4, 5})});
    k.check(kExact);
  }
}

TEST(CudaDeviceTest, ConvolutionAndPoolRejectUnsupported) {
  SKIP_WITHOUT_DEVICE();
  {
    Case k;  // transposed convolution
    const uint32_t x = k.in(random_data(ST::kFloat, {1, 2, 5, 5}, 390));
    const uint32_t w = k.weight(random_data(ST::kFloat, {2, 2, 3, 3}, 391));
    k.b.node(OpId::ConvolutionOut, {x, w, k.b.v_none(), k.b.v_ints({1, 1}), k.b.v_ints({0, 0}), k.b.v_ints({1, 1}),
                                    k.b.v_bool(true), k.b.v_ints({0, 0}), k.b.v_int(1), k.out(ST::kFloat, {1, 2, 3, 3})});
    const auto program = k.b.program();
    auto dev = make_device_executor(program, k.b.lookup());
    ASSERT_TRUE(dev.is_ok()) << dev.status().message();
    auto got = run_once(**dev, *program, k.inputs);
    EXPECT_EQ(got.status().code(), ErrorCode::kNotSupported) << got.status().message();
  }
  {
    Case k;  // ceil_mode
    const uint32_t x = k.in(random_data(ST::kFloat, {1, 1, 6, 6}, 392));
    k.b.node(OpId::MaxPool2dWithIndicesOut, {x, k.b.v_ints({3, 3}), k.b.v_ints({2, 2}), k.b.v_ints({0, 0}),
                                             k.b.v_ints({1, 1}), k.b.v_bool(true), k.out(ST::kFloat, {1, 1, 2, 2}),
                                             k.out(ST::kLong, {1, 1, 2, 2})});
    const auto program = k.b.program();
    auto dev = make_device_executor(program, k.b.lookup());
    ASSERT_TRUE(dev.is_ok()) << dev.status().message();
    auto got = run_once(**dev, *program, k.inputs);
    EXPECT_EQ(got.status().code(), ErrorCode::kNotSupported) << got.status().message();
  }
}

// ---------------------------------------------------------------------------
// Programs with dims; CUDA graphs.

/// A small decode-like program: logits = softmax(x @ W + bias) * scale.
struct DecodeProgram {
  ProgramBuilder b;
  std::shared_ptr<const CudaProgram> program;
  DecodeProgram() {
    const uint32_t x = b.v_tensor(b.tensor(ST::kBFloat16, {1, 256}, TensorRole::kInput));
    const uint32_t w = b.v_tensor(b.constant(random_data(ST::kBFloat16, {256, 512}, 81, -0.1, 0.1)));
    const uint32_t bias = b.v_tensor(b.constant(random_data(ST::kBFloat16, {512}, 82)));
    const uint32_t h = b.v_tensor(b.tensor(ST::kBFloat16, {1, 512}, TensorRole::kIntermediate));
    const uint32_t h2 = b.v_tensor(b.tensor(ST::kBFloat16, {1, 512}, TensorRole::kIntermediate));
    const uint32_t out = b.v_tensor(b.tensor(ST::kBFloat16, {1, 512}, TensorRole::kOutput));
    b.node(OpId::MmOut, {x, w, h});
    b.node(OpId::AddOut, {h, bias, b.v_int(1), h2});
    b.node(OpId::SoftmaxOut, {h2, b.v_int(-1), b.v_bool(false), out});
    program = b.program();
  }
};

TEST(CudaDeviceTest, GraphReplayMatchesEager) {
  SKIP_WITHOUT_DEVICE();
  DecodeProgram d;
  auto graphed = make_device_executor(d.program, d.b.lookup());
  ASSERT_TRUE(graphed.is_ok()) << graphed.status().message();
  ::setenv("HF2PTE_CUDA_GRAPHS", "0", 1);
  auto eager = make_device_executor(d.program, d.b.lookup());
  ::unsetenv("HF2PTE_CUDA_GRAPHS");
  ASSERT_TRUE(eager.is_ok()) << eager.status().message();
  auto ref = ReferenceExecutor::make(d.program, d.b.lookup(), portable_registry());
  ASSERT_TRUE(ref.is_ok()) << ref.status().message();
  // Two warm-ups, a capture, then replays; new data every call (and a repeat
  // of the first) so a replay that read stale inputs would show.
  for (uint32_t call = 0; call < 6; ++call) {
    std::vector<HostData> in = {random_data(ST::kBFloat16, {1, 256}, call == 5 ? 100 : 100 + call)};
    auto a = in, b = in, c = in;
    auto got = run_once(**graphed, *d.program, a);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    auto base = run_once(**eager, *d.program, b);
    ASSERT_TRUE(base.is_ok()) << base.status().message();
    auto want = run_once(**ref, *d.program, c);
    ASSERT_TRUE(want.is_ok()) << want.status().message();
    EXPECT_EQ((*got)[0].bytes, (*base)[0].bytes) << "call " << call;
    expect_close((*got)[0], (*want)[0], Tol{2e-2, 1e-2, true}, "call " + std::to_string(call));
  }
}

TEST(CudaDeviceTest, DynamicDimsAcrossCalls) {
  SKIP_WITHOUT_DEVICE();
  // x [1, T, 8] + y [8] -> out [1, T, 8], T read from input 0 axis 1.
  ProgramBuilder b;
  const uint32_t one = b.c(1), eight = b.c(8);
  const uint32_t T = b.dim("T", 1, 16, 0, 1);
  const uint32_t x = b.v_tensor(b.tensor_dyn(ST::kFloat, {one, T, eight}, {1, 16, 8}, TensorRole::kInput));
  const uint32_t y = b.v_tensor(b.tensor(ST::kFloat, {8}, TensorRole::kInput));
  const uint32_t out = b.v_tensor(b.tensor_dyn(ST::kFloat, {one, T, eight}, {1, 16, 8}, TensorRole::kOutput));
  b.node(OpId::AddOut, {x, y, b.v_int(1), out});
  const auto program = b.program();
  auto dev = make_device_executor(program, b.lookup());
  ASSERT_TRUE(dev.is_ok()) << dev.status().message();
  auto ref = ReferenceExecutor::make(program, b.lookup(), portable_registry());
  ASSERT_TRUE(ref.is_ok()) << ref.status().message();
  uint32_t seed = 200;
  for (int64_t t : {3, 5, 3, 3, 3, 3, 16, 3}) {
    std::vector<HostData> in = {random_data(ST::kFloat, {1, t, 8}, seed++), random_data(ST::kFloat, {8}, seed++)};
    auto a = in, c = in;
    auto got = run_once(**dev, *program, a);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    auto want = run_once(**ref, *program, c);
    ASSERT_TRUE(want.is_ok()) << want.status().message();
    expect_close((*got)[0], (*want)[0], kF32, "T=" + std::to_string(t));
  }
}

TEST(CudaDeviceTest, RejectsWrongInputs) {
  SKIP_WITHOUT_DEVICE();
  DecodeProgram d;
  auto dev = make_device_executor(d.program, d.b.lookup());
  ASSERT_TRUE(dev.is_ok()) << dev.status().message();
  std::vector<HostData> wrong_dtype = {random_data(ST::kFloat, {1, 256}, 1)};
  EXPECT_EQ(run_once(**dev, *d.program, wrong_dtype).status().code(), ErrorCode::kInvalidArgument);
  std::vector<HostData> wrong_shape = {random_data(ST::kBFloat16, {1, 255}, 1)};
  EXPECT_EQ(run_once(**dev, *d.program, wrong_shape).status().code(), ErrorCode::kInvalidArgument);
}

TEST(CudaDeviceTest, DescribesDevice) {
  SKIP_WITHOUT_DEVICE();
  EXPECT_NE(device_description().find("sm_"), std::string::npos) << device_description();
}

/// Every op of the CUDA op set has a case above; a new op needs one too.
TEST(CudaDeviceTest, EveryCudaOpIsTested) {
  static constexpr OpId kTested[] = {
      OpId::AddOut, OpId::AddScalarOut, OpId::SubOut, OpId::MulOut, OpId::MulScalarOut, OpId::DivOut, OpId::NegOut,
      OpId::RsqrtOut, OpId::SigmoidOut, OpId::TanhOut, OpId::ErfOut, OpId::ExpOut, OpId::Log1pOut, OpId::ClampOut,
      OpId::MaximumOut, OpId::PowTensorScalarOut, OpId::LeTensorOut, OpId::LtTensorOut, OpId::GtTensorOut,
      OpId::GeTensorOut, OpId::EqTensorOut, OpId::WhereSelfOut, OpId::MeanOut, OpId::SumIntListOut, OpId::AmaxOut,
      OpId::SoftmaxOut, OpId::MmOut, OpId::BmmOut, OpId::AddmmOut, OpId::EmbeddingOut, OpId::IndexSelectOut,
      OpId::IndexPut_, OpId::ViewCopyOut, OpId::PermuteCopyOut, OpId::SliceCopyTensorOut, OpId::CatOut,
      OpId::CloneOut, OpId::ToDimOrderCopyOut, OpId::ExpandCopyOut, OpId::ConvolutionOut,
      OpId::MaxPool2dWithIndicesOut, OpId::ChooseQparamsPerTokenAsymmetricOut, OpId::QuantizePerTokenOut,
      OpId::DequantizePerTokenOut, OpId::MixedLinearOut, OpId::EmbeddingByteOut, OpId::Embedding4bitOut,
  };
  for (OpId op : kCudaOps) {
    EXPECT_NE(std::find(std::begin(kTested), std::end(kTested), op), std::end(kTested))
        << op_info(op).kernel_key() << " has no device test";
  }
}

}  // namespace
}  // namespace hf2pte::cuda
