#!/usr/bin/env bash
# One short run on a machine with an NVIDIA GPU checks the CUDA backend
# (docs/cuda.md, "Running the device check"): takes its binaries from the
# prebuilt bundle .device/bundle.tar.xz when there is one (made here by
# scripts/device-bundle.sh, for a machine that cannot install our build
# dependencies), else from a build carried over in $HF2PTE_CUDA_BUILD (default
# build-cuda), else builds with CUDA; runs every CUDA test on the device,
# exports the bench models with --backend cuda and benchmarks them. Every
# result goes to one file; the script keeps going after a failure and exits
# non-zero if anything failed. Budget: under 10 minutes on one H200.
#
#   bash scripts/device-check.sh [RESULTS_FILE]   (default: device-check.txt, or $OUT/device-check.txt)
#   bash scripts/device-check.sh --source-hash    (what a bundle records of the sources it was built from)
# HF2PTE_DEVICE_BUNDLE=FILE takes another bundle; HF2PTE_DEVICE_BUNDLE= (empty) ignores it.
set -uo pipefail
cd "$(dirname "$0")/.."
# The sources a build depends on, hashed without git (the device's copy of the
# tree may have no .git): a bundle built from other sources is reported.
source_hash() {
  find CMakeLists.txt cmake src tests -path tests/data -prune -o -type f ! -name '*.tmp.*' -print0 |
    LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
}
if [ "${1:-}" = --source-hash ]; then source_hash; exit 0; fi
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

# 1. The binaries: a prebuilt bundle, a carried build, or a build here.
bundle=${HF2PTE_DEVICE_BUNDLE-.device/bundle.tar.xz}
if [ -n "$bundle" ] && [ -f "$bundle" ]; then
  unpacked=$(mktemp -d "${TMPDIR:-/tmp}/hf2pte-bundle.XXXXXX")
  trap 'rm -rf "$unpacked"' EXIT
  if command -v xz >/dev/null; then unpack=(tar -xJf "$bundle" -C "$unpacked")
  else unpack=(python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$bundle" "$unpacked"); fi
  step "unpack $bundle" 60 "${unpack[@]}" || { say "device-check: cannot unpack $bundle"; exit 1; }
  b=$unpacked/hf2pte-device
  say "mode: prebuilt bundle $bundle ($(du -h "$bundle" | cut -f1)), unpacked to $b; no configure/build"
  sed 's/^/  bundle /' "$b/MANIFEST" | tee -a "$results"
  built_from=$(sed -n 's/^sources: //p' "$b/MANIFEST")
  here=$(source_hash)
  [ "$built_from" = "$here" ] || say "  warning: this checkout's sources ($here) are not the bundle's ($built_from): rebuild it with scripts/device-bundle.sh"
  libs=$b/lib
  # cuBLAS is opened at first use (docs/cuda.md), from the device's toolkit.
  cublas=$(sed -n 's/.*\(libcublas\.so\.[0-9][0-9]*\).*/\1/p' "$b/MANIFEST")
  cublas_at="NOT FOUND: the device executor's matrix products will fail"
  if ldconfig -p 2>/dev/null | grep -qF "${cublas:-libcublas.so} "; then
    cublas_at="found by the loader"
  else
    nvcc_dir=$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")
    for d in "$nvcc_dir/../lib64" "$nvcc_dir/../targets/x86_64-linux/lib" /usr/local/cuda/lib64 /usr/local/cuda*/lib64; do
      if [ -e "$d/${cublas:-libcublas.so}" ]; then cublas_at=$(cd "$d" && pwd); libs=$libs:$cublas_at; break; fi
    done
  fi
  say "  ${cublas:-libcublas}: $cublas_at"
  # Older libstdc++/libgcc_s than the binaries need: the bundle's own (compat/).
  if LD_LIBRARY_PATH=$libs ldd "$b"/bin/* 2>&1 | grep -q 'version .* not found'; then
    libs=$b/compat:$libs
    say "  the system libstdc++/libgcc_s are older than the binaries need: using the bundle's compat/"
  fi
  export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export HF2PTE_TEST_BINARY_DIR=$work/tests  # the tests' own files (default: the build dir)
  cli=$b/bin/hf2pte make_checkpoint=$b/bin/hf2pte_make_bench_checkpoint
  device_test=$b/bin/backend_cuda_device_test export_test=$b/bin/backend_cuda_export_test
  half_test=$b/bin/half_precision_test
  # Where each library the binaries load comes from (all in the bundle, or the base system's).
  say "=== bundle libraries"
  for f in "$b"/bin/*; do ldd "$f" 2>&1; done | awk '/=>|not found/ { sub(/ \(0x[0-9a-f]+\)$/, ""); sub(/^[ \t]+/, ""); print "  " $0 }' |
    sort -u >> "$results"
  if for f in "$b"/bin/*; do ldd "$f" 2>&1; done | grep -q 'not found'; then
    say "=== bundle libraries: some are missing (see above)"; failed=1
  fi
else
  if [ -x "$build/src/cli/hf2pte" ] && [ -x "$build/src/backends/cuda/runtime/backend_cuda_device_test" ]; then
    say "mode: carried build $build; no configure/build"
  else
    say "mode: build from source in $build"
    jobs=$(nproc)
    step "configure" 300 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHF2PTE_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES="${HF2PTE_CUDA_ARCH:-90}" || { say "device-check: cannot configure"; exit 1; }
    step "build" 420 cmake --build "$build" -j "$jobs" --target hf2pte hf2pte_make_bench_checkpoint \
      backend_cuda_device_test backend_cuda_export_test half_precision_test || { say "device-check: build failed"; exit 1; }
  fi
  cli=$build/src/cli/hf2pte make_checkpoint=$build/src/bench/hf2pte_make_bench_checkpoint
  device_test=$build/src/backends/cuda/runtime/backend_cuda_device_test
  export_test=$build/src/backends/cuda/export/backend_cuda_export_test half_test=$build/tests/half_precision_test
fi

# 2. Tests on the device (HF2PTE_CUDA_EXECUTOR=device: no silent fallback to the CPU).
export HF2PTE_CUDA_EXECUTOR=device
export HF2PTE_TEST_SOURCE_DIR=$PWD  # tests/data of this checkout, wherever the binaries were built
step "device ops vs the CPU kernels" 120 "$device_test"
step "partitioner and payload" 60 "$export_test"
step "every decoder fixture on the device (bf16 bound)" 180 "$half_test" --gtest_filter='*cuda*'
HF2PTE_CUDA_GRAPHS=0 step "fixtures without CUDA graphs" 180 "$half_test" \
  --gtest_filter='*llama_gqa_cuda*:*gemma2_cuda*:*mixtral_cuda*'

# 3. Bench: random-weight bench-110m and bench-1b shapes (docs/performance.md), bf16 on the device.
for preset in bench-110m bench-1b; do
  dir="$work/$preset"
  [ -f "$dir/model.safetensors" ] || step "make $preset" 120 "$make_checkpoint" "$preset" "$dir"
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
