#!/usr/bin/env python3
"""The rule's speedup over vLLM's default config where that config was screened, not timed.

`synth compare` refuses a screened cell (harness timing "estimate": the fastest of two launches after an
untimed one, taken because the cell looked slower than twice its shape's best so far) as a latency, and
charges a policy whose pick has no usable row the slowest usable time of the shape. For vLLM's default
config that charge is neither a lower nor an upper bound of its real time: another config timed early can
be slower than the default's screen. This script reads `synth compare --csv` files and the harness journals,
and prints per file the geomean speedup of one policy over `default_us` as compare charged it, and with the
last screen estimate of the default config in place of the charge on every shape where the default was
screened (how many, and the estimate / charge range). Standard library only; journals plain or gzip,
read by `harness/triton_plan.py`'s reader (a line cut off by a stopped run is skipped).

    python3 measurements/h200/triton-heldout/default_estimates.py --journal J1.jsonl.gz J2.jsonl.gz \
        --policy OUT/rule/rule.json OUT/compare-*.csv
"""

import argparse
import csv
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "harness"))
from bsbench import triton_config  # noqa: E402
from triton_plan import result_lines  # noqa: E402  (the planner's journal reader)

VLLM_DEFAULT = triton_config.VLLM_DEFAULT.name()


def screens(records, config):
    """{(M, N, K): us} of the config's screened cells that have no graph-timed row among the harness result
    records (in journal order), the last screen winning."""
    est, timed = {}, set()
    for r in records:
        if r.get("kernelName") != config or r.get("status") != "ok":
            continue
        key = (int(r["M"]), int(r["N"]), int(r["K"]))
        if r.get("timing") == "estimate":
            est[key] = float(r["us"])
        elif r.get("timing") == "graph":
            timed.add(key)
    return {k: v for k, v in est.items() if k not in timed}


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def figures(rows, policy, est):
    """(shapes, geomean charged, geomean with estimates, estimates used, [estimate / charge])."""
    charged, with_est, ratios = [], [], []
    for r in rows:
        if r["policy"] != policy:
            continue
        key = (int(r["M"]), int(r["N"]), int(r["K"]))
        us, default = float(r["us"]), float(r["default_us"])
        charged.append(default / us)
        if key in est:
            ratios.append(est[key] / default)
            default = est[key]
        with_est.append(default / us)
    if not charged:
        raise ValueError("no row of policy %r" % policy)
    return len(charged), geomean(charged), geomean(with_est), len(ratios), ratios


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--journal", nargs="+", required=True, help="harness result journals (.jsonl, .jsonl.gz)")
    p.add_argument("--policy", required=True, help="the policy column value to score (e.g. the rule's path)")
    p.add_argument("--config", default=VLLM_DEFAULT, help="the default config's name (vLLM's by default)")
    p.add_argument("compare", nargs="+", help="`synth compare --csv` files")
    args = p.parse_args(argv[1:])
    records = []
    for path in args.journal:
        try:
            records.extend(r for _, r in result_lines(path))
        except ValueError as e:
            # result_lines' errors name the file (and line) themselves.
            sys.stderr.write("error: %s\n" % e)
            return 2
        except OSError as e:
            sys.stderr.write("error: %s: %s\n" % (path, e))
            return 2
    try:
        est = screens(records, args.config)
    except (ValueError, KeyError, TypeError) as e:
        sys.stderr.write("error: a journal record without M, N, K or us: %s\n" % e)
        return 2
    print("compare file: shapes; policy x default as charged -> with the default's screens; screens used "
          "(estimate / charge)")
    for path in args.compare:
        try:
            with open(path, newline="") as f:
                n, g0, g1, used, ratios = figures(csv.DictReader(f), args.policy, est)
        except (OSError, ValueError, KeyError) as e:
            sys.stderr.write("error: %s: %s\n" % (path, e))
            return 2
        span = " (%.2f-%.2f)" % (min(ratios), max(ratios)) if ratios else ""
        print("%s: %d; %.3f -> %.3f; %d%s" % (path, n, g0, g1, used, span))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
