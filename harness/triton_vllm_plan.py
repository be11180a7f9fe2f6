"""Plan of the comparison with vLLM's tuned config files: per (N, K) file, its configs plus a kept set.

    python3 harness/triton_vllm_plan.py --configs-dir measurements/h200/vllm-h200-configs \\
        --kept measurements/h200/triton-space/kept.txt --out plan.jsonl

For every file ``N={N},K={K},device_name=...,dtype=fp8_w8a8,block_shape=[128,128].json`` (or ``[128, 128]``)
in ``--configs-dir``, the cells are (M, N, K) x (every config the file names, every config of ``--kept``) for
M in ``--grid`` (the tuner's 18 values by default) and then ``--off-grid``: every grid cell of every (N, K)
comes before the first off-grid cell, so a run cut short by its time limit has the grid whole. ``--done``
and ``--done-rescreen`` skip cells already measured, as in ``triton_plan.py``.
"""
import argparse
import os
import re
import sys

import triton_plan
from bsbench import triton_config

#: The M values of vLLM's tuner (benchmarks/kernels/benchmark_w8a8_block_fp8.py).
TUNER_M = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096)
#: M values between and beyond the tuner's, where the runtime's nearest-M lookup decides.
OFF_GRID_M = (3, 6, 12, 20, 40, 80, 200, 384, 768, 2560, 8192)

FILE_RE = re.compile(r"^N=(\d+),K=(\d+),device_name=[^,]+,dtype=fp8_w8a8,block_shape=\[128, ?128\]\.json$")


def read_config_files(folder):
    """{(N, K): sorted config names} of the runtime files in ``folder``; an entry that is no valid config
    is an error naming the file and the M key."""
    out = {}
    for name in sorted(os.listdir(folder)):
        m = FILE_RE.match(name)
        if not m:
            continue
        path = os.path.join(folder, name)
        names = {cfg.name() for _, cfg in triton_config.read_runtime_file(path)}
        nk = (int(m.group(1)), int(m.group(2)))
        out[nk] = sorted(names | set(out.get(nk, ())))
    if not out:
        raise ValueError("%s: no file named N=...,K=...,device_name=...,dtype=fp8_w8a8,block_shape=[128,128].json"
                         % folder)
    return out


def plan(files, kept, grid, off_grid, done, recheck_fraction):
    cells = []
    for ms in (grid, off_grid):
        for (n, k), names in sorted(files.items()):
            confs = [triton_config.parse_name(x) for x in sorted(set(names) | set(kept))]
            cells += triton_plan.plan_cells([(m, n, k) for m in ms], confs, done, recheck_fraction, prior=True)
    return cells


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs-dir", required=True)
    p.add_argument("--kept", required=True, help="file of config names, one a line (# comments)")
    p.add_argument("--grid", default=",".join(map(str, TUNER_M)))
    p.add_argument("--off-grid", default=",".join(map(str, OFF_GRID_M)))
    p.add_argument("--done", nargs="*", default=[])
    p.add_argument("--done-rescreen", nargs="*", default=[])
    p.add_argument("--recheck-fraction", type=float, default=0.02)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    try:
        files = read_config_files(a.configs_dir)
        kept = [c.name() for c in triton_plan.read_configs(a.kept)]
        grid = [int(x) for x in a.grid.split(",") if x]
        off = [int(x) for x in a.off_grid.split(",") if x]
        if any(m < 1 for m in grid + off):
            raise ValueError("M values must be positive")
        done = triton_plan.done_keys([d for d in a.done if os.path.exists(d)])
        done |= triton_plan.done_keys([d for d in a.done_rescreen if os.path.exists(d)], redo_estimates=True)
    except (OSError, ValueError) as e:
        sys.stderr.write("error: %s\n" % e)
        return 2
    cells = plan(files, kept, grid, off, done, a.recheck_fraction)
    with open(a.out, "w", encoding="utf-8") as f:
        for c in cells:
            f.write(c.to_json() + "\n")
    union = set(kept).union(*files.values())
    sys.stderr.write("# plan: %d cells (%d (N, K), %d configs in all, %d grid + %d off-grid M)\n"
                     % (len(cells), len(files), len(union), len(grid), len(off)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
