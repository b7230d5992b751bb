#!/usr/bin/env bash
# Installs dependencies, builds, and runs the whole test suite; then the
# robustness job (sanitizer build of every test + a fixed time per fuzzer,
# scripts/sanitize.sh). HF2PTE_QUICK=1 skips the robustness job locally.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
if [ "${HF2PTE_QUICK:-0}" != "1" ]; then
  bash scripts/sanitize.sh
fi
