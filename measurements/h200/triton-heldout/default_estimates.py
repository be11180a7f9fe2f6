#!/usr/bin/env python3
"""The rule's speedup over vLLM's default config where that config was screened, not timed.

`synth compare` refuses a screened cell (harness timing "estimate": the fastest of two launches after an
untimed one, taken because the cell looked slower than twice its shape's best so far) as a latency, and
charges a policy whose pick has no usable row the slowest usable time of the shape. For vLLM's default
config that charge is neither a lower nor an upper bound of its real time: another config timed early can
be slower than the default's screen. This script reads `synth compare --csv` files and the harness journals,
and prints per file the geomean speedup of one policy over `default_us` as compare charged it, and with the
last screen estimate of the default config in place of the charge on every shape where the default was
screened (how many, and the estimate / charge range). Standard library only; journals plain or gzip.

    python3 measurements/h200/triton-heldout/default_estimates.py --journal J1.jsonl.gz J2.jsonl.gz \
        --policy OUT/rule/rule.json OUT/compare-*.csv
"""

import argparse
import csv
import gzip
import json
import math
import sys

VLLM_DEFAULT = "triton_bm64_bn128_bk128_g32_w4_s2"


def open_text(path):
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt") if gz else open(path)


def screens(journals, config):
    """{(M, N, K): us} of the config's screened cells that have no graph-timed row in any of the journals
    (iterables of lines, in order), the last screen winning."""
    est, timed = {}, set()
    for line in (line for lines in journals for line in lines):
        if not line.strip():
            continue
        r = json.loads(line)
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
    texts = []
    for path in args.journal:
        try:
            with open_text(path) as f:
                texts.append(f.read().splitlines())
        except (OSError, ValueError) as e:
            sys.stderr.write("error: %s: %s\n" % (path, e))
            return 2
    try:
        est = screens(texts, args.config)
    except (ValueError, KeyError) as e:
        sys.stderr.write("error: a journal line: %s\n" % e)
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
