#!/bin/bash
# The block-FP8 Triton config family on an H100: the rule trained on the H200's Qwen3-32B TP=2 journal
# (../../h200/triton-heldout/run.sh) and a rule trained on this card's, both scored on this card's journals of
# two configurations neither was trained on, against vLLM's and SGLang's default configs, and on DeepSeek-V3's
# layers that vLLM ships H100 files for (TP 1, 2, 4, 8, 16), against those files (../vllm-h100-configs/).
#
#   bash measurements/h100/triton/run.sh OUT_DIR [SYNTH]     (from the repository root; ~6 s)
set -euo pipefail
OUT=${1:?usage: run.sh OUT_DIR [SYNTH]}
SYNTH=${2:-target/release/synth}
[ -x "$SYNTH" ] || { echo "run.sh: $SYNTH is not an executable: build it (cargo build --release) or pass its path" >&2; exit 2; }
H=measurements/h100/triton
mkdir -p "$OUT"
python3 harness/triton_journal.py $H/qwen3-32b-tp2.jsonl.gz $H/qwen3-32b-tp2-added.jsonl.gz \
  $H/qwen3-32b-tp2-added2.jsonl.gz $H/heldout-default.jsonl.gz $H/heldout-kept.jsonl.gz $H/heldout-added.jsonl.gz \
  $H/heldout-added2.jsonl.gz --out "$OUT/h100.csv"
python3 harness/triton_journal.py $H/deepseek-tp8.jsonl.gz $H/deepseek-tp8-added.jsonl.gz \
  $H/deepseek-tp8-added2.jsonl.gz $H/deepseek-all.jsonl.gz --out "$OUT/h100-deepseek.csv"
# The H200's rule as ../../h200/triton-heldout/run.sh trains it, over the configs of kept.txt this card's
# journals hold (kept-measured.txt; a config kept.txt gained after this card's runs is left out and named), so
# the rule picks nothing this card lacks. With every config measured it is the rule `synth export` writes.
python3 - "$OUT/h100.csv" measurements/h200/triton-space/kept.txt "$OUT/kept-measured.txt" <<'PY'
import csv, sys
sys.path.insert(0, "harness")
import triton_plan  # kept.txt's reader
measured = {row["kernelName"] for row in csv.DictReader(open(sys.argv[1], newline=""))}
kept = [c.name() for c in triton_plan.read_configs(sys.argv[2])]
with open(sys.argv[3], "w") as f:
    f.write("# the configs of kept.txt with rows in this card's journal\n")
    f.writelines(c + "\n" for c in kept if c in measured)
for c in kept:
    if c not in measured:
        print(f"kept.txt's {c} has no row on this card: the H200's rule here is trained without it")
PY
KEPT="$OUT/kept-measured.txt" bash measurements/h200/triton-heldout/run.sh "$OUT/h200" "$SYNTH" > "$OUT/h200.txt"
"$SYNTH" run --dataset "$OUT/h100.csv" --model qwen3-32b --tp 2 --backends triton \
  --sample-m 20 --max-leaves 16 --out "$OUT/h100-rule" > "$OUT/h100-run.txt"
for rule in h200/rule h100-rule; do
  for mt in "qwen2.5-7b 1" "llama-3.1-70b 4"; do
    set -- $mt
    echo "== the rule of $rule/rule.json on this card's $1 TP=$2 (held out)"
    "$SYNTH" compare --dataset "$OUT/h100.csv" --model "$1" --tp "$2" --backends triton \
      --rule "$OUT/$rule/rule.json" --runtime-default vllm,sglang --csv "$OUT/compare-${rule%%/*}-$1-tp$2.csv"
  done
done
for rule in h200/rule h100-rule; do
  for tp in 8 1 2 4 16; do
    echo "== the rule of $rule/rule.json on this card's DeepSeek-V3 TP=$tp layers with an H100 file (held out)"
    "$SYNTH" compare --dataset "$OUT/h100-deepseek.csv" --spec shapes/held-out/deepseek-v3.toml --tp "$tp" \
      --backends triton --rule "$OUT/$rule/rule.json" --runtime-default vllm \
      --runtime-tuned vllm=measurements/h100/vllm-h100-configs --device-name NVIDIA_H100_80GB_HBM3 \
      --csv "$OUT/compare-${rule%%/*}-deepseek-v3-tp$tp.csv"
  done
done
