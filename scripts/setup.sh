#!/usr/bin/env bash
# Installs the Debian packages tiepoint needs (only those missing; quiet when all are
# there) and configures + builds it in Release. Sourced by demo.sh and test.sh.
#   BUILD_DIR (default build), TIEPOINT_CUDA_ARCHS (default 90), JOBS (default nproc).
set -euo pipefail

TIEPOINT_PACKAGES=(
  build-essential cmake git pkg-config bzip2
  libeigen3-dev libsuitesparse-dev libceres-dev libcli11-dev libgtest-dev
  libbz2-dev nlohmann-json3-dev libopenblas-dev
  libpng-dev libjpeg62-turbo-dev libexif-dev libtiff-dev
)

tiepoint_install_packages() {
  local missing=()
  for p in "${TIEPOINT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

tiepoint_build() {
  local root build_dir jobs cuda_args=()
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  build_dir=${BUILD_DIR:-$root/build}
  jobs=${JOBS:-$(nproc)}
  if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null 2>&1; then
    cuda_args=(-DCMAKE_CUDA_ARCHITECTURES="${TIEPOINT_CUDA_ARCHS:-90}")
  fi
  cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${cuda_args[@]}" "$@" >/dev/null
  cmake --build "$build_dir" -j "$jobs" -- --no-print-directory >/dev/null 2>"$build_dir/build.log" \
    || { cat "$build_dir/build.log"; return 1; }
  grep -i "warning" "$build_dir/build.log" | head -20 || true
}
