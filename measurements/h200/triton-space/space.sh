#!/bin/bash
# One time-bounded chunk of the 1280-config space sweep (sample + validation shapes, one compile class).
#   space.sh [SECONDS] [m1-first]
# The chunk is the compile class of the first shape with cells left; with m1-first the M = 1 shapes are put
# first, so their class (one, div16, any) is the one measured. SAMPLE and VALIDATE name the shape lists
# (default sample.csv and validate.csv of this directory). SPACE_JOURNALS names the directory whose
# space-*.jsonl.gz journals are done (default this one, whose chunks 1-5 have their screened cells planned
# again); another card's sweep keeps its journals in a directory of its own (../../h100/triton-space/).
set -u
case ${2:-} in
  "" | m1-first) ;;
  *) echo "space.sh: unknown order ${2}: expected m1-first (or none)" >&2; exit 2 ;;
esac
case ${1:-540} in
  '' | *[!0-9]*) echo "space.sh: SECONDS must be a whole number of seconds, not $1" >&2; exit 2 ;;
esac
S=measurements/h200/triton-space
J=${SPACE_JOURNALS:-$S}
[ -d "$J" ] || { echo "space.sh: SPACE_JOURNALS=$J is not a directory" >&2; exit 2; }
SAMPLE=${SAMPLE:-$S/sample.csv} VALIDATE=${VALIDATE:-$S/validate.csv}
for f in "$SAMPLE" "$VALIDATE"; do [ -f "$f" ] || { echo "space.sh: shape list $f not found" >&2; exit 2; }; done
C=${SPACE_SCRATCH:-.space-scratch}; T=${1:-540}; OUT=${OUT:-$C/out}; mkdir -p $OUT
mkdir -p $C/triton; case $C in /*) export TRITON_CACHE_DIR=$C/triton ;; *) export TRITON_CACHE_DIR=$PWD/$C/triton ;; esac
tail -n +2 "$VALIDATE" | cat "$SAMPLE" - > $C/all.csv
if [ "${2:-}" = m1-first ]; then
  { head -n 1 $C/all.csv; tail -n +2 $C/all.csv | awk -F, '$6 == 1'; tail -n +2 $C/all.csv | awk -F, '$6 != 1'; } > $C/all-m1.csv
  mv $C/all-m1.csv $C/all.csv
fi
if [ "$J" -ef "$S" ]; then
  done_args=(--done-rescreen $S/space-chunk-[1-5].jsonl.gz --done $(ls $S/space-*.jsonl.gz | grep -v "space-chunk-[1-5][.]"))
else
  done_args=(--done "$J"/space-*.jsonl.gz)  # an unmatched pattern names no file: triton_plan skips it
fi
python3 harness/triton_plan.py --shapes $C/all.csv "${done_args[@]}" --one-class --order prior \
  --recheck-fraction 0.02 --out $C/plan.jsonl 2> $OUT/plan.log
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv; python3 -c "import torch,triton,sys;print(torch.__version__,torch.version.cuda,triton.__version__,sys.version.split()[0])"; nproc; uname -r; } > $OUT/device.txt 2>&1
timeout $T python3 harness/blockscale_bench.py --plan $C/plan.jsonl --compile-jobs 16 --slow-cutoff 2 --slow-reps 0 \
  > $OUT/space.jsonl 2> $OUT/space.log
echo "rc=$?" >> $OUT/space.log
cat $OUT/plan.log; grep -c '"ok"' $OUT/space.jsonl; grep -v "^compile failure" $OUT/space.log | tail -4
