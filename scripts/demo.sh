#!/usr/bin/env bash
# The main job on the bundled default model: install, build, export
# models/stories260K to a .pte, and generate from "Once upon a time" (ids
# 1,403,407,261,378) with our runtime, printing the generated token ids.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
mkdir -p out
./build/src/cli/hf2pte export models/stories260K -o out/stories260K.pte
./build/src/cli/hf2pte generate out/stories260K.pte --prompt-ids 1,403,407,261,378 --max-new-tokens 64 --print-ids
