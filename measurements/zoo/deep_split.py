#!/usr/bin/env python3
"""What split-K levels deeper than 3 buy on the `--split-k aiter` journal: per (N, K), the best time with
levels up to 3 over the best with every measured level (geomean and max over M), and the M values where a
level above 3 is the fastest. Standard library only; reads the journal plain or gzip-compressed.

    python3 measurements/zoo/deep_split.py measurements/zoo/zoo-splitk-aiter.csv.gz
"""

import csv
import gzip
import math
import sys
from collections import defaultdict


def open_journal(path):
    """A journal CSV as text, plain or gzip-compressed (told by its first bytes, whatever its name)."""
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt", newline="") if gz else open(path, newline="")


def best_times(rows):
    """{(N, K, M): {splitK: lowest us}} over the measured (status ok, not recheck) rows."""
    best = defaultdict(dict)
    for r in rows:
        if r["status"] != "ok" or r["recheck"] != "0":
            continue
        key = (int(r["N"]), int(r["K"]), int(r["M"]))
        s, us = int(r["splitK"]), float(r["us"])
        best[key][s] = min(best[key].get(s, math.inf), us)
    return best


def summary(best, cap=3):
    """[(N, K, geomean ratio, max ratio, M of that max, [M where a level above cap wins])] by (N, K)."""
    by_nk = defaultdict(list)
    for (n, k, m), levels in best.items():
        shallow = [us for s, us in levels.items() if s <= cap]
        if not shallow:
            continue
        winner = min(levels, key=levels.get)
        by_nk[(n, k)].append((m, min(shallow) / min(levels.values()), winner))
    out = []
    for (n, k), ms in sorted(by_nk.items()):
        ms.sort()
        geo = math.exp(sum(math.log(r) for _, r, _ in ms) / len(ms))
        top = max(ms, key=lambda x: x[1])
        out.append((n, k, geo, top[1], top[0], [m for m, _, w in ms if w > cap]))
    return out


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: deep_split.py JOURNAL[.gz]\n")
        return 2
    path = argv[1]
    try:
        with open_journal(path) as f:
            best = best_times(csv.DictReader(f))
    except (OSError, KeyError, ValueError) as e:
        sys.stderr.write("error: %s: %s\n" % (path, e))
        return 2
    print("N x K: best with levels <= 3 / best with every level (geomean over M; max, at M); M where a level > 3 wins")
    for n, k, geo, top, at, deeper in summary(best):
        where = ("%d-%d" % (deeper[0], deeper[-1])) if deeper else "none"
        print("%d x %d: %.3f; %.3f at M %d; %s" % (n, k, geo, top, at, where))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
