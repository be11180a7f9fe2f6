#!/usr/bin/env bash
# Proof that generated/aiter/gemm_a8w8_blockscale_heuristic.patch (or that of RULE_DIR) drops into AITER main, on a machine
# without ROCm:
#   1. git apply --check in AITER_DIR (left untouched), then `synth aiter` applies it to a scratch copy and,
#      run again, must report it already applied;
#   2. AITER's own codegen (gen_instances.py -> chip_info.build_tune_dict, GPU_ARCHS=gfx942), patched and
#      unpatched, on the real tuned CSVs: the patched manifest declares every kernel the heuristic returns,
#      the name-keyed registry (tuned names) is byte-identical, and only those kernels are added;
#   3. g++ compiles the patched gemm_a8w8_blockscale.cu and both lookup sources against the manifest and
#      registry it generated plus small torch/CK stub headers (synth aiter --kit), links them with stand-in
#      kernels and a driver calling gemm_a8w8_blockscale with AITER's untuned arguments (splitK 0, empty
#      kernelName) on random shapes, and the kernel and KBatch it runs must equal the interpreter's choice
#      for every shape; AITER_BLOCKSCALE_HEURISTIC=0 must give AITER's fixed default, a tuned name must keep
#      today's path (its kernel, KBatch = 1 << splitK) and an unknown name today's error;
#   4. for a rule with triton leaves (--backends ck,triton): AITER's real aiter/ops/gemm_op_a8w8.py, patched,
#      imported under python3 with stand-in modules (scripts/aiter-check/run_python_side.py) takes the
#      rule's route on the same shapes: the CK module with the untuned arguments, or AITER's Triton
#      blockscale GEMM with the leaf's config; the switch at 0 and a bad value as on the C++ side.
# Nothing here runs a GPU kernel: the kernels are stand-ins that record their name and KBatch.
#
# Usage: scripts/check-aiter-patch.sh AITER_DIR [SHAPES]
#   AITER_DIR  root of a ROCm/aiter checkout (main, written against e4048607a5); not modified
#   SHAPES     random shapes for the dispatch comparison (default 20000, at least 10000)
# Environment: RULE_DIR (default generated/ of the crate: the output directory of a synth run, holding
# rule.json and aiter/gemm_a8w8_blockscale_heuristic.patch, e.g. a run --train-tuned --out DIR), SYNTH
# (default target/release/synth, built if missing), CXX (default g++), PYTHON (default python3; needs
# pandas and packaging, else they are installed into a venv in the scratch directory), KEEP=1 keeps the
# scratch directory.
set -euo pipefail

die() { echo "check-aiter-patch: $*" >&2; exit 1; }
[ $# -ge 1 ] || die "usage: $0 AITER_DIR [SHAPES]"
AITER=$(cd "$1" && pwd) || die "no such directory: $1"
SHAPES=${2:-20000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT_DIR=${RULE_DIR:-$ROOT/generated}
RULE_DIR=$(cd "$OUT_DIR" 2>/dev/null && pwd) || die "RULE_DIR: no such directory: $OUT_DIR"
PATCH="$RULE_DIR/aiter/gemm_a8w8_blockscale_heuristic.patch"
RULE="$RULE_DIR/rule.json"
SYNTH=${SYNTH:-$ROOT/target/release/synth}
CXX=${CXX:-g++}
PYTHON=${PYTHON:-python3}
MOD=csrc/ck_gemm_a8w8_blockscale
[ -f "$PATCH" ] || die "$PATCH is missing: run synth run (with --out \$RULE_DIR when RULE_DIR is set)"
[ -f "$RULE" ] || die "$RULE is missing: run synth run (with --out \$RULE_DIR when RULE_DIR is set)"
[ -x "$SYNTH" ] || (cd "$ROOT" && cargo build --release --locked --bin synth) || die "cannot build synth"

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/check-aiter-patch.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then echo "scratch directory: $SCRATCH"; else trap 'rm -rf "$SCRATCH"' EXIT; fi
passed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }

echo "== 1. the patch applies"
git -C "$AITER" apply --check "$PATCH" || die "git apply --check failed in $AITER (already patched, or AITER moved: run synth aiter --aiter-dir $AITER --check)"
ok "git apply --check in $AITER"
COPY="$SCRATCH/aiter"
mkdir -p "$COPY/csrc" "$COPY/aiter/jit" "$COPY/aiter/ops"
cp -r "$AITER/$MOD" "$COPY/csrc/"
cp -r "$AITER/aiter/jit/utils" "$COPY/aiter/jit/"
cp "$AITER/aiter/ops/gemm_op_a8w8.py" "$COPY/aiter/ops/"
"$SYNTH" aiter --aiter-dir "$COPY" --patch "$PATCH" | tee "$SCRATCH/apply1.txt"
grep -q "applied to" "$SCRATCH/apply1.txt" || die "synth aiter did not apply the patch to the scratch copy"
ok "synth aiter applied the patch to a scratch copy"
"$SYNTH" aiter --aiter-dir "$COPY" --patch "$PATCH" | tee "$SCRATCH/apply2.txt"
grep -q "already applied" "$SCRATCH/apply2.txt" || die "a second synth aiter run did not report the patch as applied"
ok "a second run reports the tree as already patched"

echo "== 2. AITER's codegen compiles every kernel the heuristic returns (GPU_ARCHS=gfx942)"
if ! "$PYTHON" -c "import pandas, packaging" 2>/dev/null; then
  echo "($PYTHON lacks pandas/packaging: installing them into a venv in the scratch directory)"
  "$PYTHON" -m venv "$SCRATCH/venv" && "$SCRATCH/venv/bin/pip" install -q pandas packaging || die "cannot install pandas and packaging"
  PYTHON="$SCRATCH/venv/bin/python"
fi
"$SYNTH" aiter --kit "$SCRATCH/kit" --rule "$RULE" --shapes "$SHAPES"
KIT="$SCRATCH/kit"
names() { grep -oE '^a8w8_blockscale_[A-Za-z0-9_]+' "$1" | sort -u; }
registry() { grep -oE '\{"a8w8_blockscale_[A-Za-z0-9_]+"' "$1" | tr -d '{"' | sort -u; }
codegen() { # TREE OUT CSV...
  local tree=$1 out=$2; shift 2
  PYTHONDONTWRITEBYTECODE=1 GPU_ARCHS=gfx942 "$PYTHON" "$ROOT/scripts/aiter-check/run_codegen.py" "$tree" "$out" "$out.merged.csv" "$@" >/dev/null
}
main_csv="$AITER/aiter/configs/a8w8_blockscale_tuned_gemm.csv"
model_csvs=$(ls "$AITER"/aiter/configs/model_configs/*a8w8_blockscale_tuned_gemm*.csv 2>/dev/null | grep -v untuned || true)
for set in main merged; do
  if [ $set = main ]; then csvs=("$main_csv"); else read -r -a csvs <<<"$main_csv $(echo $model_csvs)"; fi
  codegen "$AITER" "$SCRATCH/blob-orig-$set" "${csvs[@]}"
  codegen "$COPY" "$SCRATCH/blob-$set" "${csvs[@]}"
  B="$SCRATCH/blob-$set"; O="$SCRATCH/blob-orig-$set"
  rows=$("$PYTHON" -c "import pandas as p,sys; d=p.read_csv(sys.argv[1]); print(int(((d.gfx=='gfx942')&(d.cu_num==304)&(d.libtype=='ck')).sum()))" "$B.merged.csv")
  missing=$(comm -23 <(sort -u "$KIT/heuristic_kernels.txt") <(names "$B/gemm_a8w8_blockscale_manifest.h"))
  [ -z "$missing" ] || die "[$set] the patched manifest does not declare: $missing"
  for k in $(cat "$KIT/heuristic_kernels.txt"); do
    [ -f "$B/instances/${k}_dFP32_eBF16.cpp" ] && [ -f "$B/instances/${k}_dFP32_eFP16.cpp" ] || die "[$set] no instance files for $k"
  done
  cmp -s "$B/gemm_a8w8_blockscale_lookup.h" "$O/gemm_a8w8_blockscale_lookup.h" || die "[$set] the name-keyed registry changed"
  added=$(comm -13 <(names "$O/gemm_a8w8_blockscale_manifest.h") <(names "$B/gemm_a8w8_blockscale_manifest.h"))
  extra=$(comm -23 <(echo "$added" | sed '/^$/d' | sort -u) <(sort -u "$KIT/heuristic_kernels.txt"))
  [ -z "$extra" ] || die "[$set] the patched codegen added kernels the heuristic does not return: $extra"
  ok "[$set: $(printf '%s ' "${csvs[@]##*/}")] $rows gfx942 ck rows; manifest $(names "$O/gemm_a8w8_blockscale_manifest.h" | wc -l) -> $(names "$B/gemm_a8w8_blockscale_manifest.h" | wc -l) kernels (+$(echo "$added" | sed '/^$/d' | wc -l) for the heuristic), all $(wc -l <"$KIT/heuristic_kernels.txt") heuristic kernels declared and generated, registry unchanged ($(registry "$B/gemm_a8w8_blockscale_lookup.h" | wc -l) tuned names)"
done

echo "== 3. the patched dispatch, compiled with $CXX, runs the interpreter's choice"
B="$SCRATCH/blob-merged"
SRC="$SCRATCH/src"; mkdir -p "$SRC"
cp "$COPY/$MOD/gemm_a8w8_blockscale.cu" "$COPY/$MOD/gemm_a8w8_blockscale_lookup_fp16.cu" "$COPY/$MOD/gemm_a8w8_blockscale_lookup_bf16.cu" "$SRC/"
# GCC before 13 rejects AITER's `static_assert(false, ...)` in a discarded `if constexpr` branch (P2593,
# which newer GCC and clang accept); for such a compiler only, that one line (not part of the patch) is
# spelled the pre-P2593 way, with the same meaning.
gcc_major=$(echo __GNUC__ | "$CXX" -E -x c++ - | tail -n 1)
if [ "$gcc_major" -lt 13 ] 2>/dev/null && "$CXX" --version | grep -qi 'g++\|gcc'; then
  sed -i 's/static_assert(false, "blockscale_dispatch used with unsupported dtype!")/static_assert(sizeof(EDataType) == 0, "blockscale_dispatch used with unsupported dtype!")/' "$SRC/gemm_a8w8_blockscale.cu"
  echo "($CXX is GCC $gcc_major: AITER's static_assert(false, ...) line respelled static_assert(sizeof(EDataType) == 0, ...))"
fi
FLAGS=(-std=c++2b -O1 -Wall -Wno-unused-function -DUSE_ROCM -I "$KIT/stub" -I "$COPY/$MOD/include" -I "$B" -I "$KIT")
objs=()
for f in gemm_a8w8_blockscale gemm_a8w8_blockscale_lookup_fp16 gemm_a8w8_blockscale_lookup_bf16; do
  "$CXX" "${FLAGS[@]}" -x c++ -c "$SRC/$f.cu" -o "$SCRATCH/$f.o" || die "$CXX cannot compile the patched $f.cu"
  objs+=("$SCRATCH/$f.o")
done
"$CXX" "${FLAGS[@]}" -c "$KIT/kernels.cpp" -o "$SCRATCH/kernels.o"
"$CXX" "${FLAGS[@]}" -c "$KIT/driver.cpp" -o "$SCRATCH/driver.o"
"$CXX" -o "$SCRATCH/driver" "${objs[@]}" "$SCRATCH/kernels.o" "$SCRATCH/driver.o" || die "link failed: a kernel the dispatch references is not defined"
ok "$CXX compiled the patched gemm_a8w8_blockscale.cu, both lookup sources, the generated manifest and registry, and linked the driver"
D="$SCRATCH/driver"
(unset AITER_BLOCKSCALE_HEURISTIC; "$D" choices <"$KIT/shapes.txt" >"$SCRATCH/got.txt") || die "the driver failed"
n=$(wc -l <"$KIT/expected.txt")
if ! cmp -s "$SCRATCH/got.txt" "$KIT/expected.txt"; then
  diff "$KIT/expected.txt" "$SCRATCH/got.txt" | head -n 10 >&2
  die "the patched dispatch differs from the interpreter (expected < > ran)"
fi
ok "$n random shapes: kernel and KBatch equal the interpreter's choice (fp16 and bf16 output; $(cut -d' ' -f4 "$SCRATCH/got.txt" | sort -u | wc -l) kernels, KBatch $(cut -d' ' -f5 "$SCRATCH/got.txt" | sort -un | tr '\n' ' '))"
default=$(cat "$KIT/default_kernel.txt")
AITER_BLOCKSCALE_HEURISTIC=0 "$D" choices <"$KIT/shapes.txt" >"$SCRATCH/off.txt" || die "the driver failed with the heuristic off"
bad=$(awk -v d="$default" '$4 != d || $5 != 1' "$SCRATCH/off.txt" | wc -l)
[ "$bad" -eq 0 ] && [ "$(wc -l <"$SCRATCH/off.txt")" -eq "$n" ] || die "AITER_BLOCKSCALE_HEURISTIC=0: $bad shapes did not run AITER's default kernel with KBatch 1"
ok "AITER_BLOCKSCALE_HEURISTIC=0: all $n shapes run AITER's fixed default ($default, KBatch 1)"
if AITER_BLOCKSCALE_HEURISTIC=yes "$D" choices <<<"1 2 3" >/dev/null 2>"$SCRATCH/env.err"; then die "a bad AITER_BLOCKSCALE_HEURISTIC value was accepted"; fi
grep -q "AITER_BLOCKSCALE_HEURISTIC='yes' is not understood" "$SCRATCH/env.err" || die "unexpected error for a bad AITER_BLOCKSCALE_HEURISTIC: $(cat "$SCRATCH/env.err")"
ok "a bad AITER_BLOCKSCALE_HEURISTIC value is an error: $(cat "$SCRATCH/env.err")"
tuned=$(registry "$B/gemm_a8w8_blockscale_lookup.h" | head -n 1)
got=$("$D" tuned "$tuned" 2 64 7168 2048)
[ "$got" = "$tuned 4" ] || die "tuned kernelName $tuned with splitK 2 ran '$got' (expected KBatch 4)"
ok "a tuned kernelName keeps today's path: $tuned with splitK 2 runs with KBatch 4"
err=$("$D" error no_such_kernel 64 7168 2048) || die "an unknown kernelName did not raise"
echo "$err" | grep -q "is not present in the compiled registry" || die "unexpected error text: $err"
ok "an unknown kernelName raises today's error"
if [ -f "$KIT/python_expected.txt" ]; then
  echo "== 4. the patched aiter/ops/gemm_op_a8w8.py routes each untuned shape to the rule's backend (Python, stubs)"
  grep -q "_gemm_synth_untuned" "$COPY/aiter/ops/gemm_op_a8w8.py" || die "the patch did not change aiter/ops/gemm_op_a8w8.py"
  PY_SIDE=("$PYTHON" "$ROOT/scripts/aiter-check/run_python_side.py" "$COPY")
  env -u AITER_BLOCKSCALE_HEURISTIC PYTHONDONTWRITEBYTECODE=1 "${PY_SIDE[@]}" <"$KIT/shapes.txt" >"$SCRATCH/py_got.txt" || die "the patched gemm_op_a8w8.py failed under the stubs"
  if ! cmp -s "$SCRATCH/py_got.txt" "$KIT/python_expected.txt"; then
    diff "$KIT/python_expected.txt" "$SCRATCH/py_got.txt" | head -n 10 >&2
    die "the Python side's routes differ from the interpreter (expected < > ran)"
  fi
  ok "$n shapes: AITER's real gemm_a8w8_blockscale (patched) calls the CK module or AITER's Triton GEMM with the rule's config exactly where the interpreter says ($(grep -c '^triton' "$SCRATCH/py_got.txt") triton, $(grep -c '^ck-path' "$SCRATCH/py_got.txt") CK)"
  env AITER_BLOCKSCALE_HEURISTIC=0 PYTHONDONTWRITEBYTECODE=1 "${PY_SIDE[@]}" <"$KIT/shapes.txt" >"$SCRATCH/py_off.txt" || die "the Python side failed with the switch off"
  [ "$(grep -vc '^ck-path$' "$SCRATCH/py_off.txt")" -eq 0 ] || die "AITER_BLOCKSCALE_HEURISTIC=0: a shape left the CK default path"
  ok "AITER_BLOCKSCALE_HEURISTIC=0: every shape takes AITER's CK path (its fixed default)"
  bad=$(echo "64 5120 5120" | env AITER_BLOCKSCALE_HEURISTIC=yes PYTHONDONTWRITEBYTECODE=1 "${PY_SIDE[@]}")
  echo "$bad" | grep -q "^error AITER_BLOCKSCALE_HEURISTIC='yes' is not understood" || die "a bad switch value on the Python side: $bad"
  ok "a bad AITER_BLOCKSCALE_HEURISTIC value is an error on the Python side too"
fi
echo "== $passed passed, 0 failed (AITER at $(git -C "$AITER" rev-parse --short=10 HEAD 2>/dev/null || echo '?'); nothing ran on an AMD GPU)"
