#!/usr/bin/env bash
# Robustness job: builds everything with clang + AddressSanitizer +
# UndefinedBehaviorSanitizer, runs the whole test suite under them, then runs
# each fuzz target for FUZZ_SECONDS (default 20) on seed corpora from tests/data.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache hits whatever folder the checkout is in: paths under the checkout's
# parent are hashed relative to the build dir, and the working dir is not hashed.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$PWD")}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
FUZZ_SECONDS="${FUZZ_SECONDS:-20}"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ \
  -DHF2PTE_SANITIZE=ON -DHF2PTE_FUZZ=ON -DHF2PTE_CUDA=OFF >/dev/null
cmake --build build-asan -j "$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-asan --output-on-failure -j "$(nproc)"

corpus() {  # corpus NAME FILES...: a fresh corpus folder seeded with FILES
  local dir="build-asan/corpus/$1"; shift
  rm -rf "$dir"; mkdir -p "$dir"
  local i=0
  for f in "$@"; do cp "$f" "$dir/$((i++))-$(basename "$f")"; done
  echo "$dir"
}
run_fuzzer() {  # run_fuzzer TARGET CORPUS
  echo "fuzz: $1 for ${FUZZ_SECONDS}s"
  "build-asan/fuzz/$1" "$2" -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -max_len=262144 \
    -print_final_stats=1 2>&1 | grep -E "stat::number_of_executed_units|cov:|ERROR|SUMMARY" | tail -4
  test "${PIPESTATUS[0]}" -eq 0
}
run_fuzzer fuzz_pte "$(corpus pte tests/data/conformance/*.pte tests/data/conformance/lstm/lstm.pte)"
run_fuzzer fuzz_safetensors "$(corpus safetensors tests/data/fixtures/llama-gqa-tied-bf16/model.safetensors)"
run_fuzzer fuzz_config "$(corpus config tests/data/fixtures/*/config.json)"
run_fuzzer fuzz_npy "$(corpus npy tests/data/fixtures/llama-mha/*.npy)"
# Whole XNNPACK-delegated programs: fuzz_xnnpack loads them with the backend
# registered, so mutations of the delegate segment reach the payload parser
# (seeds: upstream-written programs and our channels-last ResNet).
run_fuzzer fuzz_xnnpack "$(corpus xnnpack tests/data/conformance/{add,dynamic,quantized}.pte fuzz/seeds/xnnpack/*.pte)"
# hf2pte's CUDA delegate payloads: parser + CPU reference executor.
run_fuzzer fuzz_cuda "$(corpus cuda fuzz/seeds/cuda/*)"
run_fuzzer fuzz_tokenizer "$(corpus tokenizer models/stories260K/tokenizer.json fuzz/seeds/tokenizer/*.json)"
run_fuzzer fuzz_chat_template "$(corpus chat_template fuzz/seeds/chat_template/*.jinja)"
# hf2pte serve's request bodies (both endpoints) and its stop-string matcher.
run_fuzzer fuzz_openai_request "$(corpus openai fuzz/seeds/openai/*.json)"
run_fuzzer fuzz_image "$(corpus image tests/data/fixtures/vit-preprocess/image.png)"
run_fuzzer fuzz_wav "$(corpus wav tests/data/fixtures/whisper-logmel/audio.wav)"
