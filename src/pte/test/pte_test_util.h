// Shared helpers for the pte tests: hand-built programs and in-memory blobs.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "pte/pte_writer.h"

namespace hf2pte::pte::testing {

namespace efb = executorch_flatbuffer;

/// A blob that writes `data` (in two pieces, to exercise repeated writes).
inline Blob bytes_blob(std::vector<uint8_t> data, std::string dedup_key = "") {
  auto shared = std::make_shared<std::vector<uint8_t>>(std::move(data));
  Blob blob;
  blob.size = shared->size();
  blob.dedup_key = std::move(dedup_key);
  blob.write = [shared](ByteSink& sink) -> Status {
    const size_t half = shared->size() / 2;
    HF2PTE_RETURN_IF_ERROR(sink.write(shared->data(), half));
    return sink.write(shared->data() + half, shared->size() - half);
  };
  return blob;
}

inline std::vector<uint8_t> float_bytes(std::vector<float> values) {
  std::vector<uint8_t> out(values.size() * sizeof(float));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

inline std::unique_ptr<efb::EValueT> tensor_value(efb::ScalarType dtype, std::vector<int32_t> sizes,
                                                  uint32_t data_buffer_idx, int memory_id = -1,
                                                  uint32_t memory_offset = 0) {
  efb::TensorT tensor;
  tensor.scalar_type = dtype;
  tensor.sizes = sizes;
  for (size_t i = 0; i < sizes.size(); ++i) tensor.dim_order.push_back(uint8_t(i));
  tensor.data_buffer_idx = data_buffer_idx;
  if (memory_id >= 0) {
    tensor.allocation_info = std::make_unique<efb::AllocationDetailsT>();
    tensor.allocation_info->memory_id = uint32_t(memory_id);
    tensor.allocation_info->memory_offset_low = memory_offset;
  }
  auto value = std::make_unique<efb::EValueT>();
  value->val.Set(std::move(tensor));
  return value;
}

inline std::unique_ptr<efb::EValueT> int_value(int64_t v) {
  efb::IntT i;
  i.int_val = v;
  auto value = std::make_unique<efb::EValueT>();
  value->val.Set(std::move(i));
  return value;
}

/// forward(x f32[2]) = x + constant(data_buffer_idx 1), one aten::add.out.
/// Values: [const f32[2], x mem1@0, out mem1@16, Int 1].
inline std::unique_ptr<efb::ExecutionPlanT> add_plan(std::string name = "forward") {
  auto plan = std::make_unique<efb::ExecutionPlanT>();
  plan->name = std::move(name);
  plan->values.push_back(tensor_value(efb::ScalarType::FLOAT, {2}, 1));
  plan->values.push_back(tensor_value(efb::ScalarType::FLOAT, {2}, 0, 1, 0));
  plan->values.push_back(tensor_value(efb::ScalarType::FLOAT, {2}, 0, 1, 16));
  plan->values.push_back(int_value(1));
  plan->inputs = {1};
  plan->outputs = {2};
  auto op = std::make_unique<efb::OperatorT>();
  op->name = "aten::add";
  op->overload = "out";
  plan->operators.push_back(std::move(op));
  efb::KernelCallT call;
  call.op_index = 0;
  call.args = {0, 1, 3, 2, 2};
  auto instruction = std::make_unique<efb::InstructionT>();
  instruction->instr_args.Set(std::move(call));
  auto chain = std::make_unique<efb::ChainT>();
  chain->instructions.push_back(std::move(instruction));
  plan->chains.push_back(std::move(chain));
  plan->non_const_buffer_sizes = {0, 32};
  return plan;
}

/// A program with add_plan() and its one constant.
inline PteContents add_contents() {
  PteContents contents;
  contents.program.execution_plan.push_back(add_plan());
  contents.constants.push_back(bytes_blob(float_bytes({1.0f, 2.0f})));
  return contents;
}

}  // namespace hf2pte::pte::testing
