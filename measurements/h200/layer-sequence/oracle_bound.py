"""What the per-GEMM journals allow a layer sequence: the sum over a layer's GEMMs of the union oracle
(best ok cell of any backend in the journals, any split) against the sum of vendor alone, per M.

    python3 measurements/h200/layer-sequence/oracle_bound.py harness/layers/qwen3-32b-tp2.csv \
        measurements/h200/qwen3-32b-tp2.csv measurements/h200/vendor-qwen3-32b-tp2.csv

A policy that picks per GEMM from these candidates cannot make the sequence faster than vendor alone by
more than this ratio, up to what one CUDA graph of the whole layer changes against GEMMs timed one by one.
First measurements only (rechecks left out); journals may be gzip-compressed.
"""
import csv
import gzip
import math
import sys

M_SET = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]


def journal_rows(path):
    with (gzip.open(path, "rt", newline="") if path.endswith(".gz") else open(path, newline="")) as f:
        for r in csv.DictReader(f):
            if r["status"] == "ok" and r.get("recheck", "0") in ("0", ""):
                yield r


def read_inputs(layers_csv, journals):
    """[(name, N, K)] of the layer, and {(M, N, K): {libtype: best us}} of the journals."""
    with open(layers_csv, newline="") as f:
        try:
            layers = [(r["name"], int(r["N"]), int(r["K"]))
                      for r in csv.DictReader(l for l in f if not l.startswith("#"))]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError("%s: not a layer list (columns name, N, K as integers): %s" % (layers_csv, e))
    if not layers:
        raise ValueError("%s: no GEMM rows (columns name,N,K)" % layers_csv)
    best = {}
    for path in journals:
        try:
            for r in journal_rows(path):
                key = (int(r["M"]), int(r["N"]), int(r["K"]))
                lib, us = r["libtype"], float(r["us"])
                cell = best.setdefault(key, {})
                cell[lib] = min(us, cell.get(lib, math.inf))
        except (KeyError, ValueError) as e:
            raise ValueError("%s: not a journal (columns M, N, K, libtype, us, status): %s" % (path, e))
    return layers, best


def main(argv):
    if len(argv) < 3:
        sys.stderr.write("usage: oracle_bound.py LAYERS_CSV JOURNAL...\n")
        return 2
    try:
        layers, best = read_inputs(argv[1], argv[2:])
    except (OSError, KeyError, ValueError) as e:
        sys.stderr.write("oracle_bound.py: %s\n" % e)
        return 2
    ratios = []
    print("%6s %12s %12s %8s" % ("M", "vendor us", "oracle us", "ratio"))
    for m in M_SET:
        cells = [best.get((m, n, k), {}) for _, n, k in layers]
        if not all("vendor" in c for c in cells):
            missing = [name for (name, _, _), c in zip(layers, cells) if "vendor" not in c]
            print("%6d  no vendor row for %s" % (m, ", ".join(missing)))
            continue
        v = sum(c["vendor"] for c in cells)
        o = sum(min(c.values()) for c in cells)
        ratios.append(v / o)
        print("%6d %12.1f %12.1f %8.3f" % (m, v, o, v / o))
    if not ratios:
        sys.stderr.write("no M with a vendor row for every GEMM of the layer\n")
        return 1
    print("geomean vendor / oracle over %d M: %.3f" % (len(ratios), math.exp(sum(map(math.log, ratios)) / len(ratios))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
