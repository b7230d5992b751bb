#!/usr/bin/env bash
# Configures and builds hf2pte in ./build (Release with debug info, ccache, Ninja).
#   bash scripts/build.sh                    # every target (libraries, CLI, tests)
#   bash scripts/build.sh --target hf2pte    # only what the CLI needs (the demo)
# Other arguments go to the cmake configure step (e.g. -DHF2PTE_WERROR=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache hits whatever folder the checkout is in: paths under the checkout's
# parent are hashed relative to the build dir, and the working dir is not hashed.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$PWD")}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
targets=()
configure=()
while [ $# -gt 0 ]; do
  case "$1" in
    --target)
      [ $# -ge 2 ] || { echo "build.sh: error: --target needs a name" >&2; exit 2; }
      targets+=(--target "$2"); shift 2 ;;
    *) configure+=("$1"); shift ;;
  esac
done
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${configure[@]}" >/dev/null
cmake --build build "${targets[@]}" -j "$(nproc)"
