#!/usr/bin/env bash
# The main job on the bundled default model: install, build the CLI, export
# models/stories260K to a .pte (its tokenizer embedded), and generate from the
# text prompt "Once upon a time" with our runtime, printing text and stats.
# Builds only the `hf2pte` target; `bash scripts/test.sh` builds everything.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
phase() { echo "demo: [$1/4] $2 ($((SECONDS - start)) s so far)"; }
phase 1 "installing packages (skipped when present)"
bash scripts/install-deps.sh --no-sanitizer
phase 2 "building the hf2pte CLI into ./build (the first build takes a few minutes)"
bash scripts/build.sh --target hf2pte
mkdir -p out
phase 3 "exporting models/stories260K to out/stories260K.pte"
./build/src/cli/hf2pte export models/stories260K -o out/stories260K.pte
phase 4 "generating from \"Once upon a time\""
./build/src/cli/hf2pte generate out/stories260K.pte --prompt "Once upon a time" --max-new-tokens 64
echo "demo: done in $((SECONDS - start)) s"
