#include "backends/cuda/runtime/reference_executor.h"

#include <fmt/format.h>

#include <deque>

#include "runtime/aligned_buffer.h"
#include "runtime/tensor.h"

namespace hf2pte::cuda {

struct ReferenceExecutor::Impl {
  struct Call {
    rt::KernelFn fn;
    std::vector<rt::EValue*> args;  ///< schema args + the return slot
    const NodeInfo* node = nullptr;
    std::string key;                ///< "aten::mm.out" (KernelContext points at it)
  };

  std::shared_ptr<const CudaProgram> program;
  rt::AlignedBuffer arena;
  std::vector<std::unique_ptr<rt::Tensor>> owned;  ///< per tensor: intermediates and constants (else null)
  std::deque<rt::EValue> tensor_ev;               ///< per tensor, stable addresses
  std::deque<rt::EValue> values;                  ///< per value (kTensor entries unused: args point at tensor_ev)
  std::deque<rt::EValue> boxes;                   ///< IntList items
  std::vector<std::pair<rt::EValue*, uint32_t>> int_slots;  ///< Int EValues and the expr they hold
  std::vector<Call> calls;
  std::vector<int64_t> expr_values;

  Status bind_io(std::span<rt::EValue*> args);
};

ReferenceExecutor::~ReferenceExecutor() = default;

Result<std::unique_ptr<ReferenceExecutor>> ReferenceExecutor::make(std::shared_ptr<const CudaProgram> program,
                                                                   const ConstantLookup& constants,
                                                                   const rt::KernelRegistry& registry) {
  std::unique_ptr<ReferenceExecutor> ex(new ReferenceExecutor());
  ex->impl_ = std::make_unique<Impl>();
  Impl& m = *ex->impl_;
  m.program = std::move(program);
  const CudaProgram& p = *m.program;
  if (p.arena_bytes > 0) {
    HF2PTE_ASSIGN_OR_RETURN(m.arena, rt::AlignedBuffer::allocate(p.arena_bytes));
  }

  m.owned.resize(p.tensors.size());
  for (size_t t = 0; t < p.tensors.size(); ++t) {
    const TensorInfo& ti = p.tensors[t];
    rt::EValue& ev = m.tensor_ev.emplace_back();
    ev.tag = rt::Tag::kTensor;
    if (ti.role == TensorRole::kConstant) {
      HF2PTE_ASSIGN_OR_RETURN(auto bytes, constants(ti.key));
      HF2PTE_CHECK_OR_RETURN(bytes.size() == ti.capacity_bytes, kInvalidProgram,
                             "CUDA payload: constant '{}' has {} bytes; its tensor needs {}", ti.key, bytes.size(),
                             ti.capacity_bytes);
      // Kernels never write a constant (the parser refused payloads that would).
      m.owned[t] = std::make_unique<rt::Tensor>(ti.dtype, ti.max_sizes, std::vector<uint8_t>{},
                                                const_cast<uint8_t*>(bytes.data()), bytes.size(),
                                                rt::ShapeDynamism::kStatic);
    } else if (ti.role == TensorRole::kIntermediate) {
      m.owned[t] = std::make_unique<rt::Tensor>(ti.dtype, ti.max_sizes, std::vector<uint8_t>{},
                                                m.arena.data() + ti.arena_offset, ti.capacity_bytes,
                                                rt::ShapeDynamism::kDynamicBound);
    }
    ev.tensor = m.owned[t].get();  // inputs/outputs: bound at execute
  }

  for (const ValueInfo& v : p.values) {
    rt::EValue& ev = m.values.emplace_back();
    switch (v.kind) {
      case ValueKind::kNone: break;
      case ValueKind::kTensor: ev = m.tensor_ev[v.tensor]; break;  // placeholder; args use tensor_ev
      case ValueKind::kInt:
        ev.tag = rt::Tag::kInt;
        m.int_slots.push_back({&ev, v.exprs[0]});
        break;
      case ValueKind::kDouble: ev = rt::EValue::from_double(v.f); break;
      case ValueKind::kBool: ev = rt::EValue::from_bool(v.b); break;
      case ValueKind::kScalarType: ev = rt::EValue::from_int(int64_t(v.scalar_type)); break;
      case ValueKind::kIntList:
        ev.tag = rt::Tag::kIntList;
        for (uint32_t e : v.exprs) {
          rt::EValue& box = m.boxes.emplace_back();
          box.tag = rt::Tag::kInt;
          m.int_slots.push_back({&box, e});
          ev.items.push_back(&box);
        }
        break;
      case ValueKind::kTensorList:
      case ValueKind::kOptTensorList:
        ev.tag = v.kind == ValueKind::kTensorList ? rt::Tag::kTensorList : rt::Tag::kOptionalTensorList;
        for (int32_t t : v.tensors) ev.items.push_back(t < 0 ? nullptr : &m.tensor_ev[size_t(t)]);
        break;
    }
  }

  for (const NodeInfo& n : p.nodes) {
    const std::string key = op_info(n.op).kernel_key();
    const rt::KernelFn* fn = registry.find(key);
    HF2PTE_CHECK_OR_RETURN(fn != nullptr, kNotSupported, "no CPU kernel for {} (node {})", key, n.name);
    Impl::Call c{*fn, {}, &n, key};
    for (uint32_t vi : n.args) {
      const ValueInfo& v = p.values[vi];
      c.args.push_back(v.kind == ValueKind::kTensor ? &m.tensor_ev[v.tensor] : &m.values[vi]);
    }
    // The return slot: the out for out variants, `self` for in-place ops (index_put_).
    c.args.push_back(op_schema(n.op).num_outs() == 1 ? c.args[c.args.size() - 1] : c.args[0]);
    m.calls.push_back(std::move(c));
  }
  return ex;
}

Status ReferenceExecutor::Impl::bind_io(std::span<rt::EValue*> args) {
  const CudaProgram& p = *program;
  HF2PTE_CHECK_OR_RETURN(args.size() == size_t(p.num_inputs) + p.num_outputs, kInvalidProgram,
                         "the CUDA delegate takes {} inputs and {} outputs; the call passes {} args", p.num_inputs,
                         p.num_outputs, args.size());
  std::vector<std::span<const int64_t>> input_sizes;
  for (size_t i = 0; i < args.size(); ++i) {
    HF2PTE_CHECK_OR_RETURN(args[i] != nullptr && args[i]->is_tensor() && args[i]->tensor != nullptr, kInvalidProgram,
                           "CUDA delegate arg {} is not a tensor", i);
    const uint32_t t = i < p.num_inputs ? p.input_tensor[i] : p.output_tensor[i - p.num_inputs];
    const TensorInfo& ti = p.tensors[t];
    const rt::Tensor& given = *args[i]->tensor;
    HF2PTE_CHECK_OR_RETURN(given.dtype() == ti.dtype && size_t(given.dim()) == ti.sizes.size(), kInvalidArgument,
                           "CUDA delegate arg {} is {} of rank {}; the payload expects {} of rank {}", i,
                           scalar_type_name(given.dtype()), given.dim(), scalar_type_name(ti.dtype), ti.sizes.size());
    HF2PTE_CHECK_OR_RETURN(given.is_contiguous(), kNotSupported, "CUDA delegate arg {} is not contiguous", i);
    tensor_ev[t].tensor = args[i]->tensor;
    if (i < p.num_inputs) input_sizes.push_back(given.sizes());
  }
  HF2PTE_RETURN_IF_ERROR(p.evaluate(input_sizes, &expr_values));
  for (auto [ev, e] : int_slots) ev->i = expr_values[e];
  for (size_t t = 0; t < p.tensors.size(); ++t) {
    const TensorInfo& ti = p.tensors[t];
    rt::Tensor& tensor = *tensor_ev[t].tensor;
    const auto want = p.sizes_of(uint32_t(t), expr_values);
    switch (ti.role) {
      case TensorRole::kInput:
      case TensorRole::kState:
        HF2PTE_CHECK_OR_RETURN(std::equal(want.begin(), want.end(), tensor.sizes().begin(), tensor.sizes().end()),
                               kInvalidArgument, "CUDA delegate input {} has sizes [{}]; expected [{}]", ti.io_index,
                               fmt::join(tensor.sizes(), ", "), fmt::join(want, ", "));
        break;
      case TensorRole::kOutput:
      case TensorRole::kIntermediate:
        if (auto st = tensor.resize(want); !st) return st.with_context(fmt::format("CUDA delegate tensor {}", t));
        break;
      case TensorRole::kConstant: break;
    }
  }
  return Status::ok();
}

Status ReferenceExecutor::execute(std::span<rt::EValue*> args) {
  Impl& m = *impl_;
  HF2PTE_RETURN_IF_ERROR(m.bind_io(args));
  for (auto& c : m.calls) {
    rt::KernelContext ctx{c.key};
    if (auto st = c.fn(ctx, c.args); !st) return st.with_context(c.node->name);
  }
  return Status::ok();
}

}  // namespace hf2pte::cuda
