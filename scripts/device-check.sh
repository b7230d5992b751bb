#!/usr/bin/env bash
# One short run on a machine with an NVIDIA GPU checks the CUDA backend
# (docs/cuda.md): builds with CUDA (or uses a build carried over in
# $HF2PTE_CUDA_BUILD, default build-cuda), runs every CUDA test on the device,
# exports the bench models with --backend cuda and benchmarks them. Every
# result goes to one file; the script keeps going after a failure and exits
# non-zero if anything failed. Budget: under 10 minutes on one H200.
#
#   bash scripts/device-check.sh [RESULTS_FILE]   (default: device-check.txt, or $OUT/device-check.txt)
set -uo pipefail
cd "$(dirname "$0")/.."
results=${1:-${OUT:+$OUT/device-check.txt}}
results=${results:-device-check.txt}
build=${HF2PTE_CUDA_BUILD:-build-cuda}
work=${HF2PTE_CUDA_WORK:-/tmp/hf2pte-device-check}
mkdir -p "$(dirname "$results")" "$work"
: > "$results"
failed=0
say() { echo "$*" | tee -a "$results"; }
step() {  # step NAME SECONDS CMD...: runs CMD with a time limit, output to the results file
  local name=$1 limit=$2; shift 2
  say "=== $name"
  local t0=$SECONDS
  timeout "$limit" "$@" >>"$results" 2>&1
  local rc=$?
  say "=== $name: rc=$rc, $((SECONDS - t0)) s"
  [ $rc -eq 0 ] || failed=1
  return $rc
}

say "device-check: $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
step "nvidia-smi" 30 nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.memory --format=csv
say "host cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores"

# 1. Build (skipped when a CUDA build was carried over).
if [ ! -x "$build/src/cli/hf2pte" ] || [ ! -x "$build/src/backends/cuda/runtime/backend_cuda_device_test" ]; then
  jobs=$(nproc)
  step "configure" 300 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHF2PTE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${HF2PTE_CUDA_ARCH:-90}" || { say "device-check: cannot configure"; exit 1; }
  step "build" 420 cmake --build "$build" -j "$jobs" --target hf2pte hf2pte_make_bench_checkpoint \
    backend_cuda_device_test backend_cuda_export_test half_precision_test || { say "device-check: build failed"; exit 1; }
fi

# 2. Tests on the device (HF2PTE_CUDA_EXECUTOR=device: no silent fallback to the CPU).
export HF2PTE_CUDA_EXECUTOR=device
step "device ops vs the CPU kernels" 120 "$build/src/backends/cuda/runtime/backend_cuda_device_test"
step "partitioner and payload" 60 "$build/src/backends/cuda/export/backend_cuda_export_test"
step "every decoder fixture on the device (bf16 bound)" 180 "$build/tests/half_precision_test" --gtest_filter='*cuda*'
HF2PTE_CUDA_GRAPHS=0 step "fixtures without CUDA graphs" 180 "$build/tests/half_precision_test" \
  --gtest_filter='*llama_gqa_cuda*:*gemma2_cuda*:*mixtral_cuda*'

# 3. Bench: random-weight bench-110m and bench-1b shapes (docs/performance.md), bf16 on the device.
cli="$build/src/cli/hf2pte"
for preset in bench-110m bench-1b; do
  dir="$work/$preset"
  [ -f "$dir/model.safetensors" ] || step "make $preset" 120 "$build/src/bench/hf2pte_make_bench_checkpoint" "$preset" "$dir"
  [ -f "$work/$preset-cuda.pte" ] || step "export $preset --backend cuda" 120 "$cli" export "$dir" \
    -o "$work/$preset-cuda.pte" --backend cuda --max-seq-len 1024 --no-validate
  step "bench $preset (prefill 512)" 120 "$cli" bench "$work/$preset-cuda.pte" --prompt-len 512 --gen 128
  step "bench $preset (prefill 128)" 60 "$cli" bench "$work/$preset-cuda.pte" --prompt-len 128 --gen 64
done
# A quantized cuda program (int8 activations x int4 weights inside the delegate).
step "export bench-110m --backend cuda --qlinear 8da4w" 120 "$cli" export "$work/bench-110m" \
  -o "$work/bench-110m-cuda-8da4w.pte" --backend cuda --max-seq-len 1024 --qlinear 8da4w --qembedding 8w --no-validate
step "bench bench-110m 8da4w (prefill 128)" 60 "$cli" bench "$work/bench-110m-cuda-8da4w.pte" --prompt-len 128 --gen 64
step "export stories260K --backend cuda" 60 "$cli" export models/stories260K -o "$work/s260-cuda.pte" --backend cuda
step "generate (stories260K on the device)" 60 "$cli" generate "$work/s260-cuda.pte" --prompt "Once upon a time" \
  --max-new-tokens 48

say "device-check: $([ $failed -eq 0 ] && echo PASSED || echo FAILED) (results in $results)"
exit $failed
