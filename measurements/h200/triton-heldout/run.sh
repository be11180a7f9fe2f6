#!/bin/bash
# A rule over the block-FP8 Triton config family, trained on one model and scored on held-out models:
# journals from the committed harness result lines, the rule, then `synth compare` on every held-out
# configuration and on DeepSeek-V3 against vLLM's default config and its shipped H200 files.
# Last, the speedups over vLLM's default config with its screened cells' estimates (default_estimates.py).
#
#   bash measurements/h200/triton-heldout/run.sh OUT_DIR [SYNTH]     (from the repository root; ~10 s)
#
# KEPT names the file of configs the rule may choose from (default ../triton-space/kept.txt); another card's
# script passes the configs measured on that card, so the rule picks nothing that card lacks.
set -euo pipefail
OUT=${1:?usage: run.sh OUT_DIR [SYNTH]}
SYNTH=${2:-target/release/synth}
[ -x "$SYNTH" ] || { echo "run.sh: $SYNTH is not an executable: build it (cargo build --release) or pass its path" >&2; exit 2; }
H=measurements/h200
KEPT=${KEPT:-$H/triton-space/kept.txt}
mkdir -p "$OUT"
# The manifest journal holds the kept set only (KEPT: the configs a rule may choose from); the DeepSeek-V3
# journal every config measured there (vLLM's files name their own).
python3 harness/triton_journal.py $H/triton-manifest/manifest.jsonl.gz $H/triton-manifest/manifest-rescreen.jsonl.gz \
  $H/triton-manifest/default-timed.jsonl.gz $H/triton-manifest/cover25.jsonl.gz $H/triton-manifest/cover27.jsonl.gz \
  --configs "$KEPT" --out "$OUT/triton-manifest.csv"
python3 harness/triton_journal.py $H/triton-deepseek/deepseek.jsonl.gz $H/triton-deepseek/deepseek-rescreen.jsonl.gz \
  $H/triton-deepseek/default-timed.jsonl.gz $H/triton-deepseek/cover25.jsonl.gz $H/triton-deepseek/cover27.jsonl.gz --out "$OUT/triton-deepseek.csv"
# Training: Qwen3-32B TP=2 only, 20 M values x 4 layers (the other 240 of its shapes are its own held-out set).
"$SYNTH" run --dataset "$OUT/triton-manifest.csv" --model qwen3-32b --tp 2 --backends triton \
  --sample-m 20 --max-leaves 16 --out "$OUT/rule" > "$OUT/run.txt"
for mt in "llama-3.1-8b 1" "qwen2.5-7b 1" "llama-3.1-70b 4"; do
  set -- $mt
  echo "== $1 TP=$2 (held out)"
  "$SYNTH" compare --dataset "$OUT/triton-manifest.csv" --model "$1" --tp "$2" --backends triton \
    --rule "$OUT/rule/rule.json" --runtime-default vllm,sglang --csv "$OUT/compare-$1-tp$2.csv"
done
for tp in 8 1 2 4 16; do
  echo "== deepseek-v3 TP=$tp (held out; the (N, K) of vLLM's H200 files that are its layers at this TP)"
  "$SYNTH" compare --dataset "$OUT/triton-deepseek.csv" --spec shapes/held-out/deepseek-v3.toml --tp "$tp" \
    --backends triton --rule "$OUT/rule/rule.json" --runtime-default vllm \
    --runtime-tuned vllm=$H/vllm-h200-configs --device-name NVIDIA_H200 --csv "$OUT/compare-deepseek-v3-tp$tp.csv"
done
echo "== the rule over vLLM's default config with the default's screens in place of compare's charge"
python3 measurements/h200/triton-heldout/default_estimates.py --policy "$OUT/rule/rule.json" \
  --journal $H/triton-manifest/manifest.jsonl.gz $H/triton-manifest/manifest-rescreen.jsonl.gz \
  $H/triton-manifest/default-timed.jsonl.gz $H/triton-manifest/cover25.jsonl.gz $H/triton-manifest/cover27.jsonl.gz $H/triton-deepseek/deepseek.jsonl.gz \
  $H/triton-deepseek/deepseek-rescreen.jsonl.gz $H/triton-deepseek/default-timed.jsonl.gz \
  $H/triton-deepseek/cover25.jsonl.gz $H/triton-deepseek/cover27.jsonl.gz -- "$OUT"/compare-*.csv
