"""What measuring screened cells again changed: per shape, the cells of the later journals against the best
graph-timed cell of the earlier ones.

    python3 harness/triton_rescreen.py --before measurements/h200/triton-space/space-chunk-[1-5].jsonl.gz \\
        --after measurements/h200/triton-space/space-chunk-[6-9].jsonl.gz measurements/h200/triton-space/space-chunk-10.jsonl.gz

For each shape the later journals touch: cells measured again, how many of them were graph-timed (passed the
screen), how many are within the tolerance of the earlier best, and the ratio of the later best to the
earlier best when it is lower (a config the earlier screen hid). Rechecks and failed cells are left out.
"""
import argparse
import glob
import sys

import triton_plan


def best_graph(paths):
    """{(M, N, K): best graph-timed us} of the ok first measurements in ``paths``."""
    best = {}
    for path in paths:
        for _, r in triton_plan.result_lines(path):
            if r.get("recheck", 0) or r.get("status") != "ok" or r.get("timing") != "graph":
                continue
            s = (r["M"], r["N"], r["K"])
            best[s] = min(best.get(s, float("inf")), float(r["us"]))
    return best


def later_cells(paths):
    """{(M, N, K): {config: (timing, us)}} of the ok first measurements in ``paths``, later rows winning."""
    cells = {}
    for path in paths:
        for _, r in triton_plan.result_lines(path):
            if r.get("recheck", 0) or r.get("status") != "ok":
                continue
            cells.setdefault((r["M"], r["N"], r["K"]), {})[r["kernelName"]] = (r.get("timing"), float(r["us"]))
    return cells


def report(before, after, tolerance):
    """Rows (shape, measured again, graph-timed, within tolerance, later best / earlier best or None) and
    the totals."""
    rows, totals = [], [0, 0, 0, 0]
    for s in sorted(after):
        timed = [us for t, us in after[s].values() if t == "graph"]
        ref = before.get(s)
        within = sum(1 for us in timed if ref is not None and us <= (1 + tolerance) * ref)
        lower = min(timed) / ref if timed and ref is not None and min(timed) < ref else None
        rows.append((s, len(after[s]), len(timed), within, lower))
        totals[0] += len(after[s])
        totals[1] += len(timed)
        totals[2] += within
        totals[3] += lower is not None
    return rows, totals


def expand(patterns):
    out = []
    for p in patterns:
        hits = sorted(glob.glob(p))
        out.extend(hits if hits else [p])
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", nargs="+", required=True, help="journals of the first measurement (globs expanded)")
    ap.add_argument("--after", nargs="+", required=True, help="journals of the measurement again")
    ap.add_argument("--tolerance", type=float, default=0.01)
    args = ap.parse_args(argv)
    try:
        rows, totals = report(best_graph(expand(args.before)), later_cells(expand(args.after)), args.tolerance)
    except (OSError, ValueError, KeyError) as e:
        sys.stderr.write("error: %s\n" % e)
        return 2
    print("M,N,K,measured_again,graph_timed,within_tolerance,new_best_ratio")
    for (m, n, k), again, timed, within, lower in rows:
        print("%d,%d,%d,%d,%d,%d,%s" % (m, n, k, again, timed, within, "" if lower is None else "%.4f" % lower))
    print("# %d shapes: %d cells measured again, %d graph-timed, %d within %.1f%% of the earlier best, "
          "%d shapes with a new best" % (len(rows), totals[0], totals[1], totals[2], 100 * args.tolerance, totals[3]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
