#!/usr/bin/env bash
# Installs the Debian 12 packages ragd builds and runs against. Idempotent: packages already
# present are skipped, and nothing is done when all are present. Never downloads from anywhere
# but the configured Debian package registry.
# Usage: install-deps.sh [--browser | --fuzz]
#   --browser  also Debian's chromium, for the console's browser test (make console-test-deps).
#              Not part of the default set: it is a large package (~100 MB with its libraries)
#              that only that one test uses; without it the test skips.
#   --fuzz     also clang 14 with libFuzzer and the sanitizer runtimes, and LLVM's OpenMP (which
#              find_package(OpenMP) needs under clang), for `make fuzz`.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config ccache
  libfaiss-dev libopenblas-openmp-dev librocksdb-dev
  libboost1.81-dev libboost-json1.81-dev libboost-program-options1.81-dev libboost-url1.81-dev
  libsimdjson-dev libgtest-dev libgmock-dev libbenchmark-dev
  libspdlog-dev libfmt-dev libcli11-dev libtomlplusplus-dev libxxhash-dev libpcre2-dev
  libgumbo-dev libpoppler-cpp-dev poppler-utils zlib1g-dev libzip-dev libexpat1-dev pandoc-data libopenmpi-dev openmpi-bin wrk python3 curl
  redis-server libhiredis-dev libzmq3-dev cppzmq-dev libssl-dev libxapian-dev haproxy python3-zmq python3-msgpack libicu-dev
  python3-jinja2 python3-jsonschema
)

if [[ "${1:-}" == "--browser" ]]; then PKGS+=(chromium); fi
if [[ "${1:-}" == "--fuzz" ]]; then PKGS+=(clang clang-14 libclang-rt-14-dev libomp-14-dev); fi

"$(dirname "$0")/apt-install-missing.sh" install-deps "${PKGS[@]}"

# FAISS and our kernels use OpenMP; the pthread OpenBLAS variant fights with it (10-18x slower
# FAISS searches were measured). Pin the OpenMP variant when both are installed.
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
omp_blas="/usr/lib/${arch}/openblas-openmp/libblas.so.3"
if [[ -e "$omp_blas" ]] && command -v update-alternatives >/dev/null; then
  SUDO=""; if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO update-alternatives --set "libblas.so.3-${arch}" "$omp_blas" >/dev/null 2>&1 || true
  omp_lapack="/usr/lib/${arch}/openblas-openmp/liblapack.so.3"
  [[ -e "$omp_lapack" ]] && { $SUDO update-alternatives --set "liblapack.so.3-${arch}" "$omp_lapack" >/dev/null 2>&1 || true; }
fi
