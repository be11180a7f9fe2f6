#!/usr/bin/env bash
# Measures the zoo of measurements/zoo/README.md in deadline-bounded, resumable runs.
#
#   measurements/zoo/measure.sh DEADLINE_S JOURNAL_DIR OUT_DIR [deep] [grid] [off-grid] [vendor]
#
# Runs the README's generated `synth bench` commands (the one source of them: `tests/zoo.rs` writes them and
# fails when they are stale), in the order of the parts named (default: deep grid off-grid):
#   deep      the `--split-k aiter` measurement of the weak region (zoo-splitk-aiter.csv);
#   grid      each configuration's command as written (`--m-set dataset`);
#   off-grid  the same commands with `--m-set off-grid`, into the same journals;
#   vendor    (only when named) the vendor GEMM (harness/vendor_reference.py, cuBLAS on CUDA) on each
#             configuration's grid and off-grid shapes into vendor-NAME.csv (skipped where that file is
#             there; vendor_reference.py writes it whole or not at all): the rows `--backends ck,vendor`
#             needs. VENDOR_REFERENCE names the command (default `python3 harness/vendor_reference.py`).
# Every journal goes to JOURNAL_DIR under the name the command gives it; a rerun resumes each journal where
# it stopped: a journal not yet in JOURNAL_DIR is first seeded from the committed one beside this script
# (NAME.csv.gz, decompressed), so a run resumes the committed measurements and measures only what they lack
# (ZOO_SEED=none starts from nothing). Every bench stops DEADLINE_S seconds after the start at the latest.
# At the end the journals and logs are packed into OUT_DIR/zoo-journals.tgz. SYNTH names the binary (default target/release/synth);
# BENCH_ARGS is appended to every command (e.g. `--python python3 --harness ...`). ZOO_ONLY=NAME,NAME... (journal
# names without .csv, e.g. qwen2.5-72b-tp1, matched whole) runs only those commands, in that order; a name no
# command of the README writes is one error before anything runs. Run from the
# repository root.
set -u
if [ $# -lt 3 ]; then
  echo "usage: measurements/zoo/measure.sh DEADLINE_S JOURNAL_DIR OUT_DIR [deep] [grid] [off-grid] [vendor]" >&2
  exit 2
fi
deadline=$1 jdir=$2 out=$3
shift 3
case $deadline in
  '' | *[!0-9]*) echo "measure.sh: DEADLINE_S must be a whole number of seconds, not $deadline" >&2; exit 2 ;;
esac
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(deep grid off-grid)
for part in "${parts[@]}"; do
  case $part in
    deep | grid | off-grid | vendor) ;;
    *) echo "measure.sh: unknown part $part: expected deep, grid, off-grid or vendor" >&2; exit 2 ;;
  esac
done
readme=measurements/zoo/README.md
synth=${SYNTH:-./target/release/synth}
[ -f "$readme" ] || { echo "measure.sh: $readme not found: run from the repository root" >&2; exit 2; }
[ -x "$synth" ] || { echo "measure.sh: $synth is not an executable: build it or set SYNTH" >&2; exit 2; }
# out_name LINE...: the journal name (without .csv) each README command line writes, one a line.
out_name() { sed -n 's/.* --out \([^ ]*\)[.]csv\( .*\)\{0,1\}$/\1/p'; }
only=()
if [ -n "${ZOO_ONLY:-}" ]; then
  IFS=', ' read -ra fields <<< "$ZOO_ONLY"
  for f in "${fields[@]}"; do [ -n "$f" ] && only+=("$f"); done
  known=$(grep '^synth bench ' "$readme" | out_name)
  [ ${#only[@]} -gt 0 ] || { echo "measure.sh: ZOO_ONLY='$ZOO_ONLY' names no configuration" >&2; exit 2; }
  for name in "${only[@]}"; do
    grep -qxF -- "$name" <<< "$known" ||
      { echo "measure.sh: ZOO_ONLY names $name, which no command of $readme writes (expected a journal name such as qwen2.5-72b-tp1)" >&2; exit 2; }
  done
fi
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
mkdir -p "$jdir" "$out"
touch "$jdir/bench.log" "$jdir/vendor.log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit \
  --format=csv >> "$jdir/device.log" 2>&1

# The README's commands of one part, one per line (ZOO_ONLY: those journals' commands, in its order).
commands() {
  if [ -n "${ZOO_ONLY:-}" ]; then
    local all name line
    all=$(ZOO_ONLY='' commands "$1")
    for name in "${only[@]}"; do
      while read -r line; do
        [ -n "$line" ] && [ "$(out_name <<< "$line")" = "$name" ] && echo "$line"
      done <<< "$all"
    done
    return 0
  fi
  case $1 in
    deep) grep '^synth bench .*--split-k aiter' "$readme" ;;
    grid) grep '^synth bench --model .*--m-set dataset' "$readme" ;;
    off-grid) grep '^synth bench --model .*--m-set dataset' "$readme" | sed 's/--m-set dataset/--m-set off-grid/' ;;
    vendor) grep '^synth bench --model .*--m-set dataset' "$readme" ;;
  esac
}

# vendor_rows LINE: the vendor GEMM on the grid and off-grid shapes of one grid command's configuration.
vendor_rows() {
  local name words plan ms i args
  name=vendor-$(sed -n 's/.* --out \([^ ]*\).*/\1/p' <<< "$1")
  [ -s "$jdir/$name" ] && { echo "== vendor: $name is there" | tee -a "$jdir/vendor.log"; return 0; }
  read -ra words <<< "$1"
  plan="$jdir/${name%.csv}-plan.jsonl"
  : > "$plan"
  for ms in dataset off-grid; do
    args=()
    for ((i = 2; i < ${#words[@]}; i++)); do
      case ${words[i]} in
        --m-set) args+=(--m-set "$ms"); i=$((i + 1)) ;;
        --split-k) args+=(--split-k none); i=$((i + 1)) ;;
        --recheck-fraction) args+=(--recheck-fraction 0); i=$((i + 1)) ;;
        --out) args+=(--out "$jdir/${name%.csv}-plan-journal.csv" --plan-only "$plan.$ms"); i=$((i + 1)) ;;
        *) args+=("${words[i]}") ;;
      esac
    done
    "$synth" bench "${args[@]}" --cu-num 132 >>"$jdir/vendor.log" 2>&1 && cat "$plan.$ms" >> "$plan" ||
      { echo "== vendor: cannot plan $name ($ms)" | tee -a "$jdir/vendor.log"; return 1; }
  done
  local t; t=$(left)
  [ "$t" -le 5 ] && { echo "== deadline reached before: vendor $name" | tee -a "$jdir/vendor.log"; return 2; }
  echo "== vendor: $name ($t s left)" | tee -a "$jdir/vendor.log"
  # shellcheck disable=SC2206
  local cmd=(${VENDOR_REFERENCE:-python3 harness/vendor_reference.py})
  timeout "$t" "${cmd[@]}" --plan "$plan" --out "$jdir/$name" >>"$jdir/vendor.log" 2>&1
  local rc=$?
  echo "== vendor exit $rc" | tee -a "$jdir/vendor.log"
  [ $rc -eq 0 ] || [ $rc -eq 124 ] || return 1
}

status=0
for part in "${parts[@]}"; do
  cmds=$(commands "$part")
  while read -r line; do
    [ -z "$line" ] && continue
    if [ "$part" = vendor ]; then
      vendor_rows "$line"
      case $? in 0) ;; 2) break 2 ;; *) status=1 ;; esac
      continue
    fi
    read -ra words <<< "$line"
    args=()
    for ((i = 2; i < ${#words[@]}; i++)); do
      if [ "${words[i]}" = --out ]; then
        args+=(--out "$jdir/${words[i + 1]}")
        i=$((i + 1))
      else
        args+=("${words[i]}")
      fi
    done
    name=$(sed -n 's/.* --out \([^ ]*\).*/\1/p' <<< "$line")
    committed=measurements/zoo/$name.gz
    if [ "${ZOO_SEED:-}" != none ] && [ -n "$name" ] && [ ! -e "$jdir/$name" ] && [ -f "$committed" ]; then
      gunzip -c "$committed" > "$jdir/$name.part" && mv "$jdir/$name.part" "$jdir/$name" ||
        { echo "measure.sh: cannot decompress $committed into $jdir" >&2; exit 1; }
      echo "== seeded $name from $committed" | tee -a "$jdir/bench.log"
    fi
    # shellcheck disable=SC2206
    extra=(${BENCH_ARGS:-})
    t=$(left)
    if [ "$t" -le 5 ]; then
      echo "== deadline reached before: $line" | tee -a "$jdir/bench.log"
      break 2
    fi
    echo "== $part: $line ($t s left)" | tee -a "$jdir/bench.log"
    timeout "$t" "$synth" bench "${args[@]}" "${extra[@]}" >>"$jdir/bench.out" 2>>"$jdir/bench.log"
    rc=$?
    echo "== exit $rc" | tee -a "$jdir/bench.log"
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && status=1
  done <<< "$cmds"
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit \
  --format=csv >> "$jdir/device.log" 2>&1
(cd "$jdir" && tar czf - ./*.csv ./*.log ./bench.out 2>/dev/null) > "$out/zoo-journals.tgz"
cat "$jdir/bench.log" "$jdir/vendor.log" | grep "^==" | tail -n 20
exit $status
