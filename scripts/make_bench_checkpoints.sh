#!/usr/bin/env bash
# Writes the random-weight benchmark checkpoints (docs/performance.md) and
# exports them: bench-110m (stories110M shape, fp32, ~0.44 GB) and bench-1b
# (TinyLlama-1.1B shape, bf16 on disk, ~2.2 GB), each in fp32 and quantized
# (<preset>-8da4w.pte: --qlinear 8da4w --qembedding 8w; <preset>-8da8w.pte:
# --qlinear 8da8w --qembedding 8w; docs/quantization.md). Not part of CI (too big).
#
#   scripts/make_bench_checkpoints.sh [BUILD_DIR] [OUT_DIR] [MAX_SEQ_LEN]
#   (defaults: build, /tmp/hf2pte-bench, 512)
# then e.g.:  BUILD_DIR/src/cli/hf2pte bench OUT_DIR/bench-110m.pte --prompt-len 128 --gen 64
set -euo pipefail
build=${1:-build}
out=${2:-/tmp/hf2pte-bench}
max_seq=${3:-512}
mkdir -p "$out"
tool=$(find "$build" -name hf2pte_make_bench_checkpoint -type f -perm -u+x | head -1)
cli=$(find "$build" -name hf2pte -type f -perm -u+x | head -1)
[[ -n "$tool" && -n "$cli" ]] || { echo "build hf2pte and hf2pte_make_bench_checkpoint in $build first" >&2; exit 1; }
for preset in bench-110m bench-1b; do
  [[ -f "$out/$preset/model.safetensors" ]] || "$tool" "$preset" "$out/$preset"
  [[ -f "$out/$preset.pte" ]] || "$cli" export "$out/$preset" -o "$out/$preset.pte" --max-seq-len "$max_seq"
  for q in 8da4w 8da8w; do
    [[ -f "$out/$preset-$q.pte" ]] || "$cli" export "$out/$preset" -o "$out/$preset-$q.pte" --max-seq-len "$max_seq" \
      --qlinear "$q" --qembedding 8w
  done
done
ls -l "$out"
