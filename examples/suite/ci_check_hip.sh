#!/usr/bin/env bash
# Compile check of the suite's HIP tasks without an AMD GPU: hip/ must be what hip_sync.sh makes of cuda/,
# and every task's harness with its original kernel must compile and link with Debian's hipcc for each
# architecture in $HIP_ARCHS (default gfx90a = MI200; clang 15 does not know gfx942). Nothing runs.
# Installs hipcc (Debian 12: apt-get install --no-install-recommends hipcc) when it is missing and it runs as
# root with apt-get available.
set -euo pipefail
cd "$(dirname "$0")"
ARCHS=${HIP_ARCHS:-gfx90a}

./hip_sync.sh --check

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

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
tasks=0
start=$SECONDS
for spec in hip/*.toml; do
  task=$(basename "$spec" .toml)
  tasks=$((tasks + 1))
  for arch in $ARCHS; do
    if (cd hip && hipcc -O3 -std=c++17 --offload-arch="$arch" -I. -o "$tmp/$task" \
          "$task/harness.hip" "$task/$task.hip") >"$tmp/log" 2>&1; then
      echo "ok   $task [$arch]"
    else
      echo "FAIL $task [$arch]: does not build:"; tail -n 30 "$tmp/log"; failures=$((failures + 1))
    fi
  done
done
if [ $failures -ne 0 ]; then
  echo "$failures HIP suite build(s) failed" >&2
  exit 1
fi
echo "HIP suite compile check passed: $tasks tasks, archs $ARCHS, $((SECONDS - start)) s" \
  "(hipcc $(hipconfig --version 2>/dev/null || echo '(version unknown)'))"
