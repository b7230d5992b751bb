#include "kernels/portable/kernel_util.h"

#include <limits>

#include <array>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace hf2pte::kernels {

std::string DTypeSet::to_string() const {
  std::string s;
  for (int code = 0; code < 64; ++code) {
    if (!(bits & (uint64_t(1) << code)) || !is_known_scalar_type(code)) continue;
    if (!s.empty()) s += ", ";
    s += scalar_type_name(ScalarType(code));
  }
  return s;
}

std::string_view op_key(OpId id) {
  // Built once: kernels name their op in every error, and building
  // "ns::name.overload" per call would allocate on the hot path.
  static const std::array<std::string, size_t(OpId::kCount)> keys = [] {
    std::array<std::string, size_t(OpId::kCount)> k;
    for (const auto& info : all_ops()) k[size_t(info.id)] = info.kernel_key();
    return k;
  }();
  return keys[size_t(id)];
}

Status unsupported_dtype(OpId op, std::string_view what, ScalarType t, DTypeSet allowed) {
  return make_error(ErrorCode::kNotSupported, "{}: {} has dtype {}; expected one of {}", op_key(op),
                    what, scalar_type_name(t), allowed.to_string());
}

std::string format_shape(std::span<const int64_t> sizes) {
  return fmt::format("[{}]", fmt::join(sizes, ", "));
}

// ---- ArgReader ----

Result<ArgReader> ArgReader::make(OpId op, std::span<rt::EValue*> args) {
  const size_t expected = op_schema(op).args.size() + 1;
  HF2PTE_CHECK_OR_RETURN(args.size() == expected, kInvalidProgram,
                         "{}: wrong number of kernel args; expected {} (schema args + return), got {}",
                         op_key(op), expected, args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    HF2PTE_CHECK_OR_RETURN(args[i] != nullptr, kInvalidProgram, "{}: kernel arg {} is null",
                           op_key(op), i);
  }
  return ArgReader(op, args);
}

const char* ArgReader::name(size_t i) const {
  const auto& schema_args = op_schema(op_).args;
  return i < schema_args.size() ? schema_args[i].name.c_str() : "return";
}

Status ArgReader::wrap(const Status& status) const {
  if (status.is_ok()) return status;
  return Status(status.code(), fmt::format("{}: {}", key(), status.message()));
}

Result<rt::Tensor*> ArgReader::tensor_meta(size_t i) const {
  auto t = rt::arg_tensor(args_[i], name(i));
  if (!t.is_ok()) return wrap(t.status());
  HF2PTE_CHECK_OR_RETURN(*t != nullptr, kInvalidProgram, "{}: argument '{}' has no tensor", key(),
                         name(i));
  return *t;
}

Result<rt::Tensor*> ArgReader::tensor(size_t i) const {
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * t, tensor_meta(i));
  HF2PTE_RETURN_IF_ERROR(validate_tensor(*t, op_, name(i)));
  return t;
}

Result<rt::Tensor*> ArgReader::opt_tensor(size_t i) const {
  if (args_[i]->is_none()) return static_cast<rt::Tensor*>(nullptr);
  return tensor(i);
}

Result<int64_t> ArgReader::int_arg(size_t i) const {
  auto v = rt::arg_int(args_[i], name(i));
  if (!v.is_ok()) return wrap(v.status());
  return *v;
}

Result<std::optional<int64_t>> ArgReader::opt_int(size_t i) const {
  if (args_[i]->is_none()) return std::optional<int64_t>();
  auto v = int_arg(i);
  if (!v.is_ok()) return v.status();
  return std::optional<int64_t>(*v);
}

Result<bool> ArgReader::bool_arg(size_t i) const {
  auto v = rt::arg_bool(args_[i], name(i));
  if (!v.is_ok()) return wrap(v.status());
  return *v;
}

Result<ScalarArg> ArgReader::scalar(size_t i) const {
  const rt::EValue& v = *args_[i];
  ScalarArg s;
  switch (v.tag) {
    case rt::Tag::kInt: s.kind = ScalarArg::Kind::kInt; s.i = v.i; return s;
    case rt::Tag::kBool: s.kind = ScalarArg::Kind::kBool; s.i = v.i != 0; return s;
    case rt::Tag::kDouble: s.kind = ScalarArg::Kind::kDouble; s.d = v.d; return s;
    default: break;
  }
  return make_error(ErrorCode::kInvalidProgram,
                    "{}: argument '{}' must be a Scalar (Int, Double or Bool); got {}", key(),
                    name(i), rt::tag_name(v.tag));
}

Status ArgReader::int_list(size_t i, std::vector<int64_t>* out, bool optional,
                           bool* is_none) const {
  return wrap(rt::arg_int_list(args_[i], name(i), out, optional, is_none));
}

Status ArgReader::tensor_list(size_t i, std::vector<rt::Tensor*>* out) const {
  HF2PTE_RETURN_IF_ERROR(wrap(rt::arg_tensor_list(args_[i], name(i), out)));
  for (size_t k = 0; k < out->size(); ++k) {
    if ((*out)[k] == nullptr) continue;  // None inside Tensor?[]
    HF2PTE_RETURN_IF_ERROR(
        validate_tensor(*(*out)[k], op_, fmt::format("{}[{}]", name(i), k)));
  }
  return Status::ok();
}

// ---- shapes ----

Status validate_tensor(const rt::Tensor& t, OpId op, std::string_view what) {
  HF2PTE_CHECK_OR_RETURN(t.dim() <= kMaxTensorRank, kNotSupported,
                         "{}: {} has rank {}; expected at most {}", op_key(op), what, t.dim(),
                         kMaxTensorRank);
  HF2PTE_CHECK_OR_RETURN(size_t(t.dim()) == t.strides().size(), kInvalidProgram,
                         "{}: {} has {} sizes but {} strides", op_key(op), what, t.dim(),
                         t.strides().size());
  if (t.numel() == 0) return Status::ok();
  const size_t elem = element_size(t.dtype());
  HF2PTE_CHECK_OR_RETURN(elem != 0, kNotSupported, "{}: {} has unsupported dtype {}", op_key(op),
                         what, scalar_type_name(t.dtype()));
  // The furthest element any index can reach, computed without overflow.
  uint64_t last = 0;
  for (int d = 0; d < t.dim(); ++d) {
    const int64_t size = t.sizes()[size_t(d)];
    const int64_t stride = t.strides()[size_t(d)];
    HF2PTE_CHECK_OR_RETURN(size >= 0 && stride >= 0, kInvalidProgram,
                           "{}: {} has a negative size or stride", op_key(op), what);
    uint64_t span = 0;
    HF2PTE_CHECK_OR_RETURN(!__builtin_mul_overflow(uint64_t(size - 1), uint64_t(stride), &span) &&
                               !__builtin_add_overflow(last, span, &last),
                           kInvalidProgram, "{}: {} extent overflows", op_key(op), what);
  }
  uint64_t need = 0;
  HF2PTE_CHECK_OR_RETURN(!__builtin_mul_overflow(last + 1, uint64_t(elem), &need) &&
                             t.raw_data() != nullptr && need <= t.capacity_bytes(),
                         kInvalidProgram,
                         "{}: {} {} needs {} bytes of data; expected at most its capacity {}",
                         op_key(op), what, format_shape(t.sizes()), need, t.capacity_bytes());
  return Status::ok();
}

Status resize_out(rt::Tensor& out, std::span<const int64_t> sizes, OpId op) {
  HF2PTE_CHECK_OR_RETURN(int(sizes.size()) == out.dim(), kInvalidProgram,
                         "{}: out has rank {}; expected rank {} for shape {}", op_key(op), out.dim(),
                         sizes.size(), format_shape(sizes));
  Status st = out.resize(sizes);
  if (!st.is_ok()) {
    return Status(st.code(), fmt::format("{}: out: {}", op_key(op), st.message()));
  }
  return validate_tensor(out, op, "out");
}

SliceBounds slice_bounds(std::optional<int64_t> start_arg, std::optional<int64_t> end_arg, int64_t size) {
  int64_t start = start_arg.value_or(0);
  int64_t end = end_arg.value_or(std::numeric_limits<int64_t>::max());
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = start < 0 ? 0 : (start > size ? size : start);
  end = end < start ? start : (end > size ? size : end);
  return {start, end};
}

Result<int64_t> normalize_dim(int64_t dim, int64_t rank, OpId op) {
  // ATen wraps dims of 0-dim tensors as if they had one dim.
  const int64_t r = rank == 0 ? 1 : rank;
  HF2PTE_CHECK_OR_RETURN(dim >= -r && dim < r, kInvalidArgument,
                         "{}: dim {} out of range; expected in [{}, {}]", op_key(op), dim, -r,
                         r - 1);
  return dim < 0 ? dim + r : dim;
}

Status broadcast_shapes(std::span<const std::span<const int64_t>> shapes, OpId op,
                        std::vector<int64_t>* out) {
  size_t rank = 0;
  for (auto s : shapes) rank = std::max(rank, s.size());
  out->assign(rank, 1);
  for (size_t d = 0; d < rank; ++d) {
    int64_t& o = (*out)[rank - 1 - d];
    for (auto s : shapes) {
      if (d >= s.size()) continue;
      const int64_t v = s[s.size() - 1 - d];
      if (v == o || v == 1) continue;
      if (o == 1) {
        o = v;
        continue;
      }
      std::string all;
      for (auto t : shapes) all += (all.empty() ? "" : " and ") + format_shape(t);
      return make_error(ErrorCode::kInvalidArgument, "{}: shapes {} cannot be broadcast",
                        op_key(op), all);
    }
  }
  return Status::ok();
}

DimArray broadcast_strides(const rt::Tensor& t, std::span<const int64_t> out_sizes) {
  DimArray st{};
  const size_t rank = out_sizes.size();
  const size_t tr = size_t(t.dim());
  for (size_t d = 0; d < tr && d < rank; ++d) {
    const size_t td = tr - 1 - d;
    const size_t od = rank - 1 - d;
    st[od] = t.sizes()[td] == 1 ? 0 : t.strides()[td];
  }
  return st;
}

DimArray strides_of(const rt::Tensor& t) {
  DimArray st{};
  for (size_t d = 0; d < t.strides().size() && d < st.size(); ++d) st[d] = t.strides()[d];
  return st;
}

bool is_contiguous_dim_order(std::span<const uint8_t> dim_order) {
  for (size_t i = 0; i < dim_order.size(); ++i) {
    if (dim_order[i] != i) return false;
  }
  return true;
}

}  // namespace hf2pte::kernels
