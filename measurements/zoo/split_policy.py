#!/usr/bin/env python3
"""Would a leaf that computes its split-K level from the grid carry across M better than a leaf with a fixed
level? A bound, per (N, K) layer: the best single leaf (one kernel, one split choice, used at every measured M
of the layer) as a geomean fraction of the per-shape oracle, once with the choices a rule leaf has today
(a fixed level, run unsplit where the grid condition refuses it) and once adding choices computed from the
shape:

    max      the deepest level the grid condition allows (the bench's `auto` plan: tiles * 2^(s-1) < CUs and
             K / KPerBLOCK >= 2^s, at most level 5)
    max-1    one level shallower
    fill     the shallowest allowed level whose tiles * 2^s reach the CU count (else the deepest allowed)
    fill-1   one level shallower

The gain in this bound is a first look, not a rule's gain (a rule with more leaves already separates
a layer's M ranges; only leave-one-model-out folds judge a feature). Standard library only;
journals plain or gzip-compressed; rows that are not `ok`, graph-timed measurements are left out.

    python3 measurements/zoo/split_policy.py measurements/zoo/*-tp1.csv.gz \
        $(ls measurements/h200/*-tp*.csv | grep -v vendor)
"""

import csv
import math
import os
import sys
from collections import defaultdict

from deep_split import open_journal  # the same directory

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "harness"))
from bsbench.config import output_tiles, split_levels  # noqa: E402  (the bench's grid condition)

MAX_LEVEL = 5


def tile_of(kernel_name):
    """(MPerBLOCK, NPerBLOCK, KPerBLOCK) of a CK blockscale instance name (its fourth `_` field is
    BlockSize x MPerBLOCK x NPerBLOCK x KPerBLOCK)."""
    dims = kernel_name.split("_")[3].split("x")
    if len(dims) != 4:
        raise ValueError("kernel name %r has no BlockSize x M x N x K tile field" % kernel_name)
    return int(dims[1]), int(dims[2]), int(dims[3])


def read_rows(rows, lat, tiles):
    """Adds measured rows to lat {(N, K, M): {(kernelId, splitK): lowest us}} and tiles {kernelId: tile};
    returns the set of (device, CU count) they name."""
    gpus = set()
    for r in rows:
        if r["status"] != "ok" or r.get("timing", "graph") != "graph" or r.get("libtype", "ck") != "ck":
            continue
        kid = int(r["kernelId"])
        tiles[kid] = tile_of(r["kernelName"])
        cell = lat[(int(r["N"]), int(r["K"]), int(r["M"]))]
        key = (kid, int(r["splitK"]))
        cell[key] = min(cell.get(key, math.inf), float(r["us"]))
        gpus.add((r.get("device", "?"), int(r["cu_num"])))
    return gpus


def allowed(m, n, k, tile, s, cus):
    """The bench's grid condition for split level s (level 0 always runs)."""
    return s in split_levels(m, n, k, *tile, cus, max_level=MAX_LEVEL)


def deepest(m, n, k, tile, cus):
    return split_levels(m, n, k, *tile, cus, max_level=MAX_LEVEL)[-1]


def fill(m, n, k, tile, cus):
    tiles, top, s = output_tiles(m, n, tile[0], tile[1]), deepest(m, n, k, tile, cus), 0
    while s < top and tiles * 2 ** s < cus:
        s += 1
    return s


def choices(cus):
    """{name: level(m, n, k, tile)}: the fixed levels, then the computed ones."""
    fixed = {"s%d" % s: (lambda s: lambda m, n, k, t: s if allowed(m, n, k, t, s, cus) else 0)(s)
             for s in range(MAX_LEVEL + 1)}
    computed = {
        "max": lambda m, n, k, t: deepest(m, n, k, t, cus),
        "max-1": lambda m, n, k, t: max(0, deepest(m, n, k, t, cus) - 1),
        "fill": lambda m, n, k, t: fill(m, n, k, t, cus),
        "fill-1": lambda m, n, k, t: max(0, fill(m, n, k, t, cus) - 1),
    }
    return fixed, computed


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def best_leaf(lat, tiles, shapes, family):
    """The best (geomean fraction of the oracle, kernelId, choice) of one leaf over the shapes of a layer;
    a leaf whose cell is unmeasured at some shape does not count."""
    best = (0.0, None, None)
    for kid, tile in sorted(tiles.items()):
        for name, level in family.items():
            fracs = []
            for n, k, m in shapes:
                us = lat[(n, k, m)].get((kid, level(m, n, k, tile)))
                if us is None:
                    break
                fracs.append(min(lat[(n, k, m)].values()) / us)
            else:
                best = max(best, (geomean(fracs), kid, name))
    return best


def summary(lat, tiles, cus):
    """[((N, K), best fixed-level leaf, best leaf with computed levels too)] by (N, K)."""
    fixed, computed = choices(cus)
    layers = defaultdict(list)
    for shape in lat:
        layers[shape[:2]].append(shape)
    return [(nk, best_leaf(lat, tiles, layers[nk], fixed), best_leaf(lat, tiles, layers[nk], {**fixed, **computed}))
            for nk in sorted(layers)]


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: split_policy.py JOURNAL[.gz] ...\n")
        return 2
    lat, tiles, gpus = defaultdict(dict), {}, set()
    for path in argv[1:]:
        try:
            with open_journal(path) as f:
                gpus |= read_rows(csv.DictReader(f), lat, tiles)
        except KeyError as e:
            sys.stderr.write("error: %s: no column %s; give a journal CSV as `synth bench` writes it\n" % (path, e))
            return 2
        except (OSError, ValueError, IndexError) as e:
            sys.stderr.write("error: %s: %s\n" % (path, e))
            return 2
    if not gpus:
        sys.stderr.write("error: no measured (ok, graph-timed) CK row in %s\n" % " ".join(argv[1:]))
        return 2
    if len(gpus) != 1:
        sys.stderr.write("error: the journals are of %d GPUs (%s); give journals of one\n"
                         % (len(gpus), ", ".join("%s, %d CUs" % g for g in sorted(gpus))))
        return 2
    rows = summary(lat, tiles, gpus.pop()[1])
    print("N x K: best single leaf, fraction of the oracle over the layer's M (fixed level | with computed levels)")
    for (n, k), f, c in rows:
        print("%d x %d: %.3f (#%d %s) | %.3f (#%d %s)" % (n, k, f[0], f[1], f[2], c[0], c[1], c[2]))
    fixed, both = [f[0] for _, f, _ in rows], [c[0] for _, _, c in rows]
    print("%d layers: geomean %.4f | %.4f; lowest %.3f | %.3f"
          % (len(rows), geomean(fixed), geomean(both), min(fixed), min(both)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
