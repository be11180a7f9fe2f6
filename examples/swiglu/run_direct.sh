#!/usr/bin/env bash
# Builds the CUDA harness with kernel files (default: every file of rewrites/cuda/, in name order) and
# runs them in alternating rounds, printing each build failure and each result line, without `synth`.
# Uses: machines without the synth binary, and re-measuring a winner against the original to see the
# run-to-run spread (`synth rewrite` measures each distinct candidate once).
# Usage: examples/swiglu/run_direct.sh [-r ROUNDS] [-a "ROWS COLS REPS"] [KERNEL.cu ...]
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rounds=1
args="8192 12800 200"
while getopts "r:a:" opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    a) args=$OPTARG ;;
    *) echo "usage: $0 [-r ROUNDS] [-a \"ROWS COLS REPS\"] [KERNEL.cu ...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [ $# -eq 0 ]; then set -- "$here"/rewrites/cuda/*.cu; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Build every kernel in parallel, each in its own copy of cuda/.
i=0
for src in "$@"; do
  i=$((i + 1))
  mkdir -p "$tmp/$i" && cp "$here"/cuda/* "$tmp/$i/" && cp "$src" "$tmp/$i/swiglu.cu"
  (cd "$tmp/$i" && nvcc -O3 -std=c++17 -arch=sm_90 -o swiglu harness.cu swiglu.cu >build.log 2>&1; echo $? >build.rc) &
done
wait
for r in $(seq 1 "$rounds"); do
  i=0
  for src in "$@"; do
    i=$((i + 1))
    name=$(basename "$src")
    if [ "$(cat "$tmp/$i/build.rc")" != 0 ]; then
      [ "$r" = 1 ] && echo "$name: build failed: $(grep -m1 error "$tmp/$i/build.log")"
      continue
    fi
    # shellcheck disable=SC2086
    line=$(cd "$tmp/$i" && timeout 120 ./swiglu $args 2>&1 | grep GEMMSYNTH_RESULT | tail -n 1)
    echo "round $r $name: ${line:-no result line}"
  done
done
