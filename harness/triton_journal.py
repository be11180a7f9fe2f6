"""Harness result lines (JSON, plain or .gz) -> one journal CSV in the columns `synth` reads.

    python3 harness/triton_journal.py measurements/h200/triton-deepseek/deepseek.jsonl.gz --out deepseek.csv

Rows are the harness's own (``blockscale_bench.py`` prints one JSON object per cell). A cell (M, N, K,
kernelId, splitK, recheck) measured in several inputs keeps its last graph- or event-timed row, inputs read
in the order given. Screened cells (``timing`` "estimate") are not latencies: they are left out and counted
on stderr (the journal reader refuses them). Rows of two devices are an error: one journal is one device.
Failed cells (``status`` "fail:...") are kept, with empty times, so a rule never picks them.

``--configs FILE`` (``kept.txt``'s format) keeps only the rows of the configs it names, so a journal measured
with an earlier set still gives a journal of the set in use; the rows left out are counted on stderr, and a
config of the file without a row in the inputs is an error (a rule over the journal could never pick it).
"""
import argparse
import csv
import os
import sys

import triton_plan

COLUMNS = ("gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio,"
           "device,backend,timing,us_min,us_max,us_p10,us_p90,reps,status,recheck").split(",")
TIMES = ("us", "tflops", "bw", "errRatio", "us_min", "us_max", "us_p10", "us_p90")


def read_rows(paths, configs=None):
    """(rows by cell key in first-seen order, screened rows left out, rows of other configs left out).

    ``configs``: the config names to keep (None: every config)."""
    cells, screened, other, device = {}, 0, 0, None
    for path in paths:
        for lineno, r in triton_plan.result_lines(path):
            where = "%s:%d" % (path, lineno)
            try:
                key = (int(r["M"]), int(r["N"]), int(r["K"]), int(r["kernelId"]), int(r.get("splitK", 0)),
                       int(r.get("recheck", 0)))
                status = str(r["status"])
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError("%s: not a harness result line (%s)" % (where, e))
            if configs is not None and r.get("kernelName") not in configs:
                other += 1
                continue
            if r.get("timing") == "estimate":
                screened += 1
                continue
            dev = r.get("device", "")
            if device is None:
                device = dev
            elif dev != device:
                raise ValueError("%s: device %r, but earlier rows are %r: one journal holds one device"
                                 % (where, dev, device))
            if status != "ok" and not status.startswith("fail:"):
                raise ValueError("%s: status %r is neither ok nor fail:<reason>" % (where, status))
            cells[key] = r
    return cells, screened, other


def to_record(r):
    out = []
    failed = r["status"].startswith("fail:")
    for c in COLUMNS:
        v = r.get(c, "")
        if c == "libtype" and not v:
            v = "ck"
        if failed and c in TIMES:
            v = ""
        if c == "reps" and failed:
            v = r.get("reps", 0) or 0
        if c in ("splitK", "recheck") and v == "":
            v = 0
        out.append(v)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("inputs", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--configs", help="file of config names to keep, one a line (# comments): kept.txt's format")
    a = p.parse_args(argv)
    try:
        configs = None
        if a.configs:
            configs = {c.name() for c in triton_plan.read_configs(a.configs)}
            if not configs:
                raise ValueError("%s names no config" % a.configs)
        cells, screened, other = read_rows(a.inputs, configs)
        if configs is not None:
            seen = {r.get("kernelName") for r in cells.values()}
            absent = sorted(configs - seen)
            if absent:
                raise ValueError("%s names %s, which no row of the inputs measured" % (a.configs, ", ".join(absent)))
    except (OSError, ValueError) as e:
        sys.stderr.write("error: %s\n" % e)
        return 2
    tmp = a.out + ".partial"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(COLUMNS)
        for r in cells.values():
            w.writerow(to_record(r))
    os.replace(tmp, a.out)
    sys.stderr.write("# %d cells written to %s; %d screened rows left out (timing \"estimate\")%s\n"
                     % (len(cells), a.out, screened,
                        "; %d rows of configs not in %s left out" % (other, a.configs) if configs else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
