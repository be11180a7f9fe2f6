#!/usr/bin/env bash
# Measures the multi-model H200 dataset of measurements/h200/ in deadline-bounded runs.
#
#   measurements/h200/measure.sh DEADLINE_S JOURNAL_DIR OUT_DIR [vendor|vendor-only|grid|held-out] [NAME,NAME...]
#
# Runs `synth bench` for each (model, TP) configuration below, in order, into JOURNAL_DIR/<model>-tp<TP>.csv
# (resumable: a rerun continues each journal where it stopped), stopping every bench at DEADLINE_S seconds
# after the start; copies journals and logs to OUT_DIR at the end. With `vendor`, also measures the vendor
# reference (harness/vendor_reference.py) on the Qwen3-32B TP=2 dataset-grid shapes first. With `grid`,
# completes the committed journals to the whole dataset grid: each journal of measurements/h200/ is copied
# into JOURNAL_DIR (unless one is there) and resumed with `--m-set dataset`, so only the grid M values it
# does not hold yet are measured (its off-grid M values stay). With `vendor-only`, measures nothing but the
# vendor reference of each configuration (NAME,NAME... or all) on its dataset-grid and off-grid shapes into
# JOURNAL_DIR/vendor-<NAME>.csv (a configuration whose file is there is skipped): the rows `--backends
# ck,vendor` needs on held-out models (Qwen3-32B TP 2, grid and off-grid M, is qwen3-32b-tp2 there).
# NAME,NAME... limits the run to those journals. With `held-out`,
# measures DeepSeek-V3 at TP 8 (held out of every training pool: its eight (N, K), `synth shapes --spec
# shapes/held-out/deepseek-v3.toml --tp 8`) on the sparse and off-grid M values, the vendor reference into
# JOURNAL_DIR/vendor-deepseek-v3-tp8.csv (first: it is short and written whole or not at all) and then the
# CK family into JOURNAL_DIR/deepseek-v3-tp8.csv (resumable): the held-out data of the mixed rule's comparison.
set -u
if [ $# -lt 3 ]; then
  echo "usage: measurements/h200/measure.sh DEADLINE_S JOURNAL_DIR OUT_DIR [vendor|vendor-only|grid|held-out] [NAME,...]" >&2
  exit 2
fi
deadline=$1 jdir=$2 out=$3 mode=${4:-} only=${5:-}
case $mode in
  "" | vendor | vendor-only | grid | held-out) ;;
  *) echo "measure.sh: unknown mode $mode: expected vendor, vendor-only, grid or held-out (or none)" >&2; exit 2 ;;
esac
case $deadline in
  '' | *[!0-9]*) echo "measure.sh: DEADLINE_S must be a whole number of seconds, not $deadline" >&2; exit 2 ;;
esac
start=$(date +%s)
synth=${SYNTH:-./target/release/synth}
mkdir -p "$jdir" "$out"
out=$(cd "$out" && pwd)
left() { echo $(( deadline - ($(date +%s) - start) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit \
  --format=csv >> "$jdir/device.log" 2>&1
# vendor_rows NAME T: the vendor reference on the plan JOURNAL_DIR/vendor-NAME-plan.jsonl into
# JOURNAL_DIR/vendor-NAME.csv (vendor_reference.py writes it only when the whole plan is measured), stopped
# after T seconds.
vendor_rows() {
  timeout "$2" python3 harness/vendor_reference.py --plan "$jdir/vendor-$1-plan.jsonl" \
    --out "$jdir/vendor-$1.csv" 2>>"$jdir/vendor.log"
  echo "== vendor $1 exit $?" | tee -a "$jdir/vendor.log"
}
if [ "$mode" = vendor ] && [ ! -s "$jdir/vendor-qwen3-32b-tp2.csv" ]; then
  "$synth" bench --model qwen3-32b --tp 2 --m-set dataset --split-k auto --recheck-fraction 0 --cu-num 132 \
    --out "$jdir/vendor-plan-journal.csv" --plan-only "$jdir/vendor-plan.jsonl" 2>>"$jdir/vendor.log"
  timeout "$(left)" python3 harness/vendor_reference.py --plan "$jdir/vendor-plan.jsonl" \
    --out "$jdir/vendor-qwen3-32b-tp2.csv" 2>>"$jdir/vendor.log"
  echo "vendor exit $?" >> "$jdir/vendor.log"
fi
# journal name, model, TP, M set, and (N:K pairs) where only some layers are new: Qwen2.5-72B's qkv and o
# layers are Llama-3.1-70B's at the same TP (same N, K), and its down_proj cannot run (K = 29568/TP is not a
# multiple of 128), so only its gate_up_proj is measured.
configs=(
  "qwen3-32b-tp2-offgrid qwen3-32b 2 off-grid -"
  "llama-3.1-8b-tp1 llama-3.1-8b 1 sparse+off-grid -"
  "llama-3.1-8b-tp2 llama-3.1-8b 2 sparse+off-grid -"
  "llama-3.1-70b-tp4 llama-3.1-70b 4 sparse+off-grid -"
  "llama-3.1-70b-tp8 llama-3.1-70b 8 sparse+off-grid -"
  "qwen3-32b-tp4 qwen3-32b 4 sparse+off-grid -"
  "llama-3.2-3b-tp1 llama-3.2-3b 1 sparse+off-grid -"
  "qwen2.5-7b-tp1 qwen2.5-7b 1 sparse+off-grid -"
  "qwen2.5-72b-tp4 qwen2.5-72b 4 sparse+off-grid 14784:8192"
  "qwen2.5-72b-tp8 qwen2.5-72b 8 sparse+off-grid 7392:8192"
  "qwen3-32b-tp1 qwen3-32b 1 sparse+off-grid -"
)
# journal_name NAME: the journal a configuration's run writes; vendor-only measures Qwen3-32B TP 2's grid
# and off-grid M into one file, vendor-qwen3-32b-tp2.csv.
journal_name() { if [ "$mode" = vendor-only ]; then echo "${1%-offgrid}"; else echo "$1"; fi; }
if [ -n "$only" ]; then
  for want in ${only//,/ }; do
    known=0
    names=()
    for cfg in "${configs[@]}"; do names+=("$(journal_name "${cfg%% *}")"); done
    for n in "${names[@]}"; do [ "$n" = "$want" ] && known=1; done
    [ $known = 1 ] || { echo "measure.sh: no configuration $want here: expected one of: ${names[*]}" >&2; exit 2; }
  done
fi
if [ "$mode" = held-out ]; then
  configs=()
  name=deepseek-v3-tp8
  ds=2112:7168,3072:1536,4096:512,7168:2048,4608:7168,7168:2304,512:7168,7168:256
  t=$(left)
  if [ "$t" -gt 5 ] && [ ! -s "$jdir/vendor-$name.csv" ]; then
    echo "== vendor $name (held out), $t s left" | tee -a "$jdir/vendor.log"
    "$synth" bench --shapes "$ds" --m-set sparse+off-grid --split-k none --recheck-fraction 0 --cu-num 132 \
      --out "$jdir/vendor-$name-plan-journal.csv" --plan-only "$jdir/vendor-$name-plan.jsonl" 2>>"$jdir/vendor.log"
    vendor_rows "$name" "$t"
  fi
  t=$(left)
  if [ "$t" -gt 5 ]; then
    echo "== $name (held out), $t s left" | tee -a "$jdir/bench.log"
    timeout "$t" "$synth" bench --shapes "$ds" --m-set sparse+off-grid --split-k auto --recheck-fraction 0.03 \
      --seed 7 --out "$jdir/$name.csv" >>"$jdir/bench.out" 2>>"$jdir/bench.log"
    echo "== $name exit $?" | tee -a "$jdir/bench.log"
  fi
fi
for cfg in "${configs[@]}"; do
  set -- $cfg
  name=$(journal_name "$1") mset=$4 shapes=()
  [ "$5" != - ] && shapes=(--shapes "$5")
  if [ -n "$only" ] && [[ ",$only," != *",$name,"* ]]; then continue; fi
  if [ "$mode" = vendor-only ]; then
    [ -s "$jdir/vendor-$name.csv" ] && continue
    t=$(left); [ "$t" -le 5 ] && break
    echo "== vendor $name ($2 TP $3), $t s left" | tee -a "$jdir/vendor.log"
    : > "$jdir/vendor-$name-plan.jsonl"
    for ms in dataset off-grid; do
      "$synth" bench --model "$2" --tp "$3" --m-set $ms "${shapes[@]}" --split-k none --recheck-fraction 0 \
        --cu-num 132 --out "$jdir/vendor-$name-plan-journal.csv" --plan-only "$jdir/vendor-$name-$ms.jsonl" \
        2>>"$jdir/vendor.log" && cat "$jdir/vendor-$name-$ms.jsonl" >> "$jdir/vendor-$name-plan.jsonl"
    done
    vendor_rows "$name" "$t"
    continue
  fi
  if [ "$mode" = grid ]; then
    [ "$mset" = off-grid ] && continue
    mset=dataset
    [ -e "$jdir/$name.csv" ] || cp "measurements/h200/$name.csv" "$jdir/$name.csv"
  fi
  t=$(left); [ "$t" -le 5 ] && break
  echo "== $name ($2 TP $3, $mset ${5}), $t s left" | tee -a "$jdir/bench.log"
  timeout "$t" "$synth" bench --model "$2" --tp "$3" --m-set "$mset" "${shapes[@]}" --split-k auto \
    --recheck-fraction 0.03 --seed 7 --out "$jdir/$name.csv" >>"$jdir/bench.out" 2>>"$jdir/bench.log"
  echo "== $name exit $?" | tee -a "$jdir/bench.log"
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit \
  --format=csv >> "$jdir/device.log" 2>&1
cd "$jdir" && tar czf "$out/journals.tgz" ./*.csv ./*.log ./bench.out 2>/dev/null
[ -f bench.out ] && tail -n 40 bench.out
[ -f vendor.log ] && grep "^==" vendor.log | tail -n 20
exit 0
