// PlanMethod: the concrete Method built from one ExecutionPlan of a .pte
// (ExecuTorch's Method::init + execute, docs/pte-format.md §4).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/aligned_buffer.h"
#include "runtime/backend.h"
#include "runtime/program.h"
#include "runtime/weight_store.h"

namespace executorch_flatbuffer {
struct ExecutionPlan;
}

namespace hf2pte::rt {

/// Instructions one execute() may run before it is stopped. A malformed
/// JumpFalseCall can loop forever; this turns that into an error (ExecuTorch's
/// kMaxInstructions).
inline constexpr int64_t kMaxInstructions = 10'000'000;
/// Sets the process-wide instruction budget of every later execute() (0
/// restores kMaxInstructions; `hf2pte run --max-instructions`). Thread-safe.
void set_max_instructions(int64_t n);
int64_t max_instructions();

/// Default cap on the planned memory of one method: the sum of its
/// non_const_buffer_sizes. Arenas are sized by the file, so without a cap a
/// 1 KB file could ask for terabytes (docs/decisions.md, "Planned memory cap").
inline constexpr uint64_t kDefaultMaxPlannedBytes = uint64_t{16} << 30;
/// Sets the process-wide cap checked by every later PlanMethod::load (0 restores
/// the default). Thread-safe.
void set_max_planned_bytes(uint64_t bytes);
/// The cap in effect.
uint64_t max_planned_bytes();

/// A loaded method: owns its value table, tensors, planned arenas, input copies
/// and delegate handles, and keeps the program file alive (constant tensors and
/// strings point into it).
class PlanMethod final : public Method {
 public:
  /// Parses values, allocates arenas, initialises delegates and resolves every
  /// kernel of `plan` (which must belong to `file`). Kernels are copied out of
  /// `registry`, which may be destroyed afterwards. Every index read from the
  /// plan is bounds-checked; a malformed plan yields an error, never a crash.
  static Result<std::unique_ptr<PlanMethod>> load(std::shared_ptr<const pte::PteFile> file,
                                                  const executorch_flatbuffer::ExecutionPlan& plan,
                                                  const KernelRegistry& registry);
  ~PlanMethod() override;

  const std::string& name() const override { return name_; }
  size_t num_inputs() const override { return inputs_.size(); }
  size_t num_outputs() const override { return outputs_.size(); }
  ValueMeta input_meta(size_t i) const override;
  ValueMeta output_meta(size_t i) const override;
  Status set_input(size_t i, const HostTensor& t) override;
  bool output_planned(size_t i) const override { return i < outputs_.size() && outputs_[i].planned; }
  Status set_output_buffer(size_t i, void* data, size_t capacity_bytes) override;
  size_t num_mutable_buffers() const override { return buffers_.size(); }
  MutableBufferMeta mutable_buffer_meta(size_t i) const override;
  bool buffer_planned(size_t i) const override { return i < buffers_.size() && buffers_[i].meta.planned; }
  Status set_mutable_buffer(size_t i, void* data, size_t capacity_bytes) override;
  Status execute() override;
  Result<HostTensor> output_tensor(size_t i) const override;
  const EValue& output(size_t i) const override;

  /// Number of entries in the value table.
  size_t num_values() const { return values_.size(); }
  /// Value `idx` of the table (for debugging and tests); nullptr when out of range.
  const EValue* value(size_t idx) const { return idx < values_.size() ? &values_[idx] : nullptr; }
  /// Bytes of planned arena `j` (memory_id j + 1).
  size_t planned_buffer_size(size_t j) const { return j < arenas_.size() ? arenas_[j].size() : 0; }
  size_t num_planned_buffers() const { return arenas_.size(); }

 private:
  enum class InstrKind : uint8_t { kKernel, kDelegate, kMove, kJumpFalse, kFree };

  struct Instr {
    InstrKind kind = InstrKind::kKernel;
    size_t kernel_idx = 0;             ///< kKernel: index into kernels_
    std::string op_name;               ///< kKernel: "aten::add.out"; kDelegate: backend id
    size_t delegate_idx = 0;           ///< kDelegate
    std::vector<EValue*> args;         ///< kKernel, kDelegate
    size_t a = 0;                      ///< kMove: from; kJumpFalse: cond; kFree: value
    size_t b = 0;                      ///< kMove: to; kJumpFalse: destination
    bool output_may_view = false;      ///< kKernel: KernelContext::output_may_view (mark_view_outputs)
  };

  struct Delegate {
    std::shared_ptr<const Backend> backend;
    std::unique_ptr<DelegateHandle> handle;
  };

  /// Per plan input: where it lives and what shape it was planned with.
  struct Input {
    size_t value_idx = 0;
    ValueMeta meta;
    bool is_tensor = false;
    bool planned = false;  ///< tensor data is in an arena (else Method-owned copy)
    bool set = false;
    Tensor* tensor = nullptr;  ///< tensor inputs, captured at load (MoveCall cannot redirect it)
    AlignedBuffer storage;  ///< unplanned tensor inputs: the copy the tensor points at
  };

  struct Output {
    size_t value_idx = 0;
    ValueMeta meta;
    bool planned = true;   ///< not a tensor, or its data is in an arena / the file
    bool bound = false;    ///< unplanned: memory was bound (by the caller or execute())
    AlignedBuffer storage; ///< unplanned and not bound by the caller: Method-owned memory
  };

  /// A named mutable buffer (see Method::num_mutable_buffers).
  struct Buffer {
    size_t value_idx = 0;
    MutableBufferMeta meta;  ///< meta.bound: unplanned and bound by the caller
  };

  PlanMethod() = default;
  Status init(const executorch_flatbuffer::ExecutionPlan& plan, const KernelRegistry& registry);
  Status allocate_arenas(const executorch_flatbuffer::ExecutionPlan& plan);
  Status parse_values(const executorch_flatbuffer::ExecutionPlan& plan);
  /// Whether planned value `v` overlaps any other planned value's bytes (an
  /// alias the plan relies on), so it must stay where the plan put it.
  static bool shares_planned_bytes(const executorch_flatbuffer::ExecutionPlan& plan, size_t v);
  Status parse_tensor(size_t idx, const void* fb_tensor);
  Status init_delegates(const executorch_flatbuffer::ExecutionPlan& plan);
  Status parse_instructions(const executorch_flatbuffer::ExecutionPlan& plan, const KernelRegistry& registry);
  /// Lets slice_copy calls hand their delegate readers a view of the sliced
  /// tensor instead of a copy, where that is provably safe (method.cpp).
  void mark_view_outputs();
  Status execute_instruction(size_t chain, size_t pc, const Instr& ins, size_t* next_pc);
  Status error_in(Status st) const;
  ValueMeta meta_of(size_t value_idx) const;

  std::string name_;
  // Declared first so it is destroyed last: values and delegate handles may
  // point into the file.
  std::shared_ptr<const pte::PteFile> file_;
  std::vector<AlignedBuffer> arenas_;            ///< arena j = memory_id j + 1
  std::vector<std::unique_ptr<Tensor>> tensors_;  ///< every Tensor value (stable addresses)
  std::vector<EValue> values_;                   ///< sized once at load: pointers into it are stable
  std::vector<uint8_t> is_constant_;             ///< per value: 1 for a tensor backed by the file
  /// Copies of large constants in huge pages (WeightPlacement::kHugePages).
  std::vector<WeightBlock> huge_constants_;
  std::vector<Delegate> delegates_;
  /// Resolved kernels, one per operator used. Copied out of the registry so
  /// the registry given to load() need not outlive the Method.
  std::vector<KernelFn> kernels_;
  std::vector<std::vector<Instr>> chains_;
  std::vector<Input> inputs_;
  std::vector<Output> outputs_;
  std::vector<Buffer> buffers_;
};

}  // namespace hf2pte::rt
