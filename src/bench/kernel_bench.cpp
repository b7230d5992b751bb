// hf2pte_kernel_bench [--threads N] [--quantized | --conv (only those kernels)] [--qisa generic|avx2|avx512vnni]: the optimized kernels' inner loops against
// OpenBLAS in one run (same threads, same buffers), best of several reps:
//  - GEMM 1024^3 (prefill-sized): OpenBLAS sgemm on its own threads vs gemm_f32
//    (what mm/addmm use: the kernel pool splitting columns over 1-thread sgemm
//    blocks, oneDNN where the build found it);
//  - decode GEMVs x[1,K] . W[K,N] at the linear-layer shapes of bench-110m and
//    bench-1b: gemm_f32_nt on W stored [N,K] (what XNNPACK FullyConnected
//    runs: one sequential row per output), gemm_f32 on [K,N] (row chunks on the
//    pool; portable mm), our [K,N] AVX-512 GEMV on the pool, OpenBLAS sgemm
//    (M = 1) and sgemv on its threads, in GB/s of weights;
//  - the streaming read bandwidth of the pool (a SIMD sum over 512 MiB), and
//    the quantized-filter kernels (qgemm.h) at the same shapes: decode GEMV in
//    GB/s of packed weight bytes (and its share of that bandwidth), prefill
//    GEMM (M = 512) in GOP/s, for int8 / int4 / int4 group-32 filters with
//    dynamic int8 activations and with fp32 ones (weight-only);
//  - --conv: the NHWC convolution of XNNPACK payloads (nhwc.h) at ResNet-50's
//    layer shapes (224^2 input), in GFLOP/s, against OpenBLAS sgemm on the
//    same [pixels, K] x [K, Cout] product without the patch gathering.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench.h"
#include "kernels/optimized/gemm.h"
#include "kernels/optimized/kernels.h"
#include "kernels/optimized/nhwc.h"
#include "kernels/optimized/qgemm.h"
#include "kernels/optimized/simd_kernels.h"
#include "kernels/optimized/thread_pool.h"

namespace {

double best_seconds(int reps, const std::function<void()>& fn) {
  fn();  // warm-up
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

std::vector<float> filled(size_t n, float v) { return std::vector<float>(n, v); }

/// GB/s of a streaming sum of 512 MiB (hf2pte bench's probe: the widest loads,
/// 1, 2 or 4 streams per thread, the best): the machine's streaming read limit.
double read_bandwidth(int threads) { return hf2pte::bench::measure_read_bandwidth(threads, size_t(512) << 20); }

/// Random-ish packed filter of `kind` for [n, k].
hf2pte::kernels::QFilter bench_filter(hf2pte::kernels::QFilterKind kind, int64_t n, int64_t k) {
  using namespace hf2pte::kernels;
  std::vector<float> scales(size_t(n * (k / 32)), 0.0078125f);
  if (kind == QFilterKind::kInt8) {
    std::vector<int8_t> w(size_t(n * k));
    for (size_t i = 0; i < w.size(); ++i) w[i] = int8_t((i * 37) % 255 - 127);
    return pack_qfilter_int8(w.data(), n, k, scales.data());
  }
  std::vector<uint8_t> w(size_t(n * ((k + 1) / 2)));
  for (size_t i = 0; i < w.size(); ++i) w[i] = uint8_t((i * 73) % 256);
  return kind == QFilterKind::kInt4 ? pack_qfilter_int4(w.data(), n, k, scales.data())
                                    : pack_qfilter_int4_block(w.data(), n, k, 32, scales.data());
}

void bench_quantized(int threads) {
  using namespace hf2pte::kernels;
  const double bw = read_bandwidth(threads);
  std::printf("\nstreaming read (SIMD sum of 512 MiB, %d threads): %.1f GB/s; quantized kernels on %s\n", threads, bw,
              qgemm_isa());
  struct QShape {
    const char* what;
    int64_t K, N;
  };
  const QShape shapes[] = {{"110m gate/up 768x2048", 768, 2048},
                           {"110m down 2048x768", 2048, 768},
                           {"1b q/o 2048x2048", 2048, 2048},
                           {"1b gate/up 2048x5632", 2048, 5632},
                           {"1b down 5632x2048", 5632, 2048}};
  struct QKind {
    const char* what;
    QFilterKind kind;
    bool dynamic;
  };
  const QKind kinds[] = {{"8da8w", QFilterKind::kInt8, true},      {"8da4w g32", QFilterKind::kInt4Block, true},
                         {"8da4w ch", QFilterKind::kInt4, true},   {"8w", QFilterKind::kInt8, false},
                         {"4w g32", QFilterKind::kInt4Block, false}};
  std::printf("%-24s %-10s %10s %8s %12s %14s\n", "quantized GEMV M=1", "scheme", "GB/s", "of bw", "GEMM M=512",
              "hot GB/s");
  for (const auto& sh : shapes) {
    for (const auto& kd : kinds) {
      QFilter base = bench_filter(kd.kind, sh.N, sh.K);
      const size_t bytes = base.bytes();
      const int copies = int(std::max<size_t>(2, (size_t(256) << 20) / bytes));
      std::vector<QFilter> ws(size_t(copies), base);
      std::vector<float> x(size_t(512 * sh.K));
      for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 13 % 97) - 48) * 0.01f;
      std::vector<float> y(size_t(512 * sh.N));
      int next = 0;
      auto run = [&](int64_t m, const QFilter& w) {
        if (kd.dynamic) {
          qgemm_dynamic(m, x.data(), sh.K, w, nullptr, y.data());
        } else {
          qgemm_weight_only(m, x.data(), w, nullptr, y.data());
        }
      };
      const double s = best_seconds(5, [&] {
        for (int c = 0; c < copies; ++c) run(1, ws[size_t((next++) % copies)]);
      });
      const double gbs = double(bytes) * copies / s / 1e9;
      // The same filter again and again: cache-resident where it fits, so the kernel's own speed.
      const double hot = double(bytes) / best_seconds(20, [&] { run(1, base); }) / 1e9;
      const double sg = best_seconds(3, [&] { run(512, base); });
      std::printf("%-24s %-10s %10.1f %7.0f%% %8.1f GOP/s %9.1f\n", sh.what, kd.what, gbs, 100.0 * gbs / bw,
                  2.0 * 512 * double(sh.N) * double(sh.K) / sg / 1e9, hot);
    }
  }
}

}  // namespace

void bench_conv(int threads) {
  using namespace hf2pte::kernels;
  struct Conv {
    const char* what;
    int64_t hw, cin, cout, k, stride;
    int count;  ///< layers of this shape in ResNet-50
  };
  const Conv convs[] = {
      {"stem 7x7/2 3->64", 224, 3, 64, 7, 2, 1},      {"s1 1x1 64->64", 56, 64, 64, 1, 1, 1},
      {"s1 1x1 256->64", 56, 256, 64, 1, 1, 2},       {"s1 3x3 64->64", 56, 64, 64, 3, 1, 3},
      {"s1 1x1 64->256", 56, 64, 256, 1, 1, 4},       {"s2 1x1 256->128", 56, 256, 128, 1, 1, 1},
      {"s2 3x3/2 128->128", 56, 128, 128, 3, 2, 1},   {"s2 1x1/2 256->512", 56, 256, 512, 1, 2, 1},
      {"s2 1x1 512->128", 28, 512, 128, 1, 1, 3},     {"s2 3x3 128->128", 28, 128, 128, 3, 1, 3},
      {"s2 1x1 128->512", 28, 128, 512, 1, 1, 4},     {"s3 1x1 512->256", 28, 512, 256, 1, 1, 1},
      {"s3 3x3/2 256->256", 28, 256, 256, 3, 2, 1},   {"s3 1x1/2 512->1024", 28, 512, 1024, 1, 2, 1},
      {"s3 1x1 1024->256", 14, 1024, 256, 1, 1, 5},   {"s3 3x3 256->256", 14, 256, 256, 3, 1, 5},
      {"s3 1x1 256->1024", 14, 256, 1024, 1, 1, 6},   {"s4 1x1 1024->512", 14, 1024, 512, 1, 1, 1},
      {"s4 3x3/2 512->512", 14, 512, 512, 3, 2, 1},   {"s4 1x1/2 1024->2048", 14, 1024, 2048, 1, 2, 1},
      {"s4 1x1 2048->512", 7, 2048, 512, 1, 1, 2},    {"s4 3x3 512->512", 7, 512, 512, 3, 1, 2},
      {"s4 1x1 512->2048", 7, 512, 2048, 1, 1, 3},
  };
  std::printf("\nNHWC conv at ResNet-50 shapes, %d threads       GFLOP/s   sgemm-only   ms x layers   packed ms   winograd ms\n",
              threads);
  double total_ms = 0, total_flop = 0;
  for (const Conv& c : convs) {
    Window2d w;
    w.ih = w.iw = c.hw;
    w.kernel_h = w.kernel_w = c.k;
    w.stride_h = w.stride_w = c.stride;
    w.pad_top = w.pad_left = c.k / 2;
    w.oh = w.ow = window_output_size(c.hw, c.k / 2, c.k / 2, c.k, c.stride, 1);
    const int64_t pixels = w.oh * w.ow, kdim = c.k * c.k * c.cin;
    auto x = filled(size_t(c.hw * c.hw * c.cin), 0.5f), f = filled(size_t(c.cout * kdim), 0.01f);
    auto bias = filled(size_t(c.cout), 0.1f), y = filled(size_t(pixels * c.cout), 0.0f);
    auto a = filled(size_t(pixels * kdim), 0.5f);
    const double flop = 2.0 * double(pixels) * double(kdim) * double(c.cout);
    double ours = 1e30, blas = 1e30;
    for (int round = 0; round < 2; ++round) {
      ours = std::min(ours, best_seconds(5, [&] {
        conv2d_nhwc_f32(w, 1, c.cin, c.cout, x.data(), f.data(), bias.data(), nullptr, 0.0f, 1e30f, y.data());
      }));
      openblas_set_num_threads(threads);
      blas = std::min(blas, best_seconds(5, [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(pixels), int(c.cout), int(kdim), 1.0f, a.data(),
                    int(kdim), f.data(), int(kdim), 0.0f, y.data(), int(c.cout));
      }));
      openblas_set_num_threads(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    // The packed-filter tiles (AVX-512 CPUs), and Winograd F(2x2, 3x3) where it applies.
    double packed = 0;
    if (packed_conv_available()) {
      const PackedConvFilter pf = pack_conv_filter(f.data(), bias.data(), c.cout, c.k, c.k, c.cin);
      packed = best_seconds(5, [&] { conv2d_packed_nhwc_f32(w, pf, x.data(), nullptr, 0.0f, 1e30f, y.data()); });
    }
    double wino = 0;
    if (winograd_applies(w, 1)) {
      const WinogradFilter wf = winograd_filter_3x3(f.data(), c.cout, c.cin);
      wino = best_seconds(5, [&] {
        conv2d_3x3_winograd_nhwc_f32(w, wf, x.data(), bias.data(), nullptr, 0.0f, 1e30f, y.data());
      });
    }
    const double direct = packed > 0 ? packed : ours;  // what the XNNPACK runtime runs
    total_ms += (wino > 0 && winograd_pays(w, c.cin) ? wino : direct) * 1e3 * c.count;
    total_flop += flop * c.count;
    std::printf("  %-22s %6lldx%-4lld %8.1f %10.1f %9.2f x %d", c.what, (long long)pixels, (long long)kdim,
                flop / ours / 1e9, flop / blas / 1e9, ours * 1e3, c.count);
    std::printf("   %9.2f", packed * 1e3);
    if (wino > 0) std::printf("   %11.2f", wino * 1e3);
    std::printf("\n");
  }
  std::printf("  all 53 convolutions (Winograd where it pays): %.1f ms, %.1f GFLOP/s of direct-convolution work\n",
              total_ms, total_flop / (total_ms / 1e3) / 1e9);
}

int main(int argc, char** argv) {
  using namespace hf2pte::kernels;
  int threads = 2;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--threads") threads = std::atoi(argv[++i]);
    if (std::string(argv[i]) == "--qisa" && !qgemm_force_isa(argv[++i])) {
      std::fprintf(stderr, "hf2pte_kernel_bench: error: this CPU cannot run the %s quantized kernels (--qisa)\n", argv[i]);
      return 1;
    }
  }
  bool quantized_only = false, conv_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--quantized") quantized_only = true;
    if (std::string(argv[i]) == "--conv") conv_only = true;
  }
  set_kernel_threads(threads);
  std::printf("cpu: %s; threads %d, SIMD table %s, quantized kernels %s\n", hf2pte::bench::cpu_model().c_str(), threads,
              simd().isa, qgemm_isa());
  if (quantized_only) {
    bench_quantized(threads);
    return 0;
  }
  if (conv_only) {
    bench_conv(threads);
    return 0;
  }

  {
    const int n = 1024;
    auto a = filled(size_t(n) * n, 0.5f), b = filled(size_t(n) * n, 0.25f), c = filled(size_t(n) * n, 0.0f);
    const double flop = 2.0 * n * n * n;
    for (int round = 0; round < 3; ++round) {  // alternate, so both see the same machine load
      openblas_set_num_threads(threads);
      double blas = best_seconds(5, [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let OpenBLAS's threads stop spinning
      double ours = best_seconds(5, [&] { gemm_f32(n, n, n, 1.0f, a.data(), b.data(), 0.0f, c.data()); });
      std::printf("GEMM 1024^3: OpenBLAS sgemm (%d threads) %.1f GFLOP/s, gemm_f32 (pool + 1-thread %s sgemm) %.1f GFLOP/s: %.2fx\n",
                  threads, flop / blas / 1e9, gemm_engine(), flop / ours / 1e9, blas / ours);
    }
    openblas_set_num_threads(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }

  struct Shape {
    const char* what;
    int K, N;
  };
  const Shape shapes[] = {{"110m q/k/v/o 768x768", 768, 768},     {"110m gate/up 768x2048", 768, 2048},
                          {"110m down 2048x768", 2048, 768},      {"110m lm_head 768x32000", 768, 32000},
                          {"1b gate/up 2048x5632", 2048, 5632},   {"1b down 5632x2048", 5632, 2048},
                          {"1b lm_head 2048x32000", 2048, 32000}};
  std::printf("%-26s %10s %10s %10s %10s %10s %8s   (GB/s of weights)\n", "GEMV x[1,K].W[K,N]", "f32_nt", "gemm_f32",
              "simd gemv", "sgemm", "sgemv", "nt/blas");
  for (const auto& sh : shapes) {
    // Several copies of W, cycled, so the set exceeds L3 (32 MiB) like a model's weights do.
    const size_t wsize = size_t(sh.K) * sh.N;
    const int copies = int(std::max<size_t>(1, (size_t(256) << 20) / (wsize * 4)));
    std::vector<std::vector<float>> ws(size_t(copies), filled(wsize, 0.01f));
    auto x = filled(size_t(sh.K), 1.0f), y = filled(size_t(sh.N), 0.0f);
    int next = 0;
    const SimdKernels& k = simd();
    auto per_call = [&](const std::function<void(const float*)>& fn) {
      double s = best_seconds(5, [&] {
        for (int c = 0; c < copies; ++c) fn(ws[size_t((next++) % copies)].data());
      });
      return double(wsize) * 4 * copies / s / 1e9;
    };
    double nt = 0, ours = 0, simd_gemv = 0, sgemm = 0, sgemv = 0;
    for (int round = 0; round < 3; ++round) {  // alternate: every variant sees the same machine load
      // The same buffer read as W [N, K]: same bytes, the layout FullyConnected holds.
      nt = std::max(nt, per_call([&](const float* w) { gemm_f32_nt(1, sh.N, sh.K, x.data(), w, y.data(), nullptr); }));
      ours = std::max(ours, per_call([&](const float* w) { gemm_f32(1, sh.N, sh.K, 1.0f, x.data(), w, 0.0f, y.data()); }));
      simd_gemv = std::max(simd_gemv, per_call([&](const float* w) {
        parallel_for(sh.N, 64, [&](int64_t n0, int64_t n1) { k.gemv(x.data(), w, nullptr, y.data(), sh.K, sh.N, n0, n1); });
      }));
      openblas_set_num_threads(threads);
      sgemm = std::max(sgemm, per_call([&](const float* w) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, sh.N, sh.K, 1.0f, x.data(), sh.K, w, sh.N, 0.0f, y.data(), sh.N);
      }));
      sgemv = std::max(sgemv, per_call([&](const float* w) {
        cblas_sgemv(CblasRowMajor, CblasTrans, sh.K, sh.N, 1.0f, w, sh.N, x.data(), 1, 0.0f, y.data(), 1);
      }));
      openblas_set_num_threads(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    std::printf("%-26s %10.1f %10.1f %10.1f %10.1f %10.1f %7.2fx\n", sh.what, nt, ours, simd_gemv, sgemm, sgemv,
                nt / std::max(sgemm, sgemv));
  }
  bench_quantized(threads);
  return 0;
}
