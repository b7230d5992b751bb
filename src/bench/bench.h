// LLM benchmark: prefill and decode tokens/s of a program's `forward`, the
// machine's measured read bandwidth, and decode's share of the bandwidth limit
// (weight bytes read per token x tokens/s / bandwidth), all from one run.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/program.h"
#include "runtime/kernel.h"

namespace hf2pte::bench {

struct BenchOptions {
  int prompt_len = 128;
  int gen = 64;
  int threads = 0;  ///< 0: all cores
};

struct BenchResult {
  int prompt_len = 0, gen = 0, threads = 0;
  double prefill_tok_s = 0, decode_tok_s = 0;
  double prefill_seconds = 0, decode_seconds = 0;  ///< prefill: mean of the warm runs
  int prefill_runs = 0;                 ///< warm prefills timed (after the cold one)
  double cold_prefill_seconds = 0;      ///< the first prefill: its buffers' pages are touched for the first time
  double first_step_seconds = 0;        ///< one untimed decode step first: pages the weights in
  uint64_t weight_bytes_per_token = 0;  ///< constants a decode step reads
  uint64_t weight_elements_per_token = 0;  ///< their elements (2 flops each in a linear layer)
  double bandwidth_gb_s = 0;            ///< measured read bandwidth, same threads (best before/after)
  double decode_bandwidth_share = 0;    ///< weight bytes/token * tok/s / bandwidth
  /// Median over decode blocks of each block's share against a probe taken
  /// right before it (the host's bandwidth moves between blocks).
  double decode_bandwidth_share_per_block = 0;
  int decode_share_blocks = 0;
  double peak_rss_mib = 0;              ///< from loading the program to the end of decode (not the probe)
};

/// The CPU's model name as /proc/cpuinfo gives it ("unknown CPU" elsewhere):
/// every benchmark figure names the CPU it was measured on.
std::string cpu_model();

/// The bandwidth probe's memory: `bytes` of touched words in transparent huge
/// pages where the kernel gives them (2 MiB-aligned, MADV_HUGEPAGE). Weights
/// read in place are PMD-mapped once the page cache holds them in large folios
/// (and llama.cpp's mapped GGUF too): on 4 KiB pages the probe read 26.6-29.0
/// GB/s where llama.cpp's fp16 decode read 31 GB/s and huge pages 29.8-42.1
/// (Zen 4, same minutes; docs/performance.md).
class ProbeBuffer {
 public:
  explicit ProbeBuffer(size_t bytes);
  ProbeBuffer(const ProbeBuffer&) = delete;  // data_ may point into fallback_
  ProbeBuffer& operator=(const ProbeBuffer&) = delete;
  std::span<const uint64_t> words() const { return {data_, words_}; }

 private:
  std::shared_ptr<void> memory_;  ///< rt::map_huge_pages
  std::vector<uint64_t> fallback_;
  uint64_t* data_ = nullptr;
  size_t words_ = 0;
};

/// Streams a buffer larger than the caches with `threads` threads; best of 5 (GB/s).
double measure_read_bandwidth(int threads, size_t bytes = size_t(1) << 30);
/// The same over a caller's (already touched) buffer, best of `reps` (at least 3:
/// each thread reads its part as 1, 2 and 4 interleaved streams in turn).
double measure_read_bandwidth(int threads, std::span<const uint64_t> buf, int reps);

/// Constant tensors one decode step of `forward` reads: every constant an
/// instruction uses, counted once, except embedding tables (one row per token),
/// plus every named_data segment of delegate weights when `forward` calls a
/// delegate (their element counts from the XNNPACK values that name them, so
/// fp16 filters count half the bytes but the same elements).
struct WeightTraffic {
  uint64_t bytes = 0, elements = 0;
};
Result<WeightTraffic> weights_per_token(const std::string& pte_path);

Result<BenchResult> run_llm_bench(const std::string& pte_path, const BenchOptions& options,
                                  const rt::KernelRegistry& kernels);

/// One forward call of an LLM program on `n` synthetic token ids (1, 2, 1, ...)
/// at positions start .. start + n - 1: a prefill when n > 1, a decode step when 1.
Status run_llm_step(rt::Method& method, int64_t start, int64_t n);

}  // namespace hf2pte::bench
