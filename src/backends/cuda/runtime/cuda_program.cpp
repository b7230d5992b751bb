#include "backends/cuda/runtime/cuda_program.h"

#include <fmt/format.h>
#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backends/cuda/cuda_payload_generated.h"
#include "backends/cuda/schema/op_set.h"

namespace hf2pte::cuda {
namespace {

constexpr uint32_t kMaxRank = 16;
constexpr uint32_t kSupportedVersion = 1;
constexpr uint64_t kArenaAlignment = 64;  ///< as partition.cpp plans it

/// Element `i` of a flatbuffer vector of 8-byte-aligned items, copied out: the
/// verifier checks a vector's length field, not that its 8-byte items are
/// aligned, so a hostile payload can misalign them (found by fuzz_cuda).
template <typename T>
T unaligned_at(const uint8_t* data, uint32_t i) {
  T v;
  std::memcpy(&v, data + size_t(i) * sizeof(T), sizeof(T));
  return v;
}

Status bad(std::string what) { return Status(ErrorCode::kInvalidProgram, "CUDA payload: " + what); }

/// The value kinds a schema argument may hold (Scalar: any of int/double/bool).
bool kind_fits(const ArgSchema& a, ValueKind k) {
  if (k == ValueKind::kNone) return a.optional;
  switch (a.type) {
    case ArgType::kTensor: return k == ValueKind::kTensor;
    case ArgType::kTensorList: return k == ValueKind::kTensorList;
    case ArgType::kOptionalTensorList: return k == ValueKind::kOptTensorList;
    case ArgType::kInt: case ArgType::kMemoryFormat: return k == ValueKind::kInt;
    case ArgType::kScalarType: return k == ValueKind::kScalarType || k == ValueKind::kInt;
    case ArgType::kIntList: return k == ValueKind::kIntList;
    case ArgType::kFloat: return k == ValueKind::kDouble || k == ValueKind::kInt;
    case ArgType::kBool: return k == ValueKind::kBool;
    case ArgType::kScalar: return k == ValueKind::kInt || k == ValueKind::kDouble || k == ValueKind::kBool;
    default: return false;
  }
}

Result<ScalarType> tensor_dtype(int8_t code) {
  if (!is_known_scalar_type(code)) return bad(fmt::format("unknown scalar type {}", code));
  auto t = ScalarType(code);
  switch (t) {
    case ScalarType::kFloat: case ScalarType::kBFloat16: case ScalarType::kHalf: case ScalarType::kLong:
    case ScalarType::kInt: case ScalarType::kBool:
    case ScalarType::kChar: case ScalarType::kByte: case ScalarType::kDouble:  // quantized ops
      return t;
    default:
      return bad(fmt::format("tensors of {} are not supported", scalar_type_name(t)));
  }
}

}  // namespace

Status CudaProgram::evaluate(std::span<const std::span<const int64_t>> input_sizes,
                             std::vector<int64_t>* out) const {
  std::vector<int64_t> dim_values(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    const DimInfo& di = dims[d];
    HF2PTE_CHECK_OR_RETURN(di.input < input_sizes.size() && di.axis < input_sizes[di.input].size(), kInvalidArgument,
                           "dim '{}' is read from axis {} of input {}, which has rank {}", di.name, di.axis, di.input,
                           di.input < input_sizes.size() ? input_sizes[di.input].size() : 0);
    const int64_t v = input_sizes[di.input][di.axis];
    HF2PTE_CHECK_OR_RETURN(v >= di.min && v <= di.max, kInvalidArgument, "dim '{}' = {} is outside [{}, {}]", di.name,
                           v, di.min, di.max);
    dim_values[d] = v;
  }
  return evaluate_dims(dim_values, out);
}

Status CudaProgram::evaluate_dims(std::span<const int64_t> dim_values, std::vector<int64_t>* out) const {
  HF2PTE_CHECK_OR_RETURN(dim_values.size() == dims.size(), kInvalidArgument, "{} dim values for {} dims",
                         dim_values.size(), dims.size());
  out->assign(exprs.size(), 0);
  auto& val = *out;
  for (size_t i = 0; i < exprs.size(); ++i) {
    const Expr& e = exprs[i];
    const int64_t a = e.kind >= ExprKind::kAdd ? val[e.lhs] : 0;
    const int64_t b = e.kind >= ExprKind::kAdd ? val[e.rhs] : 0;
    // A hostile payload can make any expression overflow: an error, never UB.
    bool overflow = false;
    switch (e.kind) {
      case ExprKind::kConst: val[i] = e.value; break;
      case ExprKind::kDim: val[i] = dim_values[size_t(e.value)]; break;
      case ExprKind::kAdd: overflow = __builtin_add_overflow(a, b, &val[i]); break;
      case ExprKind::kSub: overflow = __builtin_sub_overflow(a, b, &val[i]); break;
      case ExprKind::kMul: overflow = __builtin_mul_overflow(a, b, &val[i]); break;
      case ExprKind::kFloorDiv:
      case ExprKind::kMod: {
        HF2PTE_CHECK_OR_RETURN(b != 0, kInvalidArgument, "a size expression divides by zero");
        HF2PTE_CHECK_OR_RETURN(!(a == INT64_MIN && b == -1), kInvalidArgument, "a size expression overflows");
        int64_t q = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0))) --q;  // floor, as Python's //
        val[i] = e.kind == ExprKind::kFloorDiv ? q : a - q * b;
        break;
      }
      case ExprKind::kMin: val[i] = std::min(a, b); break;
      case ExprKind::kMax: val[i] = std::max(a, b); break;
    }
    HF2PTE_CHECK_OR_RETURN(!overflow, kInvalidArgument, "a size expression overflows 64 bits");
  }
  return Status::ok();
}

std::vector<int64_t> CudaProgram::sizes_of(uint32_t t, const std::vector<int64_t>& expr_values) const {
  std::vector<int64_t> s;
  for (uint32_t e : tensors[t].sizes) s.push_back(expr_values[e]);
  return s;
}

Result<CudaProgram> parse_cuda_payload(std::span<const uint8_t> payload, uint64_t max_arena_bytes) {
  flatbuffers::Verifier verifier(payload.data(), payload.size());
  // The size first: the identifier sits at bytes 4..8.
  if (payload.size() < 8 || !fb_cuda::GraphBufferHasIdentifier(payload.data()) || !fb_cuda::VerifyGraphBuffer(verifier)) {
    return bad("not a verified HCU1 flatbuffer");
  }
  const fb_cuda::Graph* g = fb_cuda::GetGraph(payload.data());
  if (g->version() != kSupportedVersion) return bad(fmt::format("version {}; expected {}", g->version(), kSupportedVersion));
  CudaProgram p;
  p.num_inputs = g->num_inputs();
  p.num_outputs = g->num_outputs();
  p.arena_bytes = g->arena_bytes();
  if (p.arena_bytes > max_arena_bytes) {
    return bad(fmt::format("arena of {} bytes exceeds the cap of {}", p.arena_bytes, max_arena_bytes));
  }
  if (g->dims()) {
    for (const auto* d : *g->dims()) {
      if (d->name() == nullptr || d->min() < 0 || d->max() < d->min() || d->input() >= p.num_inputs) {
        return bad("a dim has no name, an empty range or an input out of range");
      }
      p.dims.push_back({d->name()->str(), d->min(), d->max(), d->input(), d->axis()});
    }
  }
  if (g->exprs()) {
    for (uint32_t n = 0; n < g->exprs()->size(); ++n) {
      const fb_cuda::Expr copy = unaligned_at<fb_cuda::Expr>(g->exprs()->Data(), n);
      const fb_cuda::Expr* e = &copy;
      const auto i = uint32_t(p.exprs.size());
      const auto k = int(e->kind());
      if (k < 0 || k > int(ExprKind::kMax)) return bad(fmt::format("expr {} has unknown kind {}", i, k));
      Expr x{ExprKind(k), 0, 0, e->value()};
      if (x.kind == ExprKind::kDim && (x.value < 0 || uint64_t(x.value) >= p.dims.size())) {
        return bad(fmt::format("expr {} names dim {} of {}", i, x.value, p.dims.size()));
      }
      if (x.kind >= ExprKind::kAdd) {
        if (e->lhs() < 0 || e->rhs() < 0 || uint32_t(e->lhs()) >= i || uint32_t(e->rhs()) >= i) {
          return bad(fmt::format("expr {} refers to a later expr", i));
        }
        x.lhs = uint32_t(e->lhs());
        x.rhs = uint32_t(e->rhs());
      }
      p.exprs.push_back(x);
    }
  }
  // Every input and output is a tensor of the payload: bounds the tables below.
  const uint64_t n_tensors = g->tensors() ? g->tensors()->size() : 0;
  if (uint64_t(p.num_inputs) + p.num_outputs > n_tensors) {
    return bad(fmt::format("{} inputs and {} outputs but {} tensors", p.num_inputs, p.num_outputs, n_tensors));
  }
  p.input_tensor.assign(p.num_inputs, UINT32_MAX);
  p.output_tensor.assign(p.num_outputs, UINT32_MAX);
  if (g->tensors()) {
    for (const auto* t : *g->tensors()) {
      const auto ti = uint32_t(p.tensors.size());
      TensorInfo info;
      HF2PTE_ASSIGN_OR_RETURN(info.dtype, tensor_dtype(t->scalar_type()));
      const auto* sizes = t->sizes();
      const auto* maxs = t->max_sizes();
      const uint32_t rank = sizes ? sizes->size() : 0;
      if (rank > kMaxRank || (maxs ? maxs->size() : 0) != rank) return bad(fmt::format("tensor {} has a bad rank", ti));
      uint64_t bytes = element_size(info.dtype);
      for (uint32_t d = 0; d < rank; ++d) {
        if (sizes->Get(d) >= p.exprs.size()) return bad(fmt::format("tensor {} size expr out of range", ti));
        const int64_t m = unaligned_at<int64_t>(maxs->Data(), d);
        if (m < 0 || (m > 0 && bytes > (uint64_t(1) << 46) / uint64_t(m))) {
          return bad(fmt::format("tensor {} has a bad upper bound", ti));
        }
        info.sizes.push_back(sizes->Get(d));
        info.max_sizes.push_back(m);
        bytes *= uint64_t(m);
      }
      info.capacity_bytes = bytes;
      const auto role = int(t->role());
      if (role < 0 || role > int(TensorRole::kConstant)) return bad(fmt::format("tensor {} has unknown role", ti));
      info.role = TensorRole(role);
      info.io_index = t->io_index();
      switch (info.role) {
        case TensorRole::kInput:
        case TensorRole::kState:
          if (info.io_index >= p.num_inputs || p.input_tensor[info.io_index] != UINT32_MAX) {
            return bad(fmt::format("tensor {} claims input {} (of {}) twice or out of range", ti, info.io_index, p.num_inputs));
          }
          p.input_tensor[info.io_index] = ti;
          break;
        case TensorRole::kOutput:
          if (info.io_index >= p.num_outputs || p.output_tensor[info.io_index] != UINT32_MAX) {
            return bad(fmt::format("tensor {} claims output {} (of {}) twice or out of range", ti, info.io_index, p.num_outputs));
          }
          p.output_tensor[info.io_index] = ti;
          break;
        case TensorRole::kConstant:
          if (t->constant_key() == nullptr || t->constant_key()->size() == 0) return bad(fmt::format("constant {} has no key", ti));
          info.key = t->constant_key()->str();
          break;
        case TensorRole::kIntermediate:
          info.arena_offset = t->arena_offset();
          if (info.arena_offset > p.arena_bytes || info.capacity_bytes > p.arena_bytes - info.arena_offset) {
            return bad(fmt::format("tensor {} lies outside the arena", ti));
          }
          // The writer aligns every intermediate to 64 bytes; kernels read typed memory.
          if (info.arena_offset % kArenaAlignment != 0) {
            return bad(fmt::format("tensor {} has arena offset {}, not a multiple of {}", ti, info.arena_offset,
                                   kArenaAlignment));
          }
          break;
      }
      p.tensors.push_back(std::move(info));
    }
  }
  for (uint32_t i = 0; i < p.num_inputs; ++i) if (p.input_tensor[i] == UINT32_MAX) return bad(fmt::format("input {} has no tensor", i));
  for (uint32_t i = 0; i < p.num_outputs; ++i) if (p.output_tensor[i] == UINT32_MAX) return bad(fmt::format("output {} has no tensor", i));
  if (g->values()) {
    for (const auto* v : *g->values()) {
      const auto vi = p.values.size();
      ValueInfo info;
      const auto kind = int(v->kind());
      if (kind < 0 || kind > int(ValueKind::kScalarType)) return bad(fmt::format("value {} has unknown kind", vi));
      info.kind = ValueKind(kind);
      info.tensor = v->tensor();
      if (info.kind == ValueKind::kTensor && info.tensor >= p.tensors.size()) return bad(fmt::format("value {} tensor out of range", vi));
      if (v->exprs()) {
        for (uint32_t e : *v->exprs()) {
          if (e >= p.exprs.size()) return bad(fmt::format("value {} expr out of range", vi));
          info.exprs.push_back(e);
        }
      }
      if (info.kind == ValueKind::kInt && info.exprs.size() != 1) return bad(fmt::format("int value {} needs one expr", vi));
      info.f = v->f();
      info.b = v->b();
      if (v->tensors()) {
        for (int32_t t : *v->tensors()) {
          const bool none_ok = info.kind == ValueKind::kOptTensorList && t == -1;
          if (!none_ok && (t < 0 || uint32_t(t) >= p.tensors.size())) return bad(fmt::format("value {} list item out of range", vi));
          info.tensors.push_back(t);
        }
      }
      if (info.kind == ValueKind::kScalarType) {
        if (!is_known_scalar_type(v->scalar_type())) return bad(fmt::format("value {} has an unknown scalar type", vi));
        info.scalar_type = ScalarType(v->scalar_type());
      }
      p.values.push_back(std::move(info));
    }
  }
  if (g->nodes()) {
    for (const auto* n : *g->nodes()) {
      const auto ni = p.nodes.size();
      if (n->op() == nullptr) return bad(fmt::format("node {} has no op", ni));
      auto op = find_op(n->op()->string_view());
      if (!op || !op_info(*op).has_kernel || !cuda_supports(*op)) {
        return bad(fmt::format("node {} op '{}' is not in the CUDA op set", ni, n->op()->string_view()));
      }
      NodeInfo info;
      info.op = *op;
      info.name = n->name() ? n->name()->str() : fmt::format("node {}", ni);
      const auto& schema = op_schema(*op);
      const uint32_t nargs = n->args() ? n->args()->size() : 0;
      if (nargs != schema.args.size()) {
        return bad(fmt::format("node {} ({}) has {} args; the schema has {}", ni, info.name, nargs, schema.args.size()));
      }
      for (uint32_t a = 0; a < nargs; ++a) {
        const uint32_t vi = n->args()->Get(a);
        if (vi >= p.values.size() || !kind_fits(schema.args[a], p.values[vi].kind)) {
          return bad(fmt::format("node {} ({}) arg '{}' is missing or of the wrong kind", ni, info.name, schema.args[a].name));
        }
        if ((schema.args[a].is_out || schema.args[a].mutated) && p.values[vi].kind == ValueKind::kTensor && p.tensors[p.values[vi].tensor].role == TensorRole::kConstant) {
          return bad(fmt::format("node {} ({}) writes a constant", ni, info.name));
        }
        info.args.push_back(vi);
      }
      p.nodes.push_back(std::move(info));
    }
  }
  return p;
}

}  // namespace hf2pte::cuda
