#!/usr/bin/env bash
# Compile check of the HIP SwiGLU example without an AMD GPU: builds the harness with the original kernel
# and with every pre-written rewrite for each architecture in $HIP_ARCHS (default: gfx90a = MI200,
# gfx940 = MI300 family), and checks that
#   - every rewrite compiles and links, except those named *broken*, which must fail with a compiler error
#     in swiglu.hip;
#   - the device code of the 128-bit rewrites (*vec128*, not broken/wrong) really uses 16-byte loads and
#     stores (global_load_dwordx4 / global_store_dwordx4 in the AMDGPU assembly), and the scalar original
#     none.
# Nothing is run: running needs a ROCm GPU (see README.md).
#
# hipcc comes from Debian 12's own packages (ROCm 5.2, clang 15): `apt-get install --no-install-recommends
# hipcc`; the script installs it when it is missing and it runs as root with apt-get available.
set -euo pipefail
cd "$(dirname "$0")"
ARCHS=${HIP_ARCHS:-"gfx90a gfx940"}

if ! command -v hipcc >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "== installing hipcc (Debian packages hipcc, clang-15, lld-15, rocm-device-libs, libamdhip64-dev, ...)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends hipcc >/dev/null
  else
    echo "hipcc not found; install it (Debian 12: apt-get install --no-install-recommends hipcc) and rerun" >&2
    exit 1
  fi
fi

cmp -s hip/swiglu.hip rewrites/hip/01_original.hip || {
  echo "rewrites/hip/01_original.hip differs from hip/swiglu.hip (the replay's first rewrite is the original)" >&2
  exit 1
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp hip/swiglu.h hip/harness.hip "$tmp/"
failures=0
# hip/swiglu.hip itself is compiled as rewrites/hip/01_original.hip (identical, checked above).
for src in rewrites/hip/*.hip; do
  name=$(basename "$src" .hip)
  cp "$src" "$tmp/swiglu.hip"
  for arch in $ARCHS; do
    label="$src [$arch]"
    if (cd "$tmp" && hipcc -O3 -std=c++17 --offload-arch="$arch" -o swiglu harness.hip swiglu.hip) >"$tmp/log" 2>&1; then
      built=yes
    else
      built=no
    fi
    case "$name" in
      *broken*)
        if [ $built = yes ]; then
          echo "FAIL $label: expected a compile error, but it built"; failures=$((failures + 1))
        elif grep -qE '^swiglu\.hip:[0-9]+:[0-9]+: error:' "$tmp/log"; then
          echo "ok   $label: fails to compile as intended: $(grep -m1 -E '^swiglu\.hip:[0-9]+:[0-9]+: error:' "$tmp/log")"
        else
          echo "FAIL $label: failed, but not with a compiler error in swiglu.hip:"; tail -n 20 "$tmp/log"
          failures=$((failures + 1))
        fi
        continue ;;
    esac
    if [ $built = no ]; then
      echo "FAIL $label: does not build:"; tail -n 30 "$tmp/log"; failures=$((failures + 1)); continue
    fi
    (cd "$tmp" && hipcc -O3 -std=c++17 --offload-arch="$arch" --cuda-device-only -S -o device.s swiglu.hip) >"$tmp/log" 2>&1 || {
      echo "FAIL $label: device assembly failed:"; tail -n 20 "$tmp/log"; failures=$((failures + 1)); continue
    }
    loads=$(grep -c 'global_load_dwordx4' "$tmp/device.s" || true)
    stores=$(grep -c 'global_store_dwordx4' "$tmp/device.s" || true)
    note="builds; device code: $loads 16-byte loads, $stores 16-byte stores"
    case "$name" in
      *original*)
        if [ "$loads" -ne 0 ]; then
          echo "FAIL $label: $note (the scalar original should have no 16-byte loads)"; failures=$((failures + 1)); continue
        fi ;;
      *vec128*)
        case "$name" in *wrong*) ;; *)
          if [ "$loads" -lt 2 ] || [ "$stores" -lt 1 ]; then
            echo "FAIL $label: $note (expected 16-byte loads and stores)"; failures=$((failures + 1)); continue
          fi ;;
        esac ;;
    esac
    echo "ok   $label: $note"
  done
done
if [ $failures -ne 0 ]; then
  echo "$failures HIP check(s) failed" >&2
  exit 1
fi
echo "HIP compile check passed (hipcc $(hipconfig --version 2>/dev/null || echo '(version unknown)'), archs: $ARCHS)"
