#!/usr/bin/env bash
# hf2pte serve end-to-end tests (ctest): installs the official `openai` npm
# client into the build folder once, exports stories260K once, then runs
# serve_test.mjs MODE (e2e | load | disconnect). Exits 77 (ctest: skipped)
# with a message when node or npm is absent or the npm registry unreachable.
#   run.sh HF2PTE_CLI WORK_DIR MODE
set -euo pipefail
cli="$1"; work="$2"; mode="$3"
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node and npm are needed for the serve end-to-end tests (the official openai client); not found"
  exit 77
fi
if ! command -v curl >/dev/null; then
  echo "SKIP: curl is needed for the serve error-case tests; not found (scripts/install-deps.sh installs it)"
  exit 77
fi
mkdir -p "$work"
# One install for all modes; a lock keeps parallel ctest runs from racing.
exec 9>"$work/.lock"
flock 9
if [ ! -f "$work/node_modules/openai/package.json" ] || ! cmp -s "$here/package.json" "$work/package.json"; then
  cp "$here/package.json" "$work/package.json"
  if ! (cd "$work" && timeout 300 npm install --no-audit --no-fund --loglevel=error >npm.log 2>&1); then
    echo "SKIP: npm install openai failed (no registry?):"; tail -5 "$work/npm.log"
    exit 77
  fi
fi
pte="$work/stories260K.pte"
if [ ! -f "$pte" ] || [ "$cli" -nt "$pte" ]; then
  "$cli" export "$repo/models/stories260K" -o "$pte.tmp" >"$work/export.log" 2>&1 || { cat "$work/export.log"; exit 1; }
  mv "$pte.tmp" "$pte"
fi
flock -u 9
cd "$work"
exec node "$here/serve_test.mjs" "$mode" "$cli" "$pte"
