#include "runtime/method.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pte/pte_file.h"
#include "pte/program_generated.h"

namespace hf2pte::rt {

namespace {
std::atomic<uint64_t> g_max_planned_bytes{kDefaultMaxPlannedBytes};
std::atomic<int64_t> g_max_instructions{kMaxInstructions};
}  // namespace

void set_max_instructions(int64_t n) { g_max_instructions = n > 0 ? n : kMaxInstructions; }
int64_t max_instructions() { return g_max_instructions; }

void set_max_planned_bytes(uint64_t bytes) { g_max_planned_bytes = bytes ? bytes : kDefaultMaxPlannedBytes; }
uint64_t max_planned_bytes() { return g_max_planned_bytes; }

namespace fb = executorch_flatbuffer;

namespace {

// c10 codes of the TensorShapeDynamism enum (docs/pte-format.md §2).
constexpr int kDynamismStatic = 0;
constexpr int kDynamismBound = 1;
constexpr int kDynamismUnbound = 2;
// TensorDataLocation::EXTERNAL.
constexpr int kLocationExternal = 1;

/// a * b for sizes read from the file; false on overflow.
bool mul_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }

/// Bytes of a tensor of `sizes` and element size `esize`; nullopt on overflow
/// or a negative size.
std::optional<uint64_t> checked_nbytes(std::span<const int64_t> sizes, size_t esize) {
  uint64_t bytes = esize;
  for (int64_t s : sizes) {
    if (s < 0 || !mul_ok(bytes, uint64_t(s), &bytes)) return std::nullopt;
  }
  // Tensor::nbytes() is size_t; on 64-bit hosts this never triggers.
  if (bytes > std::numeric_limits<size_t>::max()) return std::nullopt;
  return bytes;
}

/// Copies between a dense row-major buffer and tensor memory laid out with
/// `strides` (in elements). `to_tensor` picks the direction.
void copy_strided(uint8_t* tensor, uint8_t* dense, std::span<const int64_t> sizes,
                  std::span<const int64_t> strides, size_t esize, bool to_tensor) {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  if (numel == 0) return;
  const size_t rank = sizes.size();
  std::vector<int64_t> index(rank, 0);
  for (int64_t n = 0; n < numel; ++n) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d) off += index[d] * strides[d];
    uint8_t* t = tensor + size_t(off) * esize;
    uint8_t* h = dense + size_t(n) * esize;
    if (to_tensor) {
      std::memcpy(t, h, esize);
    } else {
      std::memcpy(h, t, esize);
    }
    // Row-major increment of the multi-index.
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
}

template <typename V>
size_t vsize(const V* v) {
  return v ? v->size() : 0;
}

}  // namespace

PlanMethod::~PlanMethod() = default;

Result<std::unique_ptr<PlanMethod>> PlanMethod::load(std::shared_ptr<const pte::PteFile> file,
                                                     const fb::ExecutionPlan& plan,
                                                     const KernelRegistry& registry) {
  HF2PTE_CHECK_OR_RETURN(file != nullptr, kInvalidArgument, "no program file");
  std::unique_ptr<PlanMethod> m(new PlanMethod());
  m->file_ = std::move(file);
  HF2PTE_CHECK_OR_RETURN(plan.name() != nullptr, kInvalidProgram, "execution plan has no name");
  m->name_ = plan.name()->str();
  HF2PTE_RETURN_IF_ERROR(m->init(plan, registry));
  return m;
}

Status PlanMethod::error_in(Status st) const { return st.with_context("method " + name_); }

Status PlanMethod::init(const fb::ExecutionPlan& plan, const KernelRegistry& registry) {
  // Required vectors (docs/pte-format.md §2): null means the writer is broken.
  const char* missing = plan.values() == nullptr                   ? "values"
                        : plan.inputs() == nullptr                 ? "inputs"
                        : plan.outputs() == nullptr                ? "outputs"
                        : plan.non_const_buffer_sizes() == nullptr ? "non_const_buffer_sizes"
                        : plan.delegates() == nullptr              ? "delegates"
                        : plan.chains() == nullptr                 ? "chains"
                                                                   : nullptr;
  if (missing) return error_in(make_error(ErrorCode::kInvalidProgram, "execution plan has no {} vector", missing));
  if (plan.chains()->size() == 0) {
    return error_in(make_error(ErrorCode::kInvalidProgram, "execution plan has no chains"));
  }

  // Same order as ExecuTorch's Method::init: memory, values, delegates, instructions.
  HF2PTE_RETURN_IF_ERROR(allocate_arenas(plan));
  HF2PTE_RETURN_IF_ERROR(parse_values(plan));
  HF2PTE_RETURN_IF_ERROR(init_delegates(plan));
  HF2PTE_RETURN_IF_ERROR(parse_instructions(plan, registry));

  const size_t n_values = values_.size();
  for (size_t i = 0; i < plan.inputs()->size(); ++i) {
    const int32_t idx = plan.inputs()->Get(uint32_t(i));
    if (idx < 0 || size_t(idx) >= n_values) {
      return error_in(make_error(ErrorCode::kInvalidProgram, "input {} refers to value {}; the plan has {} values",
                                 i, idx, n_values));
    }
    Input in;
    in.value_idx = size_t(idx);
    in.meta = meta_of(in.value_idx);
    const EValue& v = values_[in.value_idx];
    in.is_tensor = v.is_tensor();
    if (in.is_tensor) {
      in.tensor = v.tensor;
      in.planned = v.tensor->raw_data() != nullptr || v.tensor->capacity_bytes() > 0;
      if (is_constant_[in.value_idx]) {
        return error_in(make_error(ErrorCode::kInvalidProgram, "input {} is a constant tensor (value {})", i, idx));
      }
    } else if (!v.is_scalar() && v.tag != Tag::kString && !v.is_none()) {
      return error_in(make_error(ErrorCode::kNotSupported, "input {} is a {}; only tensors and constants are supported",
                                 i, tag_name(v.tag)));
    }
    inputs_.push_back(std::move(in));
  }
  for (size_t i = 0; i < plan.outputs()->size(); ++i) {
    const int32_t idx = plan.outputs()->Get(uint32_t(i));
    if (idx < 0 || size_t(idx) >= n_values) {
      return error_in(make_error(ErrorCode::kInvalidProgram, "output {} refers to value {}; the plan has {} values",
                                 i, idx, n_values));
    }
    Output out;
    out.value_idx = size_t(idx);
    out.meta = meta_of(out.value_idx);
    const EValue& v = values_[out.value_idx];
    out.planned = !v.is_tensor() || v.tensor->raw_data() != nullptr || v.tensor->capacity_bytes() > 0 ||
                  std::any_of(inputs_.begin(), inputs_.end(), [&](const Input& in) { return in.value_idx == out.value_idx; });
    outputs_.push_back(std::move(out));
  }
  // Named mutable buffers: non-constant tensors with a fully qualified name
  // (the emitter's emit_mutable_buffer_names) that are neither inputs nor
  // outputs. Without allocation_info they are unplanned (alloc_mutable_buffers
  // = false) and the caller supplies their memory (docs/decisions.md).
  for (size_t v = 0; v < n_values; ++v) {
    const fb::Tensor* t = plan.values()->Get(uint32_t(v))->val_as_Tensor();
    if (t == nullptr || is_constant_[v] || t->extra_tensor_info() == nullptr) continue;
    const auto* fqn = t->extra_tensor_info()->fully_qualified_name();
    if (fqn == nullptr || fqn->size() == 0) continue;
    auto is_v = [v](const auto& io) { return io.value_idx == v; };
    if (std::any_of(inputs_.begin(), inputs_.end(), is_v) || std::any_of(outputs_.begin(), outputs_.end(), is_v)) continue;
    Buffer b;
    b.value_idx = v;
    const ValueMeta m = meta_of(v);
    b.meta.name = fqn->str();
    b.meta.dtype = m.dtype;
    b.meta.sizes = m.sizes;
    b.meta.nbytes = size_t(checked_nbytes(m.sizes, element_size(m.dtype)).value_or(0));
    b.meta.planned = t->allocation_info() != nullptr;
    b.meta.bound = b.meta.planned || b.meta.nbytes == 0;
    b.meta.rebindable = !b.meta.planned || !shares_planned_bytes(plan, v);
    buffers_.push_back(std::move(b));
  }
  mark_view_outputs();
  return Status::ok();
}

// A slice's out tensor may be a view of its input (no copy) when
//  - the chain has no control flow or moves (the readers are the instructions
//    that name the value, in order),
//  - the value is not a method input, output or mutable buffer,
//  - the sliced tensor is a mutable buffer whose bytes no other value shares
//    (an intermediate's planned bytes may be reused before the view is read),
//  - every instruction that reads it is a call of a delegate that takes
//    strided views, and
//  - nothing names the sliced tensor between the slice and its last reader
//    (so nothing writes it while the view is read).
// The written-span attention's per-layer K/V cache slices are the case: the
// decode step then reads the written rows of the cache in place.
void PlanMethod::mark_view_outputs() {
  auto names = [](const Instr& ins, const EValue* v) {
    for (const EValue* a : ins.args) {
      if (a == v || std::find(a->items.begin(), a->items.end(), v) != a->items.end()) return true;
    }
    return false;
  };
  auto is_io = [&](size_t v) {
    auto is_v = [v](const auto& io) { return io.value_idx == v; };
    return std::any_of(inputs_.begin(), inputs_.end(), is_v) || std::any_of(outputs_.begin(), outputs_.end(), is_v) ||
           std::any_of(buffers_.begin(), buffers_.end(), is_v);
  };
  for (auto& chain : chains_) {
    const bool straight = std::all_of(chain.begin(), chain.end(), [](const Instr& i) {
      return i.kind == InstrKind::kKernel || i.kind == InstrKind::kDelegate || i.kind == InstrKind::kFree;
    });
    if (!straight) continue;
    for (size_t pc = 0; pc < chain.size(); ++pc) {
      Instr& slice = chain[pc];
      if (slice.kind != InstrKind::kKernel || slice.op_name != "aten::slice_copy.Tensor_out" || slice.args.size() != 7) {
        continue;
      }
      const EValue* self = slice.args[0];
      const EValue* out = slice.args[5];
      if (!self->is_tensor() || !out->is_tensor() || self == out || is_io(size_t(out - values_.data()))) continue;
      // The sliced tensor's bytes must outlive the slice: a mutable buffer no
      // other planned value shares (an intermediate's bytes are reused).
      const size_t self_idx = size_t(self - values_.data());
      if (!std::any_of(buffers_.begin(), buffers_.end(),
                       [&](const Buffer& b) { return b.value_idx == self_idx && b.meta.rebindable; })) {
        continue;
      }
      size_t last = 0;
      bool ok = true;
      for (size_t q = pc + 1; q < chain.size() && ok; ++q) {
        const Instr& r = chain[q];
        if (r.kind == InstrKind::kFree) {
          ok = r.a != size_t(self - values_.data());
          continue;
        }
        if (!names(r, out)) continue;
        ok = r.kind == InstrKind::kDelegate && delegates_[r.delegate_idx].backend->takes_strided_views();
        last = q;
      }
      if (!ok || last == 0) continue;
      for (size_t q = pc + 1; q <= last && ok; ++q) ok = chain[q].kind == InstrKind::kFree || !names(chain[q], self);
      slice.output_may_view = ok;
    }
  }
}

namespace {

/// The planned byte range [begin, end) of tensor `t` in its arena, with its
/// memory id (nullopt for unplanned or malformed tensors; parse_tensor reports those).
struct PlannedRange {
  uint32_t id;
  uint64_t begin, end;
};
std::optional<PlannedRange> planned_range(const fb::Tensor* t) {
  if (t == nullptr || t->allocation_info() == nullptr || t->sizes() == nullptr) return std::nullopt;
  const int code = int(t->scalar_type());
  if (!is_known_scalar_type(code) || element_size(ScalarType(code)) == 0) return std::nullopt;
  if (t->sizes()->size() > size_t(kMaxTensorRank)) return std::nullopt;
  std::vector<int64_t> dims(t->sizes()->begin(), t->sizes()->end());
  if (std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d < 0; })) return std::nullopt;
  const auto nbytes = checked_nbytes(dims, element_size(ScalarType(code)));
  if (!nbytes) return std::nullopt;
  const uint64_t offset =
      (uint64_t(t->allocation_info()->memory_offset_high()) << 32) | t->allocation_info()->memory_offset_low();
  uint64_t end = 0;
  if (__builtin_add_overflow(offset, *nbytes, &end)) return std::nullopt;
  return PlannedRange{t->allocation_info()->memory_id(), offset, end};
}

}  // namespace

bool PlanMethod::shares_planned_bytes(const fb::ExecutionPlan& plan, size_t v) {
  const auto mine = planned_range(plan.values()->Get(uint32_t(v))->val_as_Tensor());
  if (!mine || mine->begin == mine->end) return true;  // nothing to move; refuse rather than guess
  for (uint32_t u = 0; u < plan.values()->size(); ++u) {
    if (u == v) continue;
    const fb::EValue* ev = plan.values()->Get(u);
    const auto other = planned_range(ev ? ev->val_as_Tensor() : nullptr);
    if (other && other->id == mine->id && other->begin < mine->end && mine->begin < other->end) return true;
  }
  return false;
}

namespace {

/// For each memory id, the furthest byte any planned tensor of the plan
/// reaches (offset + nbytes). Malformed tensors are skipped here; parse_tensor
/// reports them.
std::vector<uint64_t> planned_reach(const fb::ExecutionPlan& plan, size_t n_ids) {
  std::vector<uint64_t> reach(n_ids, 0);
  for (const fb::EValue* v : *plan.values()) {
    const auto r = planned_range(v ? v->val_as_Tensor() : nullptr);
    if (r && r->id != 0 && r->id < n_ids) reach[r->id] = std::max(reach[r->id], r->end);
  }
  return reach;
}

}  // namespace

Status PlanMethod::allocate_arenas(const fb::ExecutionPlan& plan) {
  const auto* sizes = plan.non_const_buffer_sizes();
  // Entry 0 is reserved (memory_id 0 = constants); arena j serves memory_id j+1.
  // The total is checked before anything is mapped: a hostile file cannot make
  // us reserve more than the cap (docs/decisions.md, "Planned memory cap").
  const uint64_t cap = max_planned_bytes();
  uint64_t total = 0;
  for (uint32_t i = 1; i < sizes->size(); ++i) {
    const int64_t n = sizes->Get(i);
    if (n < 0) {
      return error_in(make_error(ErrorCode::kInvalidProgram, "planned buffer {} has negative size {}", i, n));
    }
    if (__builtin_add_overflow(total, uint64_t(n), &total) || total > cap) {
      return error_in(make_error(ErrorCode::kOutOfRange,
                                 "planned buffers need more than the {} bytes allowed; buffer {} has {} bytes", cap,
                                 i, n));
    }
  }
  // Each arena is allocated only as large as the tensors placed in it reach
  // (the furthest offset + size among them): a file claiming a huge buffer
  // for small tensors costs nothing. Tensors are verified against the
  // claimed size later (parse_tensor), so a clamped arena still holds them all.
  const std::vector<uint64_t> reach = planned_reach(plan, sizes->size());
  for (uint32_t i = 1; i < sizes->size(); ++i) {
    const uint64_t justified = std::min<uint64_t>(uint64_t(sizes->Get(i)), reach[i]);
    auto buf = AlignedBuffer::allocate(size_t(justified));
    if (!buf) return error_in(buf.status().with_context(fmt::format("planned buffer {}", i)));
    arenas_.push_back(std::move(buf).value());
  }
  return Status::ok();
}

Status PlanMethod::parse_values(const fb::ExecutionPlan& plan) {
  const auto* fvalues = plan.values();
  const size_t n = fvalues->size();
  values_.resize(n);
  is_constant_.assign(n, 0);

  auto check_index = [&](int64_t idx, size_t v, const char* what) -> Status {
    if (idx < 0 || uint64_t(idx) >= n) {
      return make_error(ErrorCode::kInvalidProgram, "value {}: {} item refers to value {}; the plan has {} values", v,
                        what, idx, n);
    }
    return Status::ok();
  };

  for (size_t v = 0; v < n; ++v) {
    const fb::EValue* fv = fvalues->Get(uint32_t(v));
    HF2PTE_CHECK_OR_RETURN(fv != nullptr, kInvalidProgram, "value {} is null (method {})", v, name_);
    EValue& e = values_[v];
    if (fv->val_as_Null()) {
      e.tag = Tag::kNone;
    } else if (const auto* x = fv->val_as_Int()) {
      e = EValue::from_int(x->int_val());
    } else if (const auto* x = fv->val_as_Bool()) {
      e = EValue::from_bool(x->bool_val());
    } else if (const auto* x = fv->val_as_Double()) {
      e = EValue::from_double(x->double_val());
    } else if (const auto* x = fv->val_as_String()) {
      e.tag = Tag::kString;
      if (x->string_val()) e.s = std::string_view(x->string_val()->c_str(), x->string_val()->size());
    } else if (const auto* x = fv->val_as_Tensor()) {
      Status st = parse_tensor(v, x);
      if (!st) return error_in(st.with_context(fmt::format("value {}", v)));
    } else if (const auto* x = fv->val_as_IntList()) {
      HF2PTE_CHECK_OR_RETURN(x->items() != nullptr, kInvalidProgram, "value {}: IntList has no items (method {})", v,
                             name_);
      e.tag = Tag::kIntList;
      for (int64_t idx : *x->items()) {
        HF2PTE_RETURN_IF_ERROR(error_in(check_index(idx, v, "IntList")));
        e.items.push_back(&values_[size_t(idx)]);
      }
    } else if (const auto* x = fv->val_as_DoubleList()) {
      HF2PTE_CHECK_OR_RETURN(x->items() != nullptr, kInvalidProgram, "value {}: DoubleList has no items (method {})",
                             v, name_);
      e.tag = Tag::kDoubleList;
      e.doubles.assign(x->items()->begin(), x->items()->end());
    } else if (const auto* x = fv->val_as_BoolList()) {
      HF2PTE_CHECK_OR_RETURN(x->items() != nullptr, kInvalidProgram, "value {}: BoolList has no items (method {})", v,
                             name_);
      e.tag = Tag::kBoolList;
      for (auto b : *x->items()) e.bools.push_back(b ? 1 : 0);
    } else if (const auto* x = fv->val_as_TensorList()) {
      HF2PTE_CHECK_OR_RETURN(x->items() != nullptr, kInvalidProgram, "value {}: TensorList has no items (method {})",
                             v, name_);
      e.tag = Tag::kTensorList;
      for (int32_t idx : *x->items()) {
        HF2PTE_RETURN_IF_ERROR(error_in(check_index(idx, v, "TensorList")));
        e.items.push_back(&values_[size_t(idx)]);
      }
    } else if (const auto* x = fv->val_as_OptionalTensorList()) {
      HF2PTE_CHECK_OR_RETURN(x->items() != nullptr, kInvalidProgram,
                             "value {}: OptionalTensorList has no items (method {})", v, name_);
      e.tag = Tag::kOptionalTensorList;
      for (int32_t idx : *x->items()) {
        if (idx == -1) {
          e.items.push_back(nullptr);
          continue;
        }
        HF2PTE_RETURN_IF_ERROR(error_in(check_index(idx, v, "OptionalTensorList")));
        e.items.push_back(&values_[size_t(idx)]);
      }
    } else {
      return error_in(make_error(ErrorCode::kInvalidProgram, "value {} has unknown type {}", v, int(fv->val_type())));
    }
  }

  // List items may refer forward, so their element types are checked once
  // every value is parsed.
  for (size_t v = 0; v < n; ++v) {
    const EValue& e = values_[v];
    for (size_t k = 0; k < e.items.size(); ++k) {
      const EValue* item = e.items[k];
      bool ok = true;
      switch (e.tag) {
        case Tag::kIntList: ok = item->is_int(); break;
        case Tag::kTensorList: ok = item->is_tensor(); break;
        case Tag::kOptionalTensorList: ok = item == nullptr || item->is_tensor() || item->is_none(); break;
        default: break;
      }
      if (!ok) {
        return error_in(make_error(ErrorCode::kInvalidProgram, "value {}: item {} of {} is a {} (value {})", v, k,
                                   tag_name(e.tag), tag_name(item->tag), item - values_.data()));
      }
    }
  }
  return Status::ok();
}

Status PlanMethod::parse_tensor(size_t idx, const void* fb_tensor) {
  const auto& t = *static_cast<const fb::Tensor*>(fb_tensor);

  const int code = int(t.scalar_type());
  HF2PTE_CHECK_OR_RETURN(is_known_scalar_type(code) && element_size(ScalarType(code)) != 0, kNotSupported,
                         "tensor has unsupported scalar type {}", code);
  const ScalarType dtype = ScalarType(code);
  const size_t esize = element_size(dtype);

  HF2PTE_CHECK_OR_RETURN(t.storage_offset() == 0, kInvalidProgram, "tensor storage_offset must be 0, got {}",
                         t.storage_offset());
  const int dyn = int(t.shape_dynamism());
  HF2PTE_CHECK_OR_RETURN(dyn != kDynamismUnbound, kNotSupported, "DYNAMIC_UNBOUND tensors are not supported");
  HF2PTE_CHECK_OR_RETURN(dyn == kDynamismStatic || dyn == kDynamismBound, kInvalidProgram,
                         "tensor has unknown shape_dynamism {}", dyn);
  if (t.extra_tensor_info() && int(t.extra_tensor_info()->location()) == kLocationExternal) {
    return make_error(ErrorCode::kNotSupported, "tensor data in an external .ptd file is not supported");
  }

  HF2PTE_CHECK_OR_RETURN(t.sizes() != nullptr, kInvalidProgram, "tensor has no sizes");
  const size_t rank = t.sizes()->size();
  HF2PTE_CHECK_OR_RETURN(rank <= size_t(kMaxTensorRank), kInvalidProgram, "tensor rank {} exceeds the maximum of {}",
                         rank, kMaxTensorRank);
  std::vector<int64_t> sizes(t.sizes()->begin(), t.sizes()->end());
  for (int64_t s : sizes) {
    HF2PTE_CHECK_OR_RETURN(s >= 0, kInvalidProgram, "tensor has negative size in [{}]", fmt::join(sizes, ", "));
  }

  // dim_order must be a permutation of 0..rank-1. A rank-0 tensor may omit it.
  std::vector<uint8_t> dim_order;
  if (t.dim_order() != nullptr) {
    dim_order.assign(t.dim_order()->begin(), t.dim_order()->end());
  } else {
    HF2PTE_CHECK_OR_RETURN(rank == 0, kInvalidProgram, "tensor has no dim_order");
  }
  HF2PTE_CHECK_OR_RETURN(dim_order.size() == rank, kInvalidProgram, "tensor dim_order has {} entries for rank {}",
                         dim_order.size(), rank);
  {
    uint32_t seen = 0;  // rank <= 16, so a bitmask suffices
    for (uint8_t d : dim_order) {
      HF2PTE_CHECK_OR_RETURN(d < rank && !(seen & (1u << d)), kInvalidProgram,
                             "tensor dim_order [{}] is not a permutation of 0..{}", fmt::join(dim_order, ", "),
                             rank == 0 ? 0 : rank - 1);
      seen |= 1u << d;
    }
  }

  const auto nbytes_opt = checked_nbytes(sizes, esize);
  HF2PTE_CHECK_OR_RETURN(nbytes_opt.has_value(), kInvalidProgram, "tensor of shape [{}] and type {} overflows",
                         fmt::join(sizes, ", "), scalar_type_name(dtype));
  const size_t nbytes = size_t(*nbytes_opt);

  void* data = nullptr;
  size_t capacity = 0;
  const uint32_t buffer_idx = t.data_buffer_idx();
  if (const auto* alloc = t.allocation_info()) {
    // Planned: arena memory_id - 1 at the given offset (memory_id 0 is reserved).
    const uint32_t mem_id = alloc->memory_id();
    HF2PTE_CHECK_OR_RETURN(mem_id >= 1 && mem_id <= arenas_.size(), kInvalidProgram,
                           "tensor memory_id {} is out of range; the plan has {} planned buffers (ids 1..{})", mem_id,
                           arenas_.size(), arenas_.size());
    const uint64_t offset = (uint64_t(alloc->memory_offset_high()) << 32) | alloc->memory_offset_low();
    AlignedBuffer& arena = arenas_[mem_id - 1];
    uint64_t end = 0;
    HF2PTE_CHECK_OR_RETURN(!__builtin_add_overflow(offset, uint64_t(nbytes), &end) && end <= arena.size(),
                           kInvalidProgram,
                           "tensor of {} bytes at offset {} exceeds planned buffer {} of {} bytes", nbytes, offset,
                           mem_id, arena.size());
    data = arena.data() ? arena.data() + offset : nullptr;
    capacity = nbytes;
    if (buffer_idx > 0) {
      // Mutable buffer with an initial value (e.g. a registered buffer the
      // model updates in place): copied once at load, then owned by the arena.
      HF2PTE_ASSIGN_OR_RETURN(auto init, file_->mutable_data(buffer_idx, nbytes));
      HF2PTE_CHECK_OR_RETURN(init.size() >= nbytes, kInvalidProgram,
                             "mutable data {} has {} bytes; the tensor needs {}", buffer_idx, init.size(), nbytes);
      if (nbytes > 0) std::memcpy(data, init.data(), nbytes);
    }
  } else if (buffer_idx > 0) {
    HF2PTE_ASSIGN_OR_RETURN(auto bytes, file_->constant_data(buffer_idx, nbytes));
    HF2PTE_CHECK_OR_RETURN(bytes.size() >= nbytes, kInvalidProgram,
                           "constant {} has {} bytes; the tensor needs {}", buffer_idx, bytes.size(), nbytes);
    // The mapping is read-only; kernels must never write constants (load
    // rejects instructions whose result slot is one).
    data = const_cast<uint8_t*>(bytes.data());
    if (weight_placement() == WeightPlacement::kHugePages && nbytes >= kHugePageMinBytes) {
      // weight_store.h: one copy in huge pages, the file's pages given back.
      HF2PTE_ASSIGN_OR_RETURN(WeightBlock block, allocate_weights(nbytes));
      std::memcpy(block.data, bytes.data(), nbytes);
      file_->release_pages(bytes.first(nbytes));
      data = static_cast<uint8_t*>(block.data);
      huge_constants_.push_back(std::move(block));
    }
    capacity = nbytes;
    is_constant_[idx] = 1;
  }
  // else: unplanned, null until an input is set (or a delegate fills it).

  tensors_.push_back(std::make_unique<Tensor>(dtype, std::move(sizes), std::move(dim_order), data, capacity,
                                              ShapeDynamism(dyn)));
  EValue& e = values_[idx];
  e.tag = Tag::kTensor;
  e.tensor = tensors_.back().get();
  return Status::ok();
}

Status PlanMethod::init_delegates(const fb::ExecutionPlan& plan) {
  const auto* delegates = plan.delegates();
  for (uint32_t i = 0; i < delegates->size(); ++i) {
    const std::string where = fmt::format("method {}, delegate {}", name_, i);
    const fb::BackendDelegate* d = delegates->Get(i);
    HF2PTE_CHECK_OR_RETURN(d != nullptr && d->id() != nullptr, kInvalidProgram, "delegate has no backend id ({})",
                           where);
    const std::string id = d->id()->str();
    auto backend = find_backend(id);
    if (!backend || !backend->is_available()) {
      return make_error(ErrorCode::kNotSupported, "backend {} is not available ({})", id, where);
    }
    HF2PTE_CHECK_OR_RETURN(d->processed() != nullptr, kInvalidProgram, "delegate has no payload reference ({})",
                           where);
    auto payload = file_->delegate_data(*d->processed());
    if (!payload) return payload.status().with_context(where);

    std::vector<CompileSpec> specs;
    if (d->compile_specs()) {
      for (const fb::CompileSpec* cs : *d->compile_specs()) {
        HF2PTE_CHECK_OR_RETURN(cs != nullptr, kInvalidProgram, "null compile spec ({})", where);
        CompileSpec spec;
        if (cs->key()) spec.key = std::string_view(cs->key()->c_str(), cs->key()->size());
        if (cs->value()) spec.value = std::span<const uint8_t>(cs->value()->data(), cs->value()->size());
        specs.push_back(spec);
      }
    }
    BackendInitContext ctx{file_.get(), name_, i};
    auto handle = backend->init(ctx, *payload, specs);
    if (!handle) return handle.status().with_context(where + ", backend " + id);
    delegates_.push_back(Delegate{std::move(backend), std::move(handle).value()});
  }
  return Status::ok();
}

Status PlanMethod::parse_instructions(const fb::ExecutionPlan& plan, const KernelRegistry& registry) {
  const size_t n_values = values_.size();
  const auto* ops = plan.operators();
  const size_t n_ops = vsize(ops);
  std::vector<std::string> missing;  // in first-use order, deduplicated
  // op_index -> index into kernels_ (SIZE_MAX: not resolved yet).
  std::vector<size_t> kernel_of_op(n_ops, SIZE_MAX);

  const bool many_chains = plan.chains()->size() > 1;
  for (uint32_t c = 0; c < plan.chains()->size(); ++c) {
    const fb::Chain* chain = plan.chains()->Get(c);
    HF2PTE_CHECK_OR_RETURN(chain != nullptr && chain->instructions() != nullptr, kInvalidProgram,
                           "chain {} has no instructions vector (method {})", c, name_);
    const auto* instrs = chain->instructions();
    const size_t n_instr = instrs->size();
    std::vector<Instr> out;
    out.reserve(n_instr);
    for (uint32_t pc = 0; pc < n_instr; ++pc) {
      const std::string where = many_chains ? fmt::format("method {}, chain {}, instruction {}", name_, c, pc)
                                            : fmt::format("method {}, instruction {}", name_, pc);
      auto bad = [&](std::string what) { return Status(ErrorCode::kInvalidProgram, what).with_context(where); };
      auto value_idx = [&](int64_t idx, const char* what, size_t* out_idx) -> Status {
        if (idx < 0 || uint64_t(idx) >= n_values) {
          return bad(fmt::format("{} refers to value {}; the plan has {} values", what, idx, n_values));
        }
        *out_idx = size_t(idx);
        return Status::ok();
      };
      auto arg_list = [&](const flatbuffers::Vector<int32_t>* args, Instr& ins) -> Status {
        if (args == nullptr) return bad("call has no args vector");
        for (uint32_t k = 0; k < args->size(); ++k) {
          size_t vi = 0;
          HF2PTE_RETURN_IF_ERROR(value_idx(args->Get(k), fmt::format("argument {}", k).c_str(), &vi));
          ins.args.push_back(&values_[vi]);
        }
        return Status::ok();
      };

      const fb::Instruction* fi = instrs->Get(pc);
      if (fi == nullptr) return bad("instruction is null");
      Instr ins;
      if (const auto* kc = fi->instr_args_as_KernelCall()) {
        ins.kind = InstrKind::kKernel;
        const int32_t op = kc->op_index();
        if (op < 0 || size_t(op) >= n_ops) {
          return bad(fmt::format("op_index {} is out of range; the plan has {} operators", op, n_ops));
        }
        const fb::Operator* fop = ops->Get(uint32_t(op));
        if (fop == nullptr || fop->name() == nullptr) return bad(fmt::format("operator {} has no name", op));
        ins.op_name = fop->name()->str();
        if (fop->overload() && fop->overload()->size() > 0) ins.op_name += "." + fop->overload()->str();
        HF2PTE_RETURN_IF_ERROR(arg_list(kc->args(), ins));
        // The return slot (last arg) is written by the kernel; a constant there
        // would be a write into the read-only file mapping.
        if (!ins.args.empty()) {
          const EValue* ret = ins.args.back();
          std::vector<const EValue*> outs{ret};
          if (ret->tag == Tag::kTensorList) outs.assign(ret->items.begin(), ret->items.end());
          for (const EValue* o : outs) {
            const size_t oi = size_t(o - values_.data());
            if (is_constant_[oi]) {
              return bad(fmt::format("{} writes its result into constant tensor value {}", ins.op_name, oi));
            }
          }
        }
        if (kernel_of_op[size_t(op)] == SIZE_MAX) {
          // An empty std::function would throw when called: treat it as missing.
          if (const KernelFn* fn = registry.find(ins.op_name); fn != nullptr && *fn) {
            kernel_of_op[size_t(op)] = kernels_.size();
            kernels_.push_back(*fn);
          } else if (std::find(missing.begin(), missing.end(), ins.op_name) == missing.end()) {
            missing.push_back(ins.op_name);
          }
        }
        ins.kernel_idx = kernel_of_op[size_t(op)];
      } else if (const auto* dc = fi->instr_args_as_DelegateCall()) {
        ins.kind = InstrKind::kDelegate;
        const int32_t di = dc->delegate_index();
        if (di < 0 || size_t(di) >= delegates_.size()) {
          return bad(fmt::format("delegate_index {} is out of range; the plan has {} delegates", di,
                                 delegates_.size()));
        }
        ins.delegate_idx = size_t(di);
        ins.op_name = plan.delegates()->Get(uint32_t(di))->id()->str();
        HF2PTE_RETURN_IF_ERROR(arg_list(dc->args(), ins));
      } else if (const auto* mc = fi->instr_args_as_MoveCall()) {
        ins.kind = InstrKind::kMove;
        HF2PTE_RETURN_IF_ERROR(value_idx(mc->move_from(), "move_from", &ins.a));
        HF2PTE_RETURN_IF_ERROR(value_idx(mc->move_to(), "move_to", &ins.b));
      } else if (const auto* jc = fi->instr_args_as_JumpFalseCall()) {
        ins.kind = InstrKind::kJumpFalse;
        HF2PTE_RETURN_IF_ERROR(value_idx(jc->cond_value_index(), "cond_value_index", &ins.a));
        const int32_t dest = jc->destination_instruction();
        if (dest < 0 || size_t(dest) >= n_instr) {
          return bad(fmt::format("jump destination {} is out of range; the chain has {} instructions", dest,
                                 n_instr));
        }
        ins.b = size_t(dest);
      } else if (const auto* fc = fi->instr_args_as_FreeCall()) {
        ins.kind = InstrKind::kFree;
        HF2PTE_RETURN_IF_ERROR(value_idx(fc->value_index(), "value_index", &ins.a));
      } else {
        return bad(fmt::format("unknown instruction type {}", int(fi->instr_args_type())));
      }
      out.push_back(std::move(ins));
    }
    chains_.push_back(std::move(out));
  }

  if (!missing.empty()) {
    return make_error(ErrorCode::kNotFound, "operator not found: {}", fmt::join(missing, ", "))
        .with_context("method " + name_);
  }
  return Status::ok();
}

ValueMeta PlanMethod::meta_of(size_t value_idx) const {
  ValueMeta m;
  const EValue& v = values_[value_idx];
  m.tag = v.tag;
  if (v.is_tensor()) {
    m.dtype = v.tensor->dtype();
    m.sizes.assign(v.tensor->sizes().begin(), v.tensor->sizes().end());
    m.dynamism = v.tensor->dynamism();
  }
  return m;
}

ValueMeta PlanMethod::input_meta(size_t i) const { return i < inputs_.size() ? inputs_[i].meta : ValueMeta{}; }

ValueMeta PlanMethod::output_meta(size_t i) const { return i < outputs_.size() ? outputs_[i].meta : ValueMeta{}; }

Status PlanMethod::set_input(size_t i, const HostTensor& h) {
  HF2PTE_CHECK_OR_RETURN(i < inputs_.size(), kInvalidArgument, "input {} is out of range; method {} has {} inputs", i,
                         name_, inputs_.size());
  Input& in = inputs_[i];
  if (!in.is_tensor) {
    return error_in(make_error(ErrorCode::kInvalidArgument,
                               "input {} is a constant {} baked into the program; it cannot be set", i,
                               tag_name(in.meta.tag)));
  }
  Tensor& t = *in.tensor;
  const ValueMeta& meta = in.meta;
  if (h.dtype != meta.dtype) {
    return error_in(make_error(ErrorCode::kInvalidArgument, "input {} has wrong dtype; expected {}, got {}", i,
                               scalar_type_name(meta.dtype), scalar_type_name(h.dtype)));
  }
  if (h.sizes.size() != meta.sizes.size()) {
    return error_in(make_error(ErrorCode::kInvalidArgument,
                               "input {} has wrong rank; expected {} (shape [{}]), got {} (shape [{}])", i,
                               meta.sizes.size(), fmt::join(meta.sizes, ", "), h.sizes.size(),
                               fmt::join(h.sizes, ", ")));
  }
  const size_t esize = element_size(meta.dtype);
  const auto nbytes = checked_nbytes(h.sizes, esize);
  if (!nbytes) {
    return error_in(make_error(ErrorCode::kInvalidArgument, "input {} has invalid shape [{}]", i,
                               fmt::join(h.sizes, ", ")));
  }
  if (h.bytes.size() != *nbytes) {
    return error_in(make_error(ErrorCode::kInvalidArgument, "input {} has {} bytes; shape [{}] of {} needs {}", i,
                               h.bytes.size(), fmt::join(h.sizes, ", "), scalar_type_name(h.dtype), *nbytes));
  }
  // Planned capacity = bytes of the planned (upper-bound) shape.
  const size_t planned_bytes = size_t(*checked_nbytes(meta.sizes, esize));
  if (meta.dynamism == ShapeDynamism::kStatic) {
    if (h.sizes != meta.sizes) {
      return error_in(make_error(ErrorCode::kInvalidArgument, "input {} shape [{}] does not match the static shape [{}]",
                                 i, fmt::join(h.sizes, ", "), fmt::join(meta.sizes, ", ")));
    }
  } else if (*nbytes > planned_bytes) {
    return error_in(make_error(ErrorCode::kOutOfRange, "input {} shape [{}] exceeds the planned bound [{}]", i,
                               fmt::join(h.sizes, ", "), fmt::join(meta.sizes, ", ")));
  }

  if (!in.planned && planned_bytes > max_planned_bytes()) {
    return error_in(make_error(ErrorCode::kOutOfRange, "input {} is planned for {} bytes; more than the {} bytes allowed",
                               i, planned_bytes, max_planned_bytes()));
  }
  if (!in.planned && in.storage.size() < planned_bytes) {
    // Unplanned input: the Method keeps its own copy (the caller's HostTensor
    // need not outlive this call). Sized for the bound so later calls reuse it.
    auto buf = AlignedBuffer::allocate(planned_bytes);
    if (!buf) return error_in(buf.status().with_context(fmt::format("input {}", i)));
    in.storage = std::move(buf).value();
    t.set_data(in.storage.data(), in.storage.size());
  }
  Status st = t.resize(h.sizes);
  if (!st) return error_in(st.with_context(fmt::format("input {}", i)));
  if (*nbytes > 0) {
    auto* dst = static_cast<uint8_t*>(t.raw_data());
    if (dst == nullptr) {
      return error_in(make_error(ErrorCode::kInternal, "input {} has no memory", i));
    }
    if (t.is_contiguous()) {
      std::memcpy(dst, h.bytes.data(), *nbytes);
    } else {
      copy_strided(dst, const_cast<uint8_t*>(h.bytes.data()), t.sizes(), t.strides(), esize, /*to_tensor=*/true);
    }
  }
  in.set = true;
  return Status::ok();
}

/// Bytes of `meta`'s planned (upper-bound) shape.
static size_t planned_nbytes(const ValueMeta& meta) {
  return size_t(checked_nbytes(meta.sizes, element_size(meta.dtype)).value_or(0));
}

Status PlanMethod::set_output_buffer(size_t i, void* data, size_t capacity_bytes) {
  HF2PTE_CHECK_OR_RETURN(i < outputs_.size(), kInvalidArgument, "output {} is out of range; method {} has {} outputs",
                         i, name_, outputs_.size());
  Output& out = outputs_[i];
  if (out.planned) {
    return error_in(make_error(ErrorCode::kInvalidArgument, "output {} is planned by the program; it cannot be bound", i));
  }
  const size_t need = planned_nbytes(out.meta);
  if (capacity_bytes < need || (data == nullptr && need > 0)) {
    return error_in(make_error(ErrorCode::kInvalidArgument, "output {} needs a buffer of {} bytes, got {}", i, need,
                               data == nullptr ? 0 : capacity_bytes));
  }
  values_[out.value_idx].tensor->set_data(data, capacity_bytes);
  out.storage = AlignedBuffer();
  out.bound = true;
  return Status::ok();
}

MutableBufferMeta PlanMethod::mutable_buffer_meta(size_t i) const {
  return i < buffers_.size() ? buffers_[i].meta : MutableBufferMeta{};
}

Status PlanMethod::set_mutable_buffer(size_t i, void* data, size_t capacity_bytes) {
  HF2PTE_CHECK_OR_RETURN(i < buffers_.size(), kInvalidArgument,
                         "mutable buffer {} is out of range; method {} has {} mutable buffers", i, name_,
                         buffers_.size());
  Buffer& b = buffers_[i];
  if (!b.meta.rebindable) {
    return error_in(make_error(ErrorCode::kInvalidArgument,
                               "mutable buffer {} ({}) shares planned memory with other values; it cannot be bound",
                               i, b.meta.name));
  }
  if (data == nullptr || capacity_bytes < b.meta.nbytes) {
    return error_in(make_error(ErrorCode::kInvalidArgument, "mutable buffer {} ({}) needs a buffer of {} bytes, got {}",
                               i, b.meta.name, b.meta.nbytes, data == nullptr ? 0 : capacity_bytes));
  }
  // Kernels read the memory as the buffer's element type.
  const size_t align = element_size(b.meta.dtype);
  if (reinterpret_cast<uintptr_t>(data) % align != 0) {
    return error_in(make_error(ErrorCode::kInvalidArgument,
                               "mutable buffer {} ({}) needs memory aligned to {} bytes; the address is not", i,
                               b.meta.name, align));
  }
  values_[b.value_idx].tensor->set_data(data, capacity_bytes);
  b.meta.bound = true;
  return Status::ok();
}

Result<std::vector<AlignedBuffer>> bind_zeroed_mutable_buffers(Method& m) {
  std::vector<AlignedBuffer> owned;
  for (size_t i = 0; i < m.num_mutable_buffers(); ++i) {
    const MutableBufferMeta meta = m.mutable_buffer_meta(i);
    if (meta.planned || meta.bound) continue;
    if (meta.nbytes > max_planned_bytes()) {
      return make_error(ErrorCode::kOutOfRange, "mutable buffer {} ({}) needs {} bytes; more than the {} bytes allowed",
                        i, meta.name, meta.nbytes, max_planned_bytes())
          .with_context("method " + m.name());
    }
    HF2PTE_ASSIGN_OR_RETURN(AlignedBuffer buf, AlignedBuffer::allocate(meta.nbytes));  // zero-filled
    HF2PTE_RETURN_IF_ERROR(m.set_mutable_buffer(i, buf.data(), buf.size()));
    owned.push_back(std::move(buf));
  }
  return owned;
}

Status PlanMethod::execute() {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (inputs_[i].is_tensor && !inputs_[i].set) {
      return error_in(make_error(ErrorCode::kInvalidArgument, "input {} was not set before execute()", i));
    }
  }
  // Unplanned mutable buffers hold state only the caller can supply: never
  // run with one missing (a kernel would read or write through null).
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (!buffers_[i].meta.bound) {
      return error_in(make_error(ErrorCode::kInvalidArgument,
                                 "mutable buffer {} ({}) is unplanned and has no memory; bind {} bytes with "
                                 "set_mutable_buffer before execute",
                                 i, buffers_[i].meta.name, buffers_[i].meta.nbytes));
    }
  }
  // Unplanned outputs the caller did not bind get Method-owned memory, once.
  for (size_t i = 0; i < outputs_.size(); ++i) {
    Output& out = outputs_[i];
    if (out.planned || out.bound) continue;
    const size_t need = planned_nbytes(out.meta);
    if (need > max_planned_bytes()) {
      return error_in(make_error(ErrorCode::kOutOfRange, "output {} needs {} bytes; more than the {} bytes allowed", i,
                                 need, max_planned_bytes()));
    }
    auto buf = AlignedBuffer::allocate(need);
    if (!buf) return error_in(buf.status().with_context(fmt::format("output {}", i)));
    out.storage = std::move(buf).value();
    values_[out.value_idx].tensor->set_data(out.storage.data(), out.storage.size());
    out.bound = true;
  }
  const int64_t limit = max_instructions();
  int64_t budget = limit;
  for (size_t c = 0; c < chains_.size(); ++c) {
    const auto& chain = chains_[c];
    size_t pc = 0;
    while (pc < chain.size()) {
      if (--budget < 0) {
        return error_in(make_error(ErrorCode::kInvalidProgram,
                                   "instruction budget of {} exceeded; the program does not terminate",
                                   limit));
      }
      size_t next = pc + 1;
      HF2PTE_RETURN_IF_ERROR(execute_instruction(c, pc, chain[pc], &next));
      pc = next;
    }
  }
  return Status::ok();
}

Status PlanMethod::execute_instruction(size_t chain, size_t pc, const Instr& ins, size_t* next_pc) {
  auto where = [&]() {
    std::string w = chains_.size() > 1 ? fmt::format("method {}, chain {}, instruction {}", name_, chain, pc)
                                       : fmt::format("method {}, instruction {}", name_, pc);
    if (!ins.op_name.empty()) w += ", " + ins.op_name;
    return w;
  };
  switch (ins.kind) {
    case InstrKind::kKernel: {
      // A tensor with bytes but no memory (an unplanned value nobody filled, or
      // one a FreeCall released) would make the kernel dereference null.
      for (size_t k = 0; k < ins.args.size(); ++k) {
        const EValue* a = ins.args[k];
        auto unbacked = [](const EValue* v) {
          return v && v->is_tensor() && v->tensor->raw_data() == nullptr &&
                 (v->tensor->nbytes() > 0 || v->tensor->capacity_bytes() > 0);
        };
        bool bad = unbacked(a);
        for (const EValue* item : a->items) bad = bad || unbacked(item);
        if (bad) {
          return make_error(ErrorCode::kInvalidProgram, "argument {} (value {}) is a tensor without memory", k,
                            a - values_.data())
              .with_context(where());
        }
      }
      KernelContext ctx{ins.op_name};
      ctx.output_may_view = ins.output_may_view;
      std::span<EValue*> args(const_cast<EValue**>(ins.args.data()), ins.args.size());
      Status st = kernels_[ins.kernel_idx](ctx, args);
      if (!st) return st.with_context(where());
      return Status::ok();
    }
    case InstrKind::kDelegate: {
      const Delegate& d = delegates_[ins.delegate_idx];
      std::span<EValue*> args(const_cast<EValue**>(ins.args.data()), ins.args.size());
      Status st = d.backend->execute(*d.handle, args);
      if (!st) return st.with_context(where());
      return Status::ok();
    }
    case InstrKind::kMove:
      values_[ins.b] = values_[ins.a];
      return Status::ok();
    case InstrKind::kJumpFalse: {
      const EValue& cond = values_[ins.a];
      bool value = false;
      if (cond.is_bool()) {
        value = cond.i != 0;
      } else if (cond.is_tensor() && cond.tensor->dtype() == ScalarType::kBool) {
        const Tensor& t = *cond.tensor;
        if (t.numel() > 0 && t.raw_data() == nullptr) {
          return make_error(ErrorCode::kInvalidProgram, "condition tensor has no memory").with_context(where());
        }
        // Every element lies in the first numel bytes whatever the dim order,
        // since planned tensors are dense.
        const auto* p = t.data<uint8_t>();
        value = std::all_of(p, p + t.numel(), [](uint8_t b) { return b != 0; });
      } else {
        return make_error(ErrorCode::kInvalidProgram, "JumpFalseCall condition (value {}) is {}, expected Bool",
                          ins.a, cond.is_tensor() ? "a non-bool Tensor" : tag_name(cond.tag))
            .with_context(where());
      }
      if (!value) *next_pc = ins.b;
      return Status::ok();
    }
    case InstrKind::kFree: {
      EValue& v = values_[ins.a];
      if (!v.is_tensor()) {
        return make_error(ErrorCode::kInvalidProgram, "FreeCall on value {} which is {}, not a Tensor", ins.a,
                          tag_name(v.tag))
            .with_context(where());
      }
      v.tensor->set_data(nullptr, 0);
      return Status::ok();
    }
  }
  return make_error(ErrorCode::kInternal, "unknown instruction kind").with_context(where());
}

Result<HostTensor> PlanMethod::output_tensor(size_t i) const {
  HF2PTE_CHECK_OR_RETURN(i < outputs_.size(), kInvalidArgument, "output {} is out of range; method {} has {} outputs",
                         i, name_, outputs_.size());
  const EValue& v = values_[outputs_[i].value_idx];
  if (!v.is_tensor()) {
    return error_in(make_error(ErrorCode::kInvalidArgument, "output {} is {}, not a tensor", i, tag_name(v.tag)));
  }
  const Tensor& t = *v.tensor;
  HostTensor h;
  h.dtype = t.dtype();
  h.sizes.assign(t.sizes().begin(), t.sizes().end());
  h.bytes.resize(t.nbytes());
  if (h.bytes.empty()) return h;
  if (t.raw_data() == nullptr) {
    return error_in(make_error(ErrorCode::kInvalidProgram, "output {} (value {}) has no memory", i,
                               outputs_[i].value_idx));
  }
  if (t.is_contiguous()) {
    std::memcpy(h.bytes.data(), t.raw_data(), h.bytes.size());
  } else {
    copy_strided(const_cast<uint8_t*>(t.data<uint8_t>()), h.bytes.data(), t.sizes(), t.strides(),
                 element_size(t.dtype()), /*to_tensor=*/false);
  }
  return h;
}

const EValue& PlanMethod::output(size_t i) const {
  static const EValue kNone;
  return i < outputs_.size() ? values_[outputs_[i].value_idx] : kNone;
}

}  // namespace hf2pte::rt
