#!/usr/bin/env bash
# Prebuilds, here, what scripts/device-check.sh runs on a GPU machine that can
# neither install nor fetch anything (docs/cuda.md, "Running the device check"):
# a Release build with the CUDA device executor in $HF2PTE_DEVICE_BUILD
# (default build-device), its five binaries stripped, plus every shared library
# they load beyond a base system, packed as ONE file, .device/bundle.tar.xz.
# The device tool carries it (`carry: [".device"]`, 64 MiB with the working
# tree); device-check.sh unpacks it and skips its configure/build step.
#
#   bash scripts/device-bundle.sh
#
# Environment: HF2PTE_CUDA_ARCH (default 90: H100/H200), HF2PTE_BUNDLE_DNNL=1
# links oneDNN (default 0: OpenBLAS runs the CPU GEMMs; libdnnl alone is 40 MB,
# 6.5 MiB packed, and on the device the GEMMs run in the CUDA delegate).
# Rebuild the bundle after changing sources: device-check.sh warns when the
# checkout it runs in differs from the one the bundle was built from.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${HF2PTE_DEVICE_BUILD:-build-device}
arch=${HF2PTE_CUDA_ARCH:-90}
dnnl=$([ "${HF2PTE_BUNDLE_DNNL:-0}" = 1 ] && echo ON || echo OFF)
bundle=.device/bundle.tar.xz
say() { echo "device-bundle: $*"; }

# The bundle's folder is carried, never committed and never in the tree copy.
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")" .device
if ! grep -qxE '/?\.device/?' "$exclude" 2>/dev/null; then
  echo '/.device/' >> "$exclude"
  say "added /.device/ to $exclude"
fi

# The targets device-check.sh runs, by their paths in the build tree.
binaries=(src/cli/hf2pte src/bench/hf2pte_make_bench_checkpoint
          src/backends/cuda/runtime/backend_cuda_device_test
          src/backends/cuda/export/backend_cuda_export_test tests/half_precision_test)
targets=()
for b in "${binaries[@]}"; do targets+=(--target "$(basename "$b")"); done

# Same ccache settings as scripts/build.sh.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$PWD")}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
say "configuring $build (Release, CUDA arch $arch, oneDNN $dnnl)"
log=$(mktemp)
nice -n 19 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHF2PTE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DHF2PTE_USE_DNNL="$dnnl" > "$log" 2>&1 || { cat "$log"; exit 1; }
grep -q 'hf2pte: CUDA device executor ON' "$log" || { cat "$log"; say "error: CUDA is not enabled"; exit 1; }
rm -f "$log"
say "building ${targets[*]//--target /}"
t0=$SECONDS
# The bundle records the sources it was built from (device-check.sh compares);
# an edit while the build ran makes it build again.
for attempt in 1 2 3; do
  sources=$(bash scripts/device-check.sh --source-hash)
  nice -n 19 cmake --build "$build" -j "$(nproc)" "${targets[@]}"
  [ "$(bash scripts/device-check.sh --source-hash)" != "$sources" ] || break
  [ $attempt -lt 3 ] || { say "error: the sources keep changing during the build"; exit 1; }
  say "the sources changed during the build: building again"
done
say "built in $((SECONDS - t0)) s"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/hf2pte-device
mkdir -p "$root/bin" "$root/lib" "$root/compat"
for b in "${binaries[@]}"; do
  cp "$build/$b" "$root/bin/"
  strip --strip-all "$root/bin/$(basename "$b")"
done

# Shared libraries: everything ldd resolves except the C/C++ runtime and the
# driver, which every machine that runs CUDA programs has. libstdc++/libgcc_s
# also go to compat/, which device-check.sh uses only when the device's own are
# older than the binaries need.
base='^(linux-vdso\.so|ld-linux|libc\.so|libm\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libutil\.so|libstdc\+\+\.so|libgcc_s\.so|libcuda\.so|libnvidia-)'
for f in "$root"/bin/*; do
  if ldd "$f" | grep -q 'not found'; then ldd "$f"; say "error: $f has unresolved libraries"; exit 1; fi
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
  case "$name" in
    libstdc++.so.*|libgcc_s.so.*) cp -L "$path" "$root/compat/$name" ;;
    *) [[ "$name" =~ $base ]] || cp -L "$path" "$root/lib/$name" ;;
  esac
done

# What the device needs: the highest glibc/libstdc++ symbol versions asked for.
need() { objdump -T "$root"/bin/* "$root"/lib/* 2>/dev/null | grep -o "$1[0-9.]*" | sort -uV | tail -1; }
nvcc=$(sed -n 's/^set(CMAKE_CUDA_COMPILER "\(.*\)")$/\1/p' "$build"/CMakeFiles/*/CMakeCUDACompiler.cmake | head -1)
nvcc=${nvcc:-/usr/local/cuda/bin/nvcc}
cuda_inc=$(dirname "$(dirname "$(readlink -f "$nvcc")")")/include
cublas_major=$(awk '/#define CUBLAS_VER_MAJOR/ { print $3; exit }' "$cuda_inc/cublas_api.h" 2>/dev/null || true)
{
  echo "built: $(date -u +%FT%TZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "commit: $(git rev-parse --short HEAD), $(git status --porcelain --untracked-files=no | wc -l) tracked files modified"
  echo "sources: $sources"
  echo "build: Release, CUDA arch $arch, oneDNN $dnnl, $("$nvcc" --version | tail -1)"
  echo "needs: $(need GLIBC_), $(need GLIBCXX_), driver for CUDA $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), libcublas.so.${cublas_major:-?} (the device's toolkit)"
  echo "bin: $(cd "$root/bin" && echo *)"
  echo "lib: $(cd "$root/lib" && echo *)"
} > "$root/MANIFEST"
cat "$root/MANIFEST"

# The bundle must run by itself: every library found in lib/ or in the base
# system, from a clean environment, and the CLI starts.
for f in "$root"/bin/*; do
  env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$root/lib" ldd "$f" | lib="$root/lib/" base="$base" f="$f" awk '
    $2 == "=>" && index($3, ENVIRON["lib"]) != 1 && $1 !~ ENVIRON["base"] { print "device-bundle: error: " ENVIRON["f"] " loads " $1 " from " $3; bad = 1 }
    /not found/ { print "device-bundle: error: " ENVIRON["f"] ": " $0; bad = 1 }
    END { exit bad }'
done
env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$root/lib" "$root/bin/hf2pte" --version >/dev/null

say "packing $bundle (xz -9)"
tar -C "$stage" --owner=0 --group=0 --numeric-owner --sort=name -cf - hf2pte-device | nice -n 19 xz -9 -T1 > "$bundle.part"
mv "$bundle.part" "$bundle"
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
size=$(stat -c %s "$bundle")
unpacked=$(du -sb "$root" | cut -f1)
tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
say "$bundle: $(mib "$size") ($(mib "$unpacked") unpacked); with the working tree ($(mib "$tree")): $(mib $((size + tree))) of the 64 MiB carry limit"
[ $((size + tree)) -lt $((60 * 1048576)) ] || say "warning: less than 4 MiB left under the carry limit"
