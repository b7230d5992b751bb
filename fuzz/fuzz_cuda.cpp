// libFuzzer target: hf2pte's CUDA delegate payload (schema/cuda_payload.fbs)
// through the parser and the CPU reference executor. Input that verifies as a
// .pte is loaded with the backend registered; any other input is a bare
// payload (seed: fuzz/seeds/cuda, the delegate of a llama fixture): parsed,
// given zero constants of the sizes it asks for, and executed once with zero
// inputs at each dim's minimum, so corrupted nodes reach the kernels.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backends/cuda/runtime/cuda_backend.h"
#include "backends/cuda/runtime/reference_executor.h"
#include "kernels/portable/kernels.h"
#include "pte/pte_file.h"
#include "runtime/program.h"
#include "runtime/tensor.h"

namespace {

constexpr uint64_t kMaxBytes = uint64_t(16) << 20;  // per tensor and arena: keeps runs fast

void run_payload(std::span<const uint8_t> payload) {
  using namespace hf2pte;
  auto parsed = cuda::parse_cuda_payload(payload, kMaxBytes);
  if (!parsed) return;
  auto program = std::make_shared<const cuda::CudaProgram>(std::move(*parsed));
  std::map<std::string, std::vector<uint8_t>> constants;
  for (const auto& t : program->tensors) {
    if (t.role == cuda::TensorRole::kConstant && t.capacity_bytes > kMaxBytes) return;
    if (t.role == cuda::TensorRole::kConstant) constants[t.key].resize(t.capacity_bytes);
  }
  cuda::ConstantLookup lookup = [&](std::string_view key) -> Result<std::span<const uint8_t>> {
    return std::span<const uint8_t>(constants.at(std::string(key)));
  };
  auto ex = cuda::ReferenceExecutor::make(program, lookup, portable_registry());
  if (!ex) return;
  std::vector<int64_t> dims, exprs;
  for (const auto& d : program->dims) dims.push_back(d.min);
  if (!program->evaluate_dims(dims, &exprs)) return;
  const size_t n_io = program->num_inputs + program->num_outputs;
  std::vector<std::vector<uint8_t>> storage(n_io);
  std::vector<rt::Tensor> tensors(n_io);
  std::vector<rt::EValue> values(n_io);
  std::vector<rt::EValue*> args;
  for (size_t i = 0; i < n_io; ++i) {
    const uint32_t t = i < program->num_inputs ? program->input_tensor[i] : program->output_tensor[i - program->num_inputs];
    const auto& info = program->tensors[t];
    if (info.capacity_bytes > kMaxBytes) return;
    storage[i].resize(info.capacity_bytes);
    auto sizes = i < program->num_inputs ? program->sizes_of(t, exprs) : info.max_sizes;
    for (int64_t s : sizes) if (s < 0) return;
    tensors[i] = rt::Tensor(info.dtype, sizes, {}, storage[i].data(), storage[i].size(), rt::ShapeDynamism::kDynamicBound);
    if (tensors[i].nbytes() > storage[i].size()) return;
    values[i].tag = rt::Tag::kTensor;
    values[i].tensor = &tensors[i];
    args.push_back(&values[i]);
  }
  (void)(*ex)->execute(args);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool registered = [] {
    hf2pte::cuda::set_executor_choice(hf2pte::cuda::ExecutorChoice::kReference);
    return hf2pte::cuda::register_cuda_backend().is_ok();
  }();
  if (!registered) __builtin_trap();
  auto file = hf2pte::pte::PteFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.pte");
  if (file) {
    auto program = hf2pte::rt::Program::from_file(*file);
    if (!program) return 0;
    for (const auto& name : (*program)->method_names()) (void)(*program)->load_method(name, hf2pte::portable_registry());
    return 0;
  }
  run_payload(std::span<const uint8_t>(data, size));
  (void)hf2pte::cuda::cuda_node_counts(std::span<const uint8_t>(data, size));
  return 0;
}
