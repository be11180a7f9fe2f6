#!/bin/bash
# The H100's shipped Triton rule (generated/triton-h100/, trained on this directory's journal) and the H200's
# (generated/triton/), both on this card's DeepSeek-V3 journals (../triton/, held out of every pool) against
# vLLM's shipped H100 files (../vllm-h100-configs/, nearest M as vLLM looks them up) and vLLM's default
# config, overall and per M bucket, on the harness `triton` kernel. Nothing is measured.
#
#   bash measurements/h100/triton-manifest/ship.sh OUT_DIR [SYNTH]     (from the repository root)
set -euo pipefail
OUT=${1:?usage: ship.sh OUT_DIR [SYNTH]}
SYNTH=${2:-target/release/synth}
[ -x "$SYNTH" ] || { echo "ship.sh: $SYNTH is not an executable: build it (cargo build --release)" >&2; exit 2; }
T=measurements/h100/triton
mkdir -p "$OUT"
python3 harness/triton_journal.py $T/deepseek-tp8.jsonl.gz $T/deepseek-tp8-added.jsonl.gz \
  $T/deepseek-tp8-added2.jsonl.gz $T/deepseek-all.jsonl.gz --out "$OUT/h100-deepseek.csv" 2> "$OUT/h100-deepseek.log"
for card in h100 h200; do
  rule=generated/triton-$card/rule.json; [ $card = h200 ] && rule=generated/triton/rule.json
  for tp in 8 1 2 4 16; do
    "$SYNTH" compare --dataset "$OUT/h100-deepseek.csv" --spec shapes/held-out/deepseek-v3.toml --tp "$tp" \
      --backends triton --rule "$rule" --runtime-default vllm \
      --runtime-tuned vllm=measurements/h100/vllm-h100-configs --device-name NVIDIA_H100_80GB_HBM3 \
      --csv "$OUT/$card-tp$tp.csv" > "$OUT/$card-tp$tp.txt"
  done
done
python3 - "$OUT" <<'PY'
import csv, math, sys
out = sys.argv[1]
BUCKETS = [("1-16", 1, 16), ("17-128", 17, 128), ("129-1024", 129, 1024), ("> 1024", 1025, 1 << 40)]
def geo(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")
for card, title in [("h100", "the H100's rule (generated/triton-h100/)"), ("h200", "the H200's rule (generated/triton/)")]:
    print(f"DeepSeek-V3 on the H100 (held out): {title} over vLLM's shipped H100 files")
    print("| TP | shapes | x vLLM files | " + " | ".join("M " + b[0] for b in BUCKETS) + " | x vLLM default | of oracle |")
    print("|---|---|---|" + "---|" * len(BUCKETS) + "---|---|")
    tot, allx = [], {b[0]: [] for b in BUCKETS}
    for tp in [8, 1, 2, 4, 16]:
        by = {}
        for r in csv.DictReader(open(f"{out}/{card}-tp{tp}.csv")):
            by.setdefault(r["policy"], {})[(int(r["M"]), int(r["N"]), int(r["K"]))] = float(r["us"])
        rule = next(p for p in by if p.endswith("rule.json"))
        files = next(p for p in by if p.startswith("vllm-tuned"))
        x = lambda other, lo=1, hi=1 << 40: [by[other][s] / by[rule][s] for s in by[rule] if lo <= s[0] <= hi]
        tot += x(files)
        line = [str(tp), str(len(by[rule])), "%.3f" % geo(x(files))]
        for b, lo, hi in BUCKETS:
            allx[b] += x(files, lo, hi)
            line.append("%.3f" % geo(x(files, lo, hi)))
        line += ["%.3f" % geo(x("vllm-default")), "%.4f" % geo(x("oracle"))]
        print("| " + " | ".join(line) + " |")
    print("| all | %d | %.3f | " % (len(tot), geo(tot)) + " | ".join("%.3f" % geo(allx[b[0]]) for b in BUCKETS) + " | | |")
    print()
PY
