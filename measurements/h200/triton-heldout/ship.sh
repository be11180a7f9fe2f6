#!/bin/bash
# The figures of the Triton rule the main job ships (generated/triton/): per leave-one-model-out fold of
# ../triton-manifest/datasets.toml, the fold's rule (trained on the other three configurations at the main
# job's settings) scored on the held-out configuration, overall and per M bucket; then the shipped rule on
# DeepSeek-V3 (held out of every pool) against vLLM's shipped H200 files (../vllm-h200-configs/) and vLLM's
# default config, overall and per M bucket, on the harness `triton` kernel. Nothing is measured.
#
#   bash measurements/h200/triton-heldout/ship.sh OUT_DIR [SYNTH] [SAMPLE_M LEAVES]   (from the repository root)
#
# SAMPLE_M and LEAVES default to the main job's (synth/app/ship.rs); giving others scores that setting's folds.
set -euo pipefail
OUT=${1:?usage: ship.sh OUT_DIR [SYNTH] [SAMPLE_M LEAVES]}
SYNTH=${2:-target/release/synth}
S=${3:-$(sed -n 's/^pub const TRITON_SAMPLE_M: usize = \([0-9]*\);/\1/p' synth/app/ship.rs)}
L=${4:-$(sed -n 's/^pub const TRITON_LEAVES: usize = \([0-9]*\);/\1/p' synth/app/ship.rs)}
[ -x "$SYNTH" ] || { echo "ship.sh: $SYNTH is not an executable: build it (cargo build --release)" >&2; exit 2; }
H=measurements/h200
J=$(realpath $H/triton-manifest/kept-journal.csv.gz)
mkdir -p "$OUT"
ALL="qwen3-32b:2 llama-3.1-8b:1 qwen2.5-7b:1 llama-3.1-70b:4"
for held in $ALL; do
  hm=${held%:*}; ht=${held#*:}; name=$hm-tp$ht
  pool=$(for c in $ALL; do [ "$c" = "$held" ] || printf '"%s-tp%s", ' "${c%:*}" "${c#*:}"; done)
  mkdir -p "$OUT/fold-$name"
  {
    echo "off_grid_m = []"
    echo "train_pool = [${pool%, }]"
    echo "train_configs = 3"
    for c in $ALL; do
      printf '[[config]]\nname = "%s-tp%s"\nmodel = "%s"\ntp = %s\njournals = ["%s"]\n' "${c%:*}" "${c#*:}" "${c%:*}" "${c#*:}" "$J"
    done
  } > "$OUT/fold-$name/datasets.toml"
  "$SYNTH" run --manifest "$OUT/fold-$name/datasets.toml" --backends triton --sample-m "$S" --max-leaves "$L" \
    --out "$OUT/fold-$name/rule" > "$OUT/fold-$name/run.txt"
  "$SYNTH" compare --dataset "$J" --model "$hm" --tp "$ht" --backends triton --rule "$OUT/fold-$name/rule/rule.json" \
    --runtime-default vllm --csv "$OUT/fold-$name.csv" > "$OUT/fold-$name/compare.txt"
done
python3 harness/triton_journal.py $H/triton-deepseek/deepseek.jsonl.gz $H/triton-deepseek/deepseek-rescreen.jsonl.gz \
  $H/triton-deepseek/default-timed.jsonl.gz $H/triton-deepseek/cover25.jsonl.gz $H/triton-deepseek/cover27.jsonl.gz \
  --out "$OUT/triton-deepseek.csv" 2> "$OUT/triton-deepseek.log"
for tp in 8 1 2 4 16; do
  "$SYNTH" compare --dataset "$OUT/triton-deepseek.csv" --spec shapes/held-out/deepseek-v3.toml --tp "$tp" \
    --backends triton --rule "${RULE:-generated/triton/rule.json}" --runtime-default vllm \
    --runtime-tuned vllm=$H/vllm-h200-configs --device-name NVIDIA_H200 --csv "$OUT/deepseek-v3-tp$tp.csv" \
    > "$OUT/deepseek-v3-tp$tp.txt"
done
python3 - "$OUT" <<'EOF'
import csv, glob, math, sys
out = sys.argv[1]
BUCKETS = [("1-16", 1, 16), ("17-128", 17, 128), ("129-1024", 129, 1024), ("> 1024", 1025, 1 << 40)]

def rows(path):
    by = {}
    for r in csv.DictReader(open(path)):
        by.setdefault(r["policy"], {})[(int(r["M"]), int(r["N"]), int(r["K"]))] = r
    return by

def geo(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")

def rule_policy(by):
    return next(p for p in by if p.endswith("rule.json"))

def cells(by, mine, other, lo=1, hi=1 << 40):
    # other's time over mine's on every shape of the bucket (oracle: the fraction of the oracle).
    return [float(by[other][s]["us"]) / float(by[mine][s]["us"]) for s in by[mine] if lo <= s[0] <= hi]

print("leave-one-model-out: the fold's rule on the held-out configuration, of the kept set's oracle")
print("| held out | shapes | all | " + " | ".join("M " + b[0] for b in BUCKETS) + " | x vLLM default |")
print("|---|---|---|" + "---|" * len(BUCKETS) + "---|")
for f in sorted(glob.glob(out + "/fold-*.csv")):
    by = rows(f); r = rule_policy(by)
    line = [f.split("fold-")[1][:-4], str(len(by[r])), "%.4f" % geo(cells(by, r, "oracle"))]
    line += ["%.4f" % geo(cells(by, r, "oracle", lo, hi)) for _, lo, hi in BUCKETS]
    line.append("%.3f" % geo(cells(by, r, "vllm-default")))
    print("| " + " | ".join(line) + " |")
print()
print("DeepSeek-V3 (held out): the shipped rule over vLLM's shipped H200 files (and its default config)")
print("| TP | shapes | x vLLM files | " + " | ".join("M " + b[0] for b in BUCKETS) + " | x vLLM default | of oracle |")
print("|---|---|---|" + "---|" * len(BUCKETS) + "---|---|")
allx = {b[0]: [] for b in BUCKETS}; tot = []
for tp in [8, 1, 2, 4, 16]:
    by = rows("%s/deepseek-v3-tp%d.csv" % (out, tp)); r = rule_policy(by)
    files = next(p for p in by if p.startswith("vllm-tuned"))
    xs = cells(by, r, files); tot += xs
    line = [str(tp), str(len(by[r])), "%.3f" % geo(xs)]
    for b, lo, hi in BUCKETS:
        c = cells(by, r, files, lo, hi); allx[b] += c
        line.append("%.3f" % geo(c))
    line += ["%.3f" % geo(cells(by, r, "vllm-default")), "%.4f" % geo(cells(by, r, "oracle"))]
    print("| " + " | ".join(line) + " |")
print("| all | %d | %.3f | " % (len(tot), geo(tot)) + " | ".join("%.3f" % geo(allx[b[0]]) for b in BUCKETS) + " | | |")
EOF
