// `hf2pte bench OUT.pte [--prompt-len 128] [--gen 64] [--threads N]`: prefill
// and decode tokens/s, peak memory, the machine's measured read bandwidth and
// decode's share of the bandwidth limit, all measured in this one run. Image
// programs: forward ms and images/s over --gen runs. Speech programs
// (encoder + text_decoder): encoder ms over 5 runs, then --gen greedy decode
// steps through the self-attention cache, in tokens/s.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backends/builtin/builtin.h"
#include "backends/cuda/runtime/cuda_backend.h"
#include "backends/cuda/runtime/device.h"
#include "backends/xnnpack/runtime/xnnpack_backend.h"
#include "bench/bench.h"
#include "kernels/optimized/qgemm.h"
#include "kernels/optimized/simd_kernels.h"
#include "cli/commands.h"
#include "kernels/optimized/kernels.h"

namespace hf2pte::cli {

CLI::App* add_bench_command(CLI::App& app, BenchArgs& a) {
  auto* cmd = app.add_subcommand("bench", "prefill/decode tokens/s and decode's share of the memory bandwidth");
  cmd->add_option("pte", a.pte, ".pte file (LLM program)")->required();
  cmd->add_option("--prompt-len", a.prompt_len, "prompt tokens for the prefill (default 128)");
  cmd->add_option("--gen", a.gen, "decode steps (default 64); image programs: timed forward runs");
  cmd->add_option("--encoder-runs", a.encoder_runs, "speech programs: timed encoder runs (default 5)");
  cmd->add_option("--threads", a.threads, "kernel threads (default: all cores)");
  cmd->add_flag("--huge-pages", a.huge_pages, kHugePagesHelp);
  return cmd;
}

namespace {

/// Fixed pseudo-random floats in [-1, 1): the same input every run and build.
std::vector<float> bench_values(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t seed = 1;
  for (auto& x : v) x = float((seed = seed * 1664525u + 1013904223u) >> 8) / float(1 << 23) - 1.0f;
  return v;
}

/// Median and min of `runs` calls of `fn` (milliseconds), after one untimed call.
Result<std::pair<double, double>> time_runs(int runs, const std::function<Status()>& fn) {
  HF2PTE_RETURN_IF_ERROR(fn());
  std::vector<double> ms;
  for (int i = 0; i < std::max(runs, 1); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    HF2PTE_RETURN_IF_ERROR(fn());
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return std::pair{ms[ms.size() / 2], ms.front()};
}

// Image programs: forward on fixed pseudo-random pixel_values at the
// program's input size, one untimed run first, then --gen timed runs.
int run_image_bench(const BenchArgs& a, rt::Program& program) {
  auto method = program.load_method("forward", optimized_registry());
  if (!method) return fail(method.status());
  auto meta = (*method)->input_meta(0);
  if (meta.dynamism != rt::ShapeDynamism::kStatic) {  // fully convolutional: the size it was exported for
    auto side = constant_output(program, "get_image_size");
    if (!side) return fail(side.status());
    if (*side && (*side)->is_int()) meta.sizes[2] = meta.sizes[3] = (*side)->i;
  }
  int64_t n = 1;
  for (int64_t d : meta.sizes) n *= d;
  const HostTensor input = HostTensor::from(ScalarType::kFloat, meta.sizes, bench_values(n));
  auto t = time_runs(a.gen, [&]() -> Status {
    HF2PTE_RETURN_IF_ERROR((*method)->set_input(0, input));
    return (*method)->execute();
  });
  if (!t) return fail(t.status());
  std::printf("image [%s]: %d runs (after one untimed run)\n", fmt::format("{}", fmt::join(meta.sizes, ", ")).c_str(),
              std::max(a.gen, 1));
  std::printf("forward: median %.2f ms, min %.2f ms, %.2f images/s\n", t->first, t->second, 1000.0 / t->first);
  return 0;
}

// Speech programs: the encoder on fixed pseudo-random log-mel features at the
// program's size, then greedy decoding from decoder_start_token_id, each step
// one token through the self-attention cache against the encoder's states.
int run_speech_bench(const BenchArgs& a, rt::Program& program) {
  auto encoder = program.load_method("encoder", optimized_registry());
  auto decoder = program.load_method("text_decoder", optimized_registry());
  if (!encoder) return fail(encoder.status());
  if (!decoder) return fail(decoder.status());
  auto meta = (*encoder)->input_meta(0);
  const HostTensor features = HostTensor::from(ScalarType::kFloat, meta.sizes, bench_values(meta.sizes[1] * meta.sizes[2]));
  auto enc = time_runs(a.encoder_runs, [&]() -> Status {
    HF2PTE_RETURN_IF_ERROR((*encoder)->set_input(0, features));
    return (*encoder)->execute();
  });
  if (!enc) return fail(enc.status());
  auto states = (*encoder)->output_tensor(0);
  if (!states) return fail(states.status());
  auto start = constant_output(program, "decoder_start_token_id");
  auto max_len = constant_output(program, "get_max_seq_len");
  if (!start || !max_len) return fail(!start ? start.status() : max_len.status());
  if (!*start || !(*start)->is_int() || !*max_len || !(*max_len)->is_int()) {
    return fail(make_error(ErrorCode::kInvalidProgram, "speech program without decoder_start_token_id / get_max_seq_len ({})", a.pte));
  }
  const int64_t steps = std::min<int64_t>(std::max(a.gen, 1), (*max_len)->i);
  int64_t token = (*start)->i;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t pos = 0; pos < steps; ++pos) {
    Status st = (*decoder)->set_input(0, HostTensor::from(ScalarType::kLong, {1, 1}, std::vector<int64_t>{token}));
    if (st) st = (*decoder)->set_input(1, *states);
    if (st) st = (*decoder)->set_input(2, HostTensor::from(ScalarType::kLong, {1}, std::vector<int64_t>{pos}));
    if (st) st = (*decoder)->execute();
    if (!st) return fail(st);
    auto logits = (*decoder)->output_tensor(0);
    if (!logits) return fail(logits.status());
    const float* l = logits->data<float>();
    token = int64_t(std::max_element(l, l + logits->sizes.back()) - l);
  }
  const double dec_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("encoder [%s]: %d runs, median %.2f ms, min %.2f ms\n", fmt::format("{}", fmt::join(meta.sizes, ", ")).c_str(),
              std::max(a.encoder_runs, 1), enc->first, enc->second);
  std::printf("decode: %lld tokens, %.1f tok/s (%.3f ms/token, cross-attention over %lld encoder states)\n",
              static_cast<long long>(steps), double(steps) / dec_s, 1000.0 * dec_s / double(steps),
              static_cast<long long>(states->sizes[1]));
  return 0;
}

}  // namespace

int run_bench(const BenchArgs& a) {
  apply_huge_pages(a.huge_pages);
  {
    auto program = rt::Program::load(a.pte);
    if (!program) return fail(program.status());
    auto image = is_image_classifier(**program);
    if (!image) return fail(image.status());
    auto speech = constant_output(**program, "is_encoder_decoder");
    if (!speech) return fail(speech.status());
    const bool is_speech = *speech && (*speech)->is_bool() && (*speech)->i != 0;
    // Every figure names the CPU and kernel tables it was measured with.
    std::printf("cpu: %s; kernels: %s (float loops), %s (quantized)\n", bench::cpu_model().c_str(), kernels::simd().isa,
                kernels::qgemm_isa());
    if (*image || is_speech) {
      if (a.threads > 0) kernels::set_kernel_threads(a.threads);
      if (auto st = backends::register_builtin_backends(); !st) return fail(st);
      return *image ? run_image_bench(a, **program) : run_speech_bench(a, **program);
    }
  }
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
  std::printf("prefill: %d tokens, %.1f tok/s (%.3f s, mean of %d after the first), %.1f GFLOP/s of linear-layer work; "
              "first prefill %.3f s (%.1f tok/s: its buffers paged in)\n",
              r->prompt_len, r->prefill_tok_s, r->prefill_seconds, r->prefill_runs, gflop_per_token * r->prefill_tok_s,
              r->cold_prefill_seconds, r->prompt_len / r->cold_prefill_seconds);
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
  // A CUDA delegate on a GPU: the limit is the device's memory, not the host's.
  const std::string executor = cuda::last_executor_description();
  if (!executor.empty()) std::printf("cuda delegate: %s\n", executor.c_str());
  if (executor.rfind("device", 0) == 0) {
    auto bw = cuda::measure_device_read_bandwidth();
    if (!bw) return fail(bw.status());
    const double read = double(r->weight_bytes_per_token) * r->decode_tok_s / 1e9;
    std::printf("device read bandwidth: %.1f GB/s; decode share of the device limit: %.1f %% (limit %.1f tok/s; decode "
                "read %.1f GB/s of weights)\n",
                *bw, 100.0 * read / *bw, *bw * 1e9 / double(std::max<uint64_t>(r->weight_bytes_per_token, 1)), read);
  }
  return 0;
}

}  // namespace hf2pte::cli
