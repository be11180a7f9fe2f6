#!/usr/bin/env python3
"""Measures FP8 blockscale GEMM candidates listed in a plan file (JSON lines) on the local GPU.

stdout: one JSON line per finished cell (flushed as it finishes); stderr: progress and errors.
Exit codes: 0 done, 2 bad usage or plan, 3 no PyTorch, 4 no Triton, 5 no GPU, 6 GPU lost mid-run.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bsbench import config, env  # noqa: E402
from bsbench.plan import PlanError, read_plan  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--plan", help="plan file: one JSON cell per line")
    p.add_argument("--probe", action="store_true", help="print the device description as JSON and exit")
    p.add_argument("--mapping", default=config.DEFAULT_MAPPING_TEXT,
                   help="T:S1:S3 = num_warps BlockSize/T, num_stages S1 (pipeline v1) and S3 (v3); default %(default)s")
    p.add_argument("--budget-ms", type=float, default=4.0, help="timed replay budget per cell (default %(default)s)")
    p.add_argument("--min-reps", type=int, default=20)
    p.add_argument("--max-reps", type=int, default=100)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--compile-jobs", type=int, default=1,
                   help="worker processes compiling the plan's kernel variants before measuring (default 1)")
    p.add_argument("--slow-cutoff", type=float, default=0.0,
                   help="time a cell with --slow-reps repetitions when its warm-up estimate exceeds this many "
                        "times the best median so far on its shape (default 0 = off)")
    p.add_argument("--slow-reps", type=int, default=5,
                   help="repetitions of such a cell; 0 keeps its two warm-up launches as its times (timing "
                        "\"estimate\", a screening figure)")
    p.add_argument("--no-graph", action="store_true", help="time single launches between events with an L2 flush")
    args = p.parse_args(argv)
    if not args.probe and not args.plan:
        p.error("--plan FILE is required (or --probe)")
    if args.min_reps < 1 or args.max_reps < args.min_reps:
        p.error("need 1 <= --min-reps <= --max-reps")
    if args.compile_jobs < 1 or args.slow_reps < 0 or args.slow_cutoff < 0:
        p.error("need --compile-jobs >= 1, --slow-reps >= 0, --slow-cutoff >= 0")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        mapping = config.parse_mapping(args.mapping)
    except ValueError as e:
        sys.stderr.write("error: --mapping: %s\n" % e)
        return env.EXIT_USAGE
    cells = []
    if args.plan:
        try:
            cells = read_plan(args.plan)
        except (PlanError, OSError) as e:
            sys.stderr.write("error: %s\n" % e)
            return env.EXIT_USAGE
    try:
        torch = env.import_torch()
        triton = env.import_triton()
        device = env.detect(torch)
    except env.EnvError as e:
        sys.stderr.write("error: %s\n" % e)
        return e.code
    info = dict(device, torch=torch.__version__, triton=triton.__version__, mapping=mapping.text(),
                mapping_rule=mapping.describe())
    if args.probe:
        print(json.dumps(info), flush=True)
        return 0
    sys.stderr.write("# device %s\n" % json.dumps(info))
    if not device["l2_known"]:
        sys.stderr.write("# L2 size not reported by PyTorch; assuming %d bytes\n" % device["l2_bytes"])
    from bsbench import compile_pool, runner
    opts = runner.Options(mapping, budget_us=args.budget_ms * 1e3, min_reps=args.min_reps, max_reps=args.max_reps,
                          use_graph=not args.no_graph, seed=args.seed, compile_jobs=args.compile_jobs,
                          slow_cutoff=args.slow_cutoff, slow_reps=args.slow_reps)
    r = runner.Runner(device, opts)

    def emit(line):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    try:
        r.precompile(cells, compile_pool.warm_cache)
        r.run(cells, emit)
    except env.EnvError as e:
        sys.stderr.write("error: %s\n" % e)
        return e.code
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
