#!/usr/bin/env bash
# Replays the CUDA rewrites without `synth`: builds the harness with each file of rewrites/cuda/ (in
# name order) in a temporary copy of cuda/ and prints each build status and result line. For machines
# where the synth binary is not available; `synth rewrite` (see README.md) does the same with timeouts,
# feedback, selection and a report.
# Usage: examples/swiglu/run_direct.sh [rows cols reps]
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
args=("${@:-8192 12800 200}")
for src in "$here"/rewrites/cuda/*.cu; do
  name=$(basename "$src")
  work=$(mktemp -d)
  cp "$here"/cuda/* "$work/"
  cp "$src" "$work/swiglu.cu"
  if (cd "$work" && nvcc -O3 -std=c++17 -arch=sm_90 -o swiglu harness.cu swiglu.cu) >"$work/build.log" 2>&1; then
    line=$(cd "$work" && timeout 120 ./swiglu ${args[*]} 2>&1 | grep GEMMSYNTH_RESULT | tail -n 1)
    echo "$name: ${line:-no result line}"
  else
    echo "$name: build failed: $(grep -m1 -E 'error' "$work/build.log")"
  fi
  rm -rf "$work"
done
