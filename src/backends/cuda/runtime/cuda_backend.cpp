#include "backends/cuda/runtime/cuda_backend.h"

#include <fmt/format.h>

#include <atomic>
#include <map>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include "backends/cuda/runtime/device.h"
#include "backends/cuda/schema/backend_id.h"
#include "backends/cuda/runtime/reference_executor.h"
#include "kernels/portable/kernels.h"
#include "pte/pte_file.h"
#include "runtime/method.h"

namespace hf2pte::cuda {
namespace {

ExecutorChoice initial_choice() {
  const char* env = std::getenv("HF2PTE_CUDA_EXECUTOR");
  const std::string_view v = env ? env : "";
  if (v == "device") return ExecutorChoice::kDevice;
  if (v == "reference") return ExecutorChoice::kReference;
  return ExecutorChoice::kAuto;
}

std::atomic<ExecutorChoice>& choice_slot() {
  static std::atomic<ExecutorChoice> c{initial_choice()};
  return c;
}

std::mutex& description_mutex() {
  static std::mutex m;
  return m;
}
std::string& description_slot() {
  static std::string s;
  return s;
}
void set_description(std::string s) {
  std::lock_guard<std::mutex> lock(description_mutex());
  description_slot() = std::move(s);
}

struct CudaHandle final : rt::DelegateHandle {
  std::unique_ptr<DeviceExecutor> device;
  std::unique_ptr<ReferenceExecutor> reference;
};

class CudaBackend final : public rt::Backend {
 public:
  Result<std::unique_ptr<rt::DelegateHandle>> init(const rt::BackendInitContext& ctx, std::span<const uint8_t> payload,
                                                   std::span<const rt::CompileSpec>) const override {
    HF2PTE_ASSIGN_OR_RETURN(CudaProgram parsed, parse_cuda_payload(payload, rt::max_planned_bytes()));
    auto program = std::make_shared<const CudaProgram>(std::move(parsed));
    const pte::PteFile* file = ctx.file;
    ConstantLookup constants = [file](std::string_view key) -> Result<std::span<const uint8_t>> {
      if (file == nullptr) return make_error(ErrorCode::kInvalidProgram, "no program file to read constant '{}' from", key);
      return file->named_data(key);
    };
    auto h = std::make_unique<CudaHandle>();
    const ExecutorChoice c = executor_choice();
    const std::string why = c == ExecutorChoice::kReference ? "" : device_unavailable_reason();
    if (c != ExecutorChoice::kReference && why.empty()) {
      HF2PTE_ASSIGN_OR_RETURN(h->device, make_device_executor(program, constants));
      set_description(fmt::format("device ({})", device_description()));
      return std::unique_ptr<rt::DelegateHandle>(std::move(h));
    }
    if (c == ExecutorChoice::kDevice) {
      return make_error(ErrorCode::kNotSupported, "no CUDA device can run this program: {}", why);
    }
    if (c == ExecutorChoice::kAuto) {
      // Once per process: a program may hold several delegates.
      static std::once_flag warned;
      std::call_once(warned, [&] {
        std::fprintf(stderr, "hf2pte: warning: %s; running the CUDA delegate on the CPU reference executor (slow)\n",
                     why.c_str());
      });
    }
    HF2PTE_ASSIGN_OR_RETURN(h->reference, ReferenceExecutor::make(program, constants, kernels::portable_registry()));
    set_description(fmt::format("cpu reference ({})", why.empty() ? "chosen" : why));
    return std::unique_ptr<rt::DelegateHandle>(std::move(h));
  }

  Status execute(rt::DelegateHandle& handle, std::span<rt::EValue*> args) const override {
    auto& h = static_cast<CudaHandle&>(handle);
    return h.device ? h.device->execute(args) : h.reference->execute(args);
  }
};

}  // namespace

void set_executor_choice(ExecutorChoice c) { choice_slot().store(c); }
ExecutorChoice executor_choice() { return choice_slot().load(); }

std::string last_executor_description() {
  std::lock_guard<std::mutex> lock(description_mutex());
  return description_slot();
}

Result<std::vector<std::pair<std::string, size_t>>> cuda_node_counts(std::span<const uint8_t> payload) {
  HF2PTE_ASSIGN_OR_RETURN(CudaProgram p, parse_cuda_payload(payload, rt::max_planned_bytes()));
  std::map<std::string, size_t> counts;
  for (const auto& n : p.nodes) ++counts[op_info(n.op).kernel_key()];
  return std::vector<std::pair<std::string, size_t>>(counts.begin(), counts.end());
}

Status register_cuda_backend() {
  static std::once_flag once;
  static Status result;
  std::call_once(once, [] { result = rt::register_backend(kCudaBackendId, std::make_shared<CudaBackend>()); });
  return result;
}

}  // namespace hf2pte::cuda
