"""Harness result lines (JSON, plain or .gz) -> one journal CSV in the columns `synth` reads.

    python3 harness/triton_journal.py measurements/h200/triton-deepseek/deepseek.jsonl.gz --out deepseek.csv

Rows are the harness's own (``blockscale_bench.py`` prints one JSON object per cell). A cell (M, N, K,
kernelId, splitK, recheck) measured in several inputs keeps its last graph- or event-timed row, inputs read
in the order given. Screened cells (``timing`` "estimate") are not latencies: they are left out and counted
on stderr (the journal reader refuses them). Rows of two devices are an error: one journal is one device.
Failed cells (``status`` "fail:...") are kept, with empty times, so a rule never picks them.

Every line is checked and the first bad one is an error naming its file and line: a line that is no JSON
object (only a last line cut off by a stopped run, without its newline, is skipped, with a note on stderr),
text that is not UTF-8, a gzip file cut short, or a field the journal reader would refuse (M, N, K not
positive integers, an ok row's ``us`` not a finite positive time, ``errRatio`` outside [0, 1], ...).
``--out`` is written whole or not at all (a directory, or one in a directory that does not exist, is
refused before any input is read).

``--configs FILE`` (``kept.txt``'s format) keeps only the rows of the configs it names, so a journal measured
with an earlier set still gives a journal of the set in use; the rows left out are counted on stderr, and a
config of the file without a row in the inputs is an error (a rule over the journal could never pick it).
"""
import argparse
import csv
import json
import os
import sys

import triton_plan

COLUMNS = ("gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio,"
           "device,backend,timing,us_min,us_max,us_p10,us_p90,reps,status,recheck").split(",")
TIMES = ("us", "tflops", "bw", "errRatio", "us_min", "us_max", "us_p10", "us_p90")


# What the journal reader (crates/core/src/table/aiter_csv.rs) accepts: sizes and cu_num positive u32, kernelId an i32,
# splitK 0..=16, a kernel time (us) within US_RANGE, errRatio a share in [0, 1], other times non-negative.
U32_MAX = 2 ** 32 - 1
I32_RANGE = (-2 ** 31, 2 ** 31 - 1)
MAX_SPLIT_K = 16
US_RANGE = (1e-6, 1e12)


def check_row(r, where):
    """The cell key (M, N, K, kernelId, splitK, recheck) of the harness result line ``r`` after checking each
    field the journal takes from it; ValueError naming ``where`` (file:line) and the field otherwise."""
    def bad(col, want):
        return ValueError("%s: %s = %s: expected %s" % (where, col, json.dumps(r[col]), want))

    def need(col):
        if col not in r:
            raise ValueError("%s: not a harness result line (no %s)" % (where, col))
        return r[col]

    def integer(col, lo, hi, want):
        v = need(col)
        if type(v) is not int or not lo <= v <= hi:
            raise bad(col, want)
        return v

    def number(col, lo, hi, want, optional=False):
        v = r.get(col) if optional else need(col)
        if v is None and optional:
            return
        if type(v) not in (int, float) or not lo <= v <= hi:  # NaN compares false; hi is finite
            raise bad(col, want)

    m, n, k = (integer(c, 1, U32_MAX, "a positive integer") for c in ("M", "N", "K"))
    integer("cu_num", 1, U32_MAX, "a positive integer")
    kernel_id = integer("kernelId", I32_RANGE[0], I32_RANGE[1], "a 32-bit integer")
    split_k = integer("splitK", 0, MAX_SPLIT_K, "an integer 0..%d" % MAX_SPLIT_K) if "splitK" in r else 0
    recheck = integer("recheck", 0, 1, "0 or 1") if "recheck" in r else 0
    for col in ("gfx", "kernelName", "status"):
        if not isinstance(need(col), str) or not r[col].strip():
            raise bad(col, "a non-empty string")
    for col in ("libtype", "device", "backend", "timing"):
        if col in r and not isinstance(r[col], str):
            raise bad(col, "a string")
    status = r["status"]
    if status != "ok" and not (status.startswith("fail:") and status[5:].strip()):
        raise ValueError("%s: status %r is neither ok nor fail:<reason>" % (where, status))
    if status == "ok":
        number("us", US_RANGE[0], US_RANGE[1], "a kernel time in microseconds, finite and in %g..%g" % US_RANGE)
        number("errRatio", 0, 1, "a finite share of elements in [0, 1]")
        for col in ("tflops", "bw", "us_min", "us_max", "us_p10", "us_p90"):
            number(col, 0, sys.float_info.max, "a finite non-negative number", optional=True)
        if r.get("reps") is not None:
            integer("reps", 1, U32_MAX, "a positive integer (0 only in a failed row)")
    elif r.get("reps") is not None:
        integer("reps", 0, U32_MAX, "a non-negative integer")
    return m, n, k, kernel_id, split_k, recheck


def read_rows(paths, configs=None):
    """(rows by cell key in first-seen order, screened rows left out, rows of other configs left out).

    ``configs``: the config names to keep (None: every config). Every row is checked (:func:`check_row`);
    a line that is no JSON object is an error, but for a last line cut off by a stopped run (skipped, with a
    note on stderr)."""
    cells, screened, other, device = {}, 0, 0, None
    for path in paths:
        for lineno, r in triton_plan.result_lines(path, strict=True):
            where = "%s:%d" % (path, lineno)
            key = check_row(r, where)
            if configs is not None and r["kernelName"] not in configs:
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
        triton_plan.check_out(a.out, a.inputs + ([a.configs] if a.configs else []), "journal CSV")
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
    def write(f):
        w = csv.writer(f, lineterminator="\n")
        w.writerow(COLUMNS)
        for r in cells.values():
            w.writerow(to_record(r))
    # Written whole, then renamed over --out; the partial file is removed on any error.
    error = triton_plan.write_whole(a.out, ".partial", write, newline="")
    if error:
        sys.stderr.write("error: %s\n" % error)
        return 2
    sys.stderr.write("# %d cells written to %s; %d screened rows left out (timing \"estimate\")%s\n"
                     % (len(cells), a.out, screened,
                        "; %d rows of configs not in %s left out" % (other, a.configs) if configs else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
