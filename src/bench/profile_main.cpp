// hf2pte_profile OUT.pte [--prompt-len N] [--gen N] [--threads N] [--portable] [--prefill]:
// where decode (or, with --prefill, prefill) time goes, per kernel op and
// XNNPACK node kind (see op_profile.h).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backends/builtin/builtin.h"
#include "backends/xnnpack/runtime/xnnpack_backend.h"
#include "bench/op_profile.h"
#include "kernels/optimized/kernels.h"
#include "kernels/portable/kernels.h"

int main(int argc, char** argv) {
  // Default exports delegate to XNNPACK; delegate time shows up as "other".
  if (auto st = hf2pte::backends::register_builtin_backends(); !st) {
    std::fprintf(stderr, "hf2pte_profile: error: %s\n", st.message().c_str());
    return 1;
  }
  using namespace hf2pte;
  std::string pte;
  int prompt_len = 128, gen = 32, threads = 0;
  bool portable = false, prefill = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--prompt-len" && i + 1 < argc) prompt_len = std::atoi(argv[++i]);
    else if (a == "--gen" && i + 1 < argc) gen = std::atoi(argv[++i]);
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--portable") portable = true;
    else if (a == "--prefill") prefill = true;
    else pte = a;
  }
  if (pte.empty()) {
    std::fprintf(stderr, "usage: %s OUT.pte [--prompt-len N] [--gen N] [--threads N] [--portable] [--prefill]\n", argv[0]);
    return 2;
  }
  if (threads > 0) kernels::set_kernel_threads(threads);
  auto p = bench::profile_decode(pte, prompt_len, gen, portable ? portable_registry() : optimized_registry(), prefill);
  if (!p) {
    std::fprintf(stderr, "error: %s\n", p.status().message().c_str());
    return 1;
  }
  double in_ops = 0;
  for (const auto& t : p->ops) in_ops += t.seconds;
  std::printf(prefill ? "%d prefill step: %.3f ms (kernels %.3f ms, other %.3f ms)\n" : "%d decode steps: %.3f ms/token (kernels %.3f ms, other %.3f ms)\n", p->steps,
              1e3 * p->total_seconds / p->steps, 1e3 * in_ops / p->steps, 1e3 * (p->total_seconds - in_ops) / p->steps);
  std::printf("%-28s %8s %12s %7s\n", "op", "calls/tok", "us/token", "share");
  for (const auto& t : p->ops) {
    std::printf("%-28s %8.1f %12.1f %6.1f%%\n", t.key.c_str(), double(t.calls) / p->steps, 1e6 * t.seconds / p->steps,
                100.0 * t.seconds / p->total_seconds);
  }
  return 0;
}
