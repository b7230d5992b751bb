// `hf2pte bench OUT.pte [--prompt-len 128] [--gen 64] [--threads N]`: prefill
// and decode tokens/s, peak memory, the machine's measured read bandwidth and
// decode's share of the bandwidth limit, all measured in this one run.
#include <cstdio>

#include "bench/bench.h"
#include "cli/commands.h"
#include "kernels/optimized/kernels.h"

namespace hf2pte::cli {

CLI::App* add_bench_command(CLI::App& app, BenchArgs& a) {
  auto* cmd = app.add_subcommand("bench", "prefill/decode tokens/s and decode's share of the memory bandwidth");
  cmd->add_option("pte", a.pte, ".pte file (LLM program)")->required();
  cmd->add_option("--prompt-len", a.prompt_len, "prompt tokens for the prefill (default 128)");
  cmd->add_option("--gen", a.gen, "decode steps (default 64)");
  cmd->add_option("--threads", a.threads, "kernel threads (default: all cores)");
  cmd->add_flag("--huge-pages", a.huge_pages, kHugePagesHelp);
  return cmd;
}

int run_bench(const BenchArgs& a) {
  apply_huge_pages(a.huge_pages);
  bench::BenchOptions o;
  o.prompt_len = a.prompt_len;
  o.gen = a.gen;
  o.threads = a.threads;
  if (a.threads > 0) kernels::set_kernel_threads(a.threads);
  auto r = bench::run_llm_bench(a.pte, o, optimized_registry());
  if (!r) return fail(r.status());
  std::printf("first step (pages the weights in, not in the rates): %.3f s\n", r->first_step_seconds);
  // Linear-layer work: 2 flops per weight element per token.
  const double gflop_per_token = 2.0 * double(r->weight_elements_per_token) / 1e9;
  std::printf("prefill: %d tokens, %.1f tok/s (%.3f s), %.1f GFLOP/s of linear-layer work\n",
              r->prompt_len, r->prefill_tok_s, r->prefill_seconds, gflop_per_token * r->prefill_tok_s);
  std::printf("decode:  %d tokens, %.1f tok/s (%.3f ms/token)\n", r->gen, r->decode_tok_s, 1000.0 / r->decode_tok_s);
  std::printf("weights read per decode step: %.1f MB; measured read bandwidth (%d threads): %.1f GB/s\n",
              double(r->weight_bytes_per_token) / 1e6, r->threads, r->bandwidth_gb_s);
  // The probe is the best of two short windows; the decode rate is an average
  // over the whole run, so a host whose bandwidth moves shows up here.
  std::printf("decode share of the bandwidth limit: %.1f %% (limit %.1f tok/s; decode read %.1f GB/s of weights)\n",
              100.0 * r->decode_bandwidth_share,
              r->bandwidth_gb_s * 1e9 / double(std::max<uint64_t>(r->weight_bytes_per_token, 1)),
              double(r->weight_bytes_per_token) * r->decode_tok_s / 1e9);
  std::printf("decode share, block by block: %.1f %% (median of %d decode blocks, each against a 256 MiB probe "
              "taken just before it)\n",
              100.0 * r->decode_bandwidth_share_per_block, r->decode_share_blocks);
  std::printf("peak RSS: %.1f MiB\n", r->peak_rss_mib);
  return 0;
}

}  // namespace hf2pte::cli
