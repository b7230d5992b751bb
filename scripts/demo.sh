#!/usr/bin/env bash
# The main job on the bundled default model: install, build, export
# models/stories260K to a .pte (its tokenizer embedded), and generate from the
# text prompt "Once upon a time" with our runtime, printing text and stats.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
mkdir -p out
./build/src/cli/hf2pte export models/stories260K -o out/stories260K.pte
./build/src/cli/hf2pte generate out/stories260K.pte --prompt "Once upon a time" --max-new-tokens 64
