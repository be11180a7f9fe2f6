#!/bin/bash
# The live tune's files against the whole 1280-config space on 8 InternLM2.5-20B TP 2 shapes (no GPU):
#   bash measurements/h100/tune-live/score.sh OUT [SYNTH]
# OUT receives the space journal as CSV, the shipped rule's files for the model (`synth configs`) and one
# `synth compare` per set of files. SYNTH is the binary (default target/release/synth).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: score.sh OUT [SYNTH]" >&2; exit 2; }
H=measurements/h100/tune-live; OUT=$1; SYNTH=${2:-target/release/synth}
mkdir -p "$OUT"
python3 harness/triton_journal.py $H/space/space.jsonl.gz $H/space/space-oproj.jsonl.gz --out "$OUT/space.csv"
"$SYNTH" configs vllm --hf-config tests/data/hf-configs/internlm2.5-20b.json --tp 2 \
    --device-name NVIDIA_H100_80GB_HBM3 --out "$OUT/shipped" > /dev/null
rm -rf "$OUT/tuned"; mkdir -p "$OUT/tuned"; cp -r $H/tuned $H/tuned-r1 "$OUT/tuned/"
for files in shipped tuned/tuned-r1 tuned/tuned; do
  echo "== $files"
  dir=$OUT/$files; [ -d "$dir/vllm" ] && dir=$dir/vllm
  "$SYNTH" compare --dataset "$OUT/space.csv" --backends triton --runtime-default vllm \
      --runtime-tuned vllm="$dir" --device-name NVIDIA_H100_80GB_HBM3 | sed -n '3,9p'
done
