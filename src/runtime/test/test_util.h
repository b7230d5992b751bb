// Shared helpers for runtime tests: tiny local kernels (so these tests do not
// depend on src/kernels/portable), conformance file paths, and a builder for
// hand-made ProgramT trees.
#pragma once

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pte/program_generated.h"
#include "pte/pte_file.h"
#include "pte/pte_writer.h"
#include "runtime/kernel.h"
#include "runtime/program.h"

namespace hf2pte::rt::test {

namespace efb = executorch_flatbuffer;

/// Path of an upstream ExecuTorch 1.3.1 conformance file (tests/data/conformance/).
inline std::string conformance_path(const std::string& name) {
  return std::string(HF2PTE_SOURCE_DIR) + "/tests/data/conformance/" + name;
}

/// aten::add.out(self, other, *, alpha, out) -> ret for f32/i64 of one dtype;
/// a one-element operand broadcasts.
inline Status test_add_out(KernelContext& ctx, std::span<EValue*> args) {
  HF2PTE_CHECK_OR_RETURN(args.size() == 5, kInvalidProgram, "add.out expects 5 args, got {}", args.size());
  HF2PTE_ASSIGN_OR_RETURN(Tensor * a, arg_tensor(args[0], "argument 'self' of aten::add.out"));
  HF2PTE_ASSIGN_OR_RETURN(Tensor * b, arg_tensor(args[1], "argument 'other' of aten::add.out"));
  HF2PTE_ASSIGN_OR_RETURN(double alpha, arg_double(args[2], "argument 'alpha' of aten::add.out"));
  HF2PTE_ASSIGN_OR_RETURN(Tensor * out, arg_tensor(args[3], "argument 'out' of aten::add.out"));
  HF2PTE_CHECK_OR_RETURN(a->dtype() == b->dtype() && a->dtype() == out->dtype(), kNotSupported,
                         "test add.out needs one dtype");
  const Tensor* shape = a->numel() == 1 && b->numel() != 1 ? b : a;
  HF2PTE_RETURN_IF_ERROR(out->resize(shape->sizes()));
  const int64_t n = out->numel();
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const T* pa = a->data<T>();
    const T* pb = b->data<T>();
    T* po = out->data<T>();
    for (int64_t k = 0; k < n; ++k) {
      po[k] = T(pa[a->numel() == 1 ? 0 : k] + T(alpha) * pb[b->numel() == 1 ? 0 : k]);
    }
  };
  if (out->dtype() == ScalarType::kFloat) {
    run(float{});
  } else if (out->dtype() == ScalarType::kLong) {
    run(int64_t{});
  } else {
    return make_error(ErrorCode::kNotSupported, "test add.out: dtype {}", scalar_type_name(out->dtype()));
  }
  return Status::ok();
}

/// dim_order_ops::_to_dim_order_copy.out(self, non_blocking, dim_order, out) -> ret:
/// same-dtype copy or i64 -> f32.
inline Status test_to_dim_order_copy_out(KernelContext& ctx, std::span<EValue*> args) {
  HF2PTE_CHECK_OR_RETURN(args.size() == 5, kInvalidProgram, "_to_dim_order_copy.out expects 5 args");
  HF2PTE_ASSIGN_OR_RETURN(Tensor * a, arg_tensor(args[0], "argument 'self'"));
  HF2PTE_ASSIGN_OR_RETURN(Tensor * out, arg_tensor(args[3], "argument 'out'"));
  HF2PTE_RETURN_IF_ERROR(out->resize(a->sizes()));
  if (a->dtype() == out->dtype()) {
    if (a->nbytes()) std::memcpy(out->raw_data(), a->raw_data(), a->nbytes());
  } else if (a->dtype() == ScalarType::kLong && out->dtype() == ScalarType::kFloat) {
    for (int64_t k = 0; k < a->numel(); ++k) out->data<float>()[k] = float(a->data<int64_t>()[k]);
  } else {
    return make_error(ErrorCode::kNotSupported, "test _to_dim_order_copy: unsupported conversion");
  }
  return Status::ok();
}

inline KernelRegistry test_registry() {
  KernelRegistry r;
  r.register_kernel("aten::add.out", test_add_out);
  r.register_kernel("dim_order_ops::_to_dim_order_copy.out", test_to_dim_order_copy_out);
  return r;
}

inline HostTensor ones(ScalarType dtype, std::vector<int64_t> sizes) {
  HostTensor t{dtype, std::move(sizes), {}};
  const int64_t n = t.numel();
  t.bytes.resize(size_t(n) * element_size(dtype));
  for (int64_t k = 0; k < n; ++k) {
    if (dtype == ScalarType::kFloat) t.data<float>()[k] = 1.0f;
    if (dtype == ScalarType::kLong) t.data<int64_t>()[k] = 1;
  }
  return t;
}

inline std::vector<float> floats(const HostTensor& t) {
  std::vector<float> v(size_t(t.numel()));
  if (!v.empty()) std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(float));
  return v;
}

/// Builds one ExecutionPlanT by hand. Indices returned are value indices.
class PlanBuilder {
 public:
  explicit PlanBuilder(std::string name) : plan_(std::make_unique<efb::ExecutionPlanT>()) {
    plan_->name = std::move(name);
    plan_->non_const_buffer_sizes = {0};
    plan_->chains.push_back(std::make_unique<efb::ChainT>());
  }

  /// A planned tensor in arena `memory_id` at `offset` (memory_id 0: unplanned,
  /// data_buffer_idx > 0 without memory_id: constant).
  int tensor(efb::ScalarType dtype, std::vector<int32_t> sizes, uint32_t memory_id, uint64_t offset,
             efb::TensorShapeDynamism dyn = efb::TensorShapeDynamism::STATIC, uint32_t data_buffer_idx = 0) {
    efb::TensorT t;
    t.scalar_type = dtype;
    t.dim_order.resize(sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) t.dim_order[i] = uint8_t(i);
    t.sizes = std::move(sizes);
    t.shape_dynamism = dyn;
    t.data_buffer_idx = data_buffer_idx;
    if (memory_id > 0) {
      t.allocation_info = std::make_unique<efb::AllocationDetailsT>();
      t.allocation_info->memory_id = memory_id;
      t.allocation_info->memory_offset_low = uint32_t(offset);
      t.allocation_info->memory_offset_high = uint32_t(offset >> 32);
    }
    efb::KernelTypesUnion u;
    u.Set(std::move(t));
    return add(std::move(u));
  }
  int int_value(int64_t v) {
    efb::IntT x;
    x.int_val = v;
    efb::KernelTypesUnion u;
    u.Set(std::move(x));
    return add(std::move(u));
  }
  int bool_value(bool v) {
    efb::BoolT x;
    x.bool_val = v;
    efb::KernelTypesUnion u;
    u.Set(std::move(x));
    return add(std::move(u));
  }
  int op(std::string name, std::string overload) {
    auto o = std::make_unique<efb::OperatorT>();
    o->name = std::move(name);
    o->overload = std::move(overload);
    plan_->operators.push_back(std::move(o));
    return int(plan_->operators.size() - 1);
  }
  void kernel(int op_index, std::vector<int32_t> args) {
    efb::KernelCallT k;
    k.op_index = op_index;
    k.args = std::move(args);
    push(std::move(k));
  }
  void jump_false(int cond, int dest) {
    efb::JumpFalseCallT j;
    j.cond_value_index = cond;
    j.destination_instruction = dest;
    push(std::move(j));
  }
  void free_value(int v) {
    efb::FreeCallT f;
    f.value_index = v;
    push(std::move(f));
  }
  void delegate_call(int delegate_index, std::vector<int32_t> args) {
    efb::DelegateCallT d;
    d.delegate_index = delegate_index;
    d.args = std::move(args);
    push(std::move(d));
  }
  void arena(int64_t size) { plan_->non_const_buffer_sizes.push_back(size); }
  void inputs(std::vector<int32_t> v) { plan_->inputs = std::move(v); }
  void outputs(std::vector<int32_t> v) { plan_->outputs = std::move(v); }
  efb::ExecutionPlanT& plan() { return *plan_; }
  efb::TensorT& tensor_at(int v) { return *plan_->values[size_t(v)]->val.AsTensor(); }
  std::unique_ptr<efb::ExecutionPlanT> release() { return std::move(plan_); }

 private:
  int add(efb::KernelTypesUnion u) {
    auto e = std::make_unique<efb::EValueT>();
    e->val = std::move(u);
    plan_->values.push_back(std::move(e));
    return int(plan_->values.size() - 1);
  }
  template <typename T>
  void push(T x) {
    auto ins = std::make_unique<efb::InstructionT>();
    ins->instr_args.Set(std::move(x));
    plan_->chains[0]->instructions.push_back(std::move(ins));
  }
  std::unique_ptr<efb::ExecutionPlanT> plan_;
};

/// A blob holding a copy of `bytes`.
inline pte::Blob blob_of(std::vector<uint8_t> bytes) {
  pte::Blob b;
  b.size = bytes.size();
  b.write = [bytes = std::move(bytes)](pte::ByteSink& sink) { return sink.write(bytes.data(), bytes.size()); };
  return b;
}

/// Serializes `contents` and opens it as a Program.
inline Result<std::shared_ptr<Program>> program_from(pte::PteContents contents) {
  HF2PTE_ASSIGN_OR_RETURN(auto bytes, pte::serialize_pte(std::move(contents)));
  HF2PTE_ASSIGN_OR_RETURN(auto file, pte::PteFile::from_bytes(std::move(bytes), "<test>"));
  return Program::from_file(std::move(file));
}

/// A program with the given plans.
inline Result<std::shared_ptr<Program>> program_from(std::vector<std::unique_ptr<efb::ExecutionPlanT>> plans,
                                                     std::vector<pte::Blob> constants = {},
                                                     std::vector<pte::Blob> mutable_data = {}) {
  pte::PteContents c;
  for (auto& p : plans) c.program.execution_plan.push_back(std::move(p));
  c.constants = std::move(constants);
  c.mutable_data = std::move(mutable_data);
  return program_from(std::move(c));
}

/// forward(x f32[n] (`dyn`), planned bound 8) = x + x: one add.out.
inline std::unique_ptr<efb::ExecutionPlanT> add_plan(efb::TensorShapeDynamism dyn = efb::TensorShapeDynamism::STATIC) {
  PlanBuilder b("forward");
  b.arena(64);
  int x = b.tensor(efb::ScalarType::FLOAT, {8}, 1, 0, dyn);
  int out = b.tensor(efb::ScalarType::FLOAT, {8}, 1, 32, dyn);
  int one = b.int_value(1);
  int add = b.op("aten::add", "out");
  b.kernel(add, {x, x, one, out, out});
  b.inputs({x});
  b.outputs({out});
  return b.release();
}

}  // namespace hf2pte::rt::test
