#!/usr/bin/env bash
# Installs hf2pte's build dependencies from Debian 12 packages. Idempotent:
# packages already present are skipped, so a second run does nothing.
# --no-sanitizer leaves out clang and its runtime (only the sanitizer build and
# the fuzzers need them; scripts/demo.sh uses it, scripts/test.sh does not).
set -euo pipefail
sanitizer=1
for arg in "$@"; do
  case "$arg" in
    --no-sanitizer) sanitizer=0 ;;
    *) echo "install-deps: error: unknown argument '$arg'; expected --no-sanitizer" >&2; exit 2 ;;
  esac
done

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  flatbuffers-compiler libflatbuffers-dev   # our .pte schema, generated at build time
  nlohmann-json3-dev                        # config.json, JSON output
  libcli11-dev                              # command line
  libfmt-dev                                # formatting
  libopenblas-dev                           # optimized kernels: BLAS (sgemm fallback, benchmark baseline)
  libdnnl-dev                               # optimized kernels: oneDNN sgemm for GEMM blocks (prefill)
  libgtest-dev libgmock-dev                 # tests
  libpcre2-dev libutf8proc-dev libsentencepiece-dev  # tokenizers: regex, Unicode, tokenizer.model
  libcpp-httplib-dev                        # hf2pte serve: HTTP/1.1 server (docs/serve.md)
  libpng-dev libjpeg62-turbo-dev            # classify / preprocess: PNG and JPEG decoding
  libfftw3-dev                              # transcribe / preprocess: the log-mel STFT
  libssl-dev                                # export: SHA-256 keys of the XNNPACK named data (libcrypto)
  curl                                      # serve's end-to-end tests: the error cases
)
if [ "$sanitizer" -eq 1 ]; then
  PACKAGES+=(clang libclang-rt-14-dev)    # sanitizer build and libFuzzer targets
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || echo "install-deps: apt-get update failed; trying the cached package lists"
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
