#!/usr/bin/env bash
# Writes the suite's HIP tree (hip/) from its CUDA tree (cuda/). The kernels and harnesses are written in
# the CUDA/HIP common subset (common/gpu.h), so the HIP tree is the same text under HIP's file names
# (*.cu -> *.hip) with task specs that build with hipcc for gfx942 (MI300X).
#   hip_sync.sh          rewrite hip/ (all or nothing: built aside, then swapped in)
#   hip_sync.sh --check  exit 1 and show the difference when hip/ is not what cuda/ gives
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out="$tmp/hip"
mkdir -p "$out"
for src in $(cd cuda && find . -type f \( -name '*.h' -o -name '*.cu' -o -name '*.toml' \) | sort); do
  dst="$out/${src%.cu}"
  case "$src" in *.cu) dst="$dst.hip" ;; *) dst="$out/$src" ;; esac
  mkdir -p "$(dirname "$dst")"
  case "$src" in
    *.toml)
      sed -e 's/(NVIDIA, sm_90 = H100\/H200)/(AMD, gfx942 = MI300X; set --offload-arch for other GPUs)/' \
          -e 's/-cuda"$/-hip"/' \
          -e 's/\.cu\b/.hip/g' \
          -e 's/nvcc -O3 -std=c++17 -arch=sm_90/hipcc -O3 -std=c++17 --offload-arch=gfx942/' \
          "cuda/$src" >"$dst" ;;
    *) cp "cuda/$src" "$dst" ;;
  esac
done
if [ "${1:-}" = "--check" ]; then
  if ! diff -r hip "$out"; then
    echo "examples/suite/hip differs from what examples/suite/cuda gives; run examples/suite/hip_sync.sh" >&2
    exit 1
  fi
  echo "examples/suite/hip matches examples/suite/cuda"
else
  rm -rf hip.old
  [ -d hip ] && mv hip hip.old
  mv "$out" hip
  rm -rf hip.old
fi
