#include "bench/op_profile.h"

#include "bench/bench.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "backends/xnnpack/runtime/xnn_graph.h"
#include "kernels/portable/kernels.h"
#include "ops/op_table.h"
#include "runtime/program.h"

namespace hf2pte::bench {

namespace {

/// XNNPACK delegate nodes, timed by kind ("xnn:XNNFullyConnected").
class XnnNodeTimes final : public xnn::NodeTimeSink {
 public:
  void add(const std::string& kind, double seconds) override {
    for (auto& t : times) {
      if (t.key.size() == kind.size() + 4 && t.key.compare(4, std::string::npos, kind) == 0) {
        t.calls += 1;
        t.seconds += seconds;
        return;
      }
    }
    times.push_back(OpTime{"xnn:" + kind, 1, seconds});
  }
  std::vector<OpTime> times;
};

}  // namespace

Result<OpProfile> profile_decode(const std::string& pte_path, int prompt_len, int gen, const rt::KernelRegistry& kernels,
                                 bool time_prefill) {
  // One timer slot per kernel op; the wrapped registry forwards to `kernels`.
  auto table = kernels::portable_kernel_table();
  auto times = std::make_shared<std::vector<OpTime>>(table.size());
  auto on = std::make_shared<bool>(false);
  rt::KernelRegistry wrapped;
  for (size_t i = 0; i < table.size(); ++i) {
    std::string key = op_info(table[i].op).kernel_key();
    (*times)[i].key = key;
    const rt::KernelFn* fn = kernels.find(key);
    if (fn == nullptr) continue;
    rt::KernelFn inner = *fn;
    wrapped.register_kernel(key, [inner, times, on, i](rt::KernelContext& ctx, std::span<rt::EValue*> args) {
      if (!*on) return inner(ctx, args);
      auto t0 = std::chrono::steady_clock::now();
      Status st = inner(ctx, args);
      (*times)[i].seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      (*times)[i].calls += 1;
      return st;
    });
  }
  HF2PTE_ASSIGN_OR_RETURN(auto program, rt::Program::load(pte_path));
  // A speech program (encoder + text_decoder, no forward) profiles its encoder.
  auto forward = program->load_method("forward", wrapped);
  if (!forward && forward.status().code() == ErrorCode::kNotFound) forward = program->load_method("encoder", wrapped);
  HF2PTE_ASSIGN_OR_RETURN(auto method, std::move(forward));
  HF2PTE_ASSIGN_OR_RETURN(auto kv_buffers, rt::bind_zeroed_mutable_buffers(*method));  // unplanned KV caches
  auto meta = method->input_meta(0);
  if (method->num_inputs() == 1 && (meta.sizes.size() == 4 || meta.sizes.size() == 3) && meta.dtype == ScalarType::kFloat) {
    // An image program (or a speech encoder): forward on zeros of its planned
    // size, once untimed, then `gen` timed runs.
    int64_t n = 1;
    for (int64_t d : meta.sizes) n *= d;
    const HostTensor image = HostTensor::from(ScalarType::kFloat, meta.sizes, std::vector<float>(static_cast<size_t>(n)));
    auto run = [&]() -> Status {
      HF2PTE_RETURN_IF_ERROR(method->set_input(0, image));
      return method->execute();
    };
    HF2PTE_RETURN_IF_ERROR(run());
    *on = true;
    XnnNodeTimes node_times;
    xnn::set_node_time_sink(&node_times);
    auto t0 = std::chrono::steady_clock::now();
    Status ran = Status::ok();
    for (int i = 0; i < std::max(gen, 1) && ran; ++i) ran = run();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    xnn::set_node_time_sink(nullptr);
    HF2PTE_RETURN_IF_ERROR(ran);
    OpProfile p;
    p.total_seconds = seconds;
    p.steps = std::max(gen, 1);
    times->insert(times->end(), node_times.times.begin(), node_times.times.end());
    for (auto& t : *times) {
      if (t.calls > 0) p.ops.push_back(t);
    }
    std::sort(p.ops.begin(), p.ops.end(), [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
    return p;
  }
  HF2PTE_CHECK_OR_RETURN(meta.sizes.size() == 2 && method->num_inputs() == 2, kInvalidProgram,
                         "profile needs an LLM program with a KV cache: forward(input_ids[1, S], cache_position[S]) ({})", pte_path);
  prompt_len = int(std::clamp<int64_t>(prompt_len, 1, meta.sizes[1] - 1));
  gen = int(std::clamp<int64_t>(gen, 1, meta.sizes[1] - prompt_len));
  auto step = [&](int64_t start, int64_t n) { return run_llm_step(*method, start, n); };
  if (time_prefill) {
    // Pages the weights and the prefill's own buffers in, untimed (as bench
    // times warm prefills).
    HF2PTE_RETURN_IF_ERROR(step(0, 1));
    HF2PTE_RETURN_IF_ERROR(step(0, prompt_len));
  } else {
    HF2PTE_RETURN_IF_ERROR(step(0, prompt_len));
  }
  *on = true;
  XnnNodeTimes node_times;
  xnn::set_node_time_sink(&node_times);
  auto t0 = std::chrono::steady_clock::now();
  Status decoded = Status::ok();
  if (time_prefill) {
    decoded = step(0, prompt_len);
    gen = 1;
  }
  for (int i = 0; i < gen && decoded && !time_prefill; ++i) decoded = step(prompt_len + i, 1);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  xnn::set_node_time_sink(nullptr);
  HF2PTE_RETURN_IF_ERROR(decoded);
  OpProfile p;
  p.total_seconds = seconds;
  times->insert(times->end(), node_times.times.begin(), node_times.times.end());
  p.steps = gen;
  for (auto& t : *times) {
    if (t.calls > 0) p.ops.push_back(t);
  }
  std::sort(p.ops.begin(), p.ops.end(), [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
  return p;
}

}  // namespace hf2pte::bench
