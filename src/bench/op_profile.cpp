#include "bench/op_profile.h"

#include "bench/bench.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "kernels/portable/kernels.h"
#include "ops/op_table.h"
#include "runtime/program.h"

namespace hf2pte::bench {

Result<OpProfile> profile_decode(const std::string& pte_path, int prompt_len, int gen, const rt::KernelRegistry& kernels) {
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
  HF2PTE_ASSIGN_OR_RETURN(auto method, program->load_method("forward", wrapped));
  HF2PTE_ASSIGN_OR_RETURN(auto kv_buffers, rt::bind_zeroed_mutable_buffers(*method));  // unplanned KV caches
  auto meta = method->input_meta(0);
  HF2PTE_CHECK_OR_RETURN(meta.sizes.size() == 2 && method->num_inputs() == 2, kInvalidProgram,
                         "profile needs an LLM program: forward(input_ids[1, S], cache_position[S]) ({})", pte_path);
  prompt_len = int(std::clamp<int64_t>(prompt_len, 1, meta.sizes[1] - 1));
  gen = int(std::clamp<int64_t>(gen, 1, meta.sizes[1] - prompt_len));
  auto step = [&](int64_t start, int64_t n) { return run_llm_step(*method, start, n); };
  HF2PTE_RETURN_IF_ERROR(step(0, prompt_len));
  *on = true;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < gen; ++i) HF2PTE_RETURN_IF_ERROR(step(prompt_len + i, 1));
  OpProfile p;
  p.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  p.steps = gen;
  for (auto& t : *times) {
    if (t.calls > 0) p.ops.push_back(t);
  }
  std::sort(p.ops.begin(), p.ops.end(), [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
  return p;
}

}  // namespace hf2pte::bench
