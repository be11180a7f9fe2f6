#!/usr/bin/env python3
"""Writes a measurement plan of block-FP8 Triton configs x shapes, leaving out cells already measured.

    python3 harness/triton_plan.py --shapes sample.csv --configs space --done results.jsonl --out plan.jsonl

``--shapes``: a CSV with columns N, K, M (more columns are ignored), one shape per row, in measuring order.
``--configs``: ``space`` (the tuner's 1280 configs), or a file of config names, one per line (``#`` comments).
``--done``: result files (the harness's JSON lines) whose cells are left out, so a plan can be written again
after a run stopped and the rerun measures only the rest. Each shape's rechecks (a deterministic
``--recheck-fraction`` of its configs, chosen by a hash of the cell) follow the shape. Pure Python.
"""

import argparse
import csv
import gzip
import hashlib
import json
import os
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bsbench import triton_config  # noqa: E402
from bsbench.plan import triton_cell  # noqa: E402


def read_shapes(path):
    out = []
    with open(path, newline="", encoding="utf-8") as f:
        for i, row in enumerate(csv.DictReader(f), start=2):
            try:
                n, k, m = int(row["N"]), int(row["K"]), int(row["M"])
            except (KeyError, TypeError, ValueError):
                raise ValueError("%s:%d: need integer columns N, K, M, got %r" % (path, i, row))
            if min(n, k, m) <= 0 or k % triton_config.SCALE_K:
                raise ValueError("%s:%d: shape N=%d K=%d M=%d: sizes must be positive and K a multiple of %d"
                                 % (path, i, n, k, m, triton_config.SCALE_K))
            out.append((m, n, k))
    return out


def read_configs(spec):
    if spec == "space":
        return triton_config.tuner_space()
    out = []
    with open(spec, encoding="utf-8") as f:
        for i, line in enumerate(f, start=1):
            text = line.split("#", 1)[0].strip()
            if text:
                try:
                    out.append(triton_config.parse_name(text))
                except ValueError as e:
                    raise ValueError("%s:%d: %s" % (spec, i, e))
    return out


def open_text(path):
    """A journal, plain or gzip-compressed (``.gz``), as text."""
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def result_lines(path, strict=False):
    """(line number, object) of each harness result line of a journal (plain or ``.gz``).

    A last line cut off by a stopped run (no newline at its end, not a whole JSON object) is skipped: its
    cell is planned again. Other lines that are not JSON objects are skipped too, unless ``strict``: then
    each is an error (ValueError) naming the file and line, blank lines aside, and the skipped cut-off last
    line is noted on stderr. Text that is not UTF-8 (but in a cut-off last line) and a gzip file cut short or
    corrupt are errors naming the file."""
    opener = gzip.open if path.endswith(".gz") else open
    lineno = 0
    try:
        with opener(path, "rb") as f:
            for raw in f:
                lineno += 1
                # a result line without its newline: only the last line can be, cut off by a stopped run
                cut = not raw.endswith(b"\n") and raw.lstrip().startswith(b"{")
                try:
                    line = raw.decode("utf-8").strip()
                except UnicodeDecodeError as e:
                    if cut:
                        line = None
                    else:
                        raise ValueError("%s:%d: not UTF-8 text (byte %d of the line: %s)"
                                         % (path, lineno, e.start + 1, e.reason))
                if line is not None:
                    if not line or not (strict or line.startswith("{")):
                        continue
                    try:
                        r = json.loads(line)
                    except ValueError as e:
                        r = e
                    except RecursionError:
                        r = ValueError("JSON nested too deep")
                    if isinstance(r, dict):
                        yield lineno, r
                        continue
                if cut:
                    if strict:
                        sys.stderr.write("# %s:%d: the last line is cut off (no newline at its end: a stopped run), "
                                         "skipped\n" % (path, lineno))
                elif strict:
                    why = r if isinstance(r, ValueError) else "a JSON %s, not an object" % type(r).__name__
                    raise ValueError("%s:%d: not a harness result line (%s)" % (path, lineno, why))
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise ValueError("%s: not a whole gzip file: cut short or corrupt %s (%s)"
                         % (path, "after line %d" % lineno if lineno else "at its start", e))


def done_keys(paths, redo_estimates=False):
    """Cells already in the journals ``paths``; with ``redo_estimates``, a screened cell (``timing``
    "estimate") does not count as done, so it is measured again."""
    keys = set()
    for path in paths:
        for _, r in result_lines(path):
            if redo_estimates and r.get("timing") == "estimate":
                continue
            try:
                keys.add((r["M"], r["N"], r["K"], r["kernelId"], r["recheck"]))
            except KeyError:
                continue
    return keys


def is_recheck(m, n, k, cfg, fraction):
    """Deterministic choice of the cells measured twice: a hash of the cell below the fraction."""
    if fraction <= 0:
        return False
    h = hashlib.sha256(("%d,%d,%d,%s" % (m, n, k, cfg.name())).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2.0 ** 64 < fraction


def prior_key(m, n, cfg):
    """Sort key putting first the configs likely to be near a shape's best: the M tile nearest M (16 to 128),
    the N tile 128 (64 when N is small), BLOCK_SIZE_K 128, 3 stages, 4 warps. It changes no measurement,
    only the order, so that ``--slow-cutoff`` meets a good median early on every shape."""
    want_bm = min(max(1 << max(m - 1, 0).bit_length(), 16), 128)
    want_bn = 64 if n <= 2048 else 128
    return (abs(cfg.block_m.bit_length() - want_bm.bit_length()), abs(cfg.block_n.bit_length() - want_bn.bit_length()),
            cfg.block_k != 128, abs(cfg.num_stages - 3), cfg.num_warps != 4, cfg.group_m != 32)


def plan_cells(shapes, configs, done, recheck_fraction, one_class=False, prior=False):
    """Cells of every (shape, config) not in ``done``, shape by shape, each shape's rechecks after it.

    With ``one_class``, only the shapes whose integer specialization classes
    (:func:`triton_config.variant_classes`) equal those of the first shape with cells left: every class
    compiles every config once more (minutes for the whole space), so a run bounded in time measures one
    class at a time."""
    if one_class:
        for m, n, k in shapes:
            if plan_cells([(m, n, k)], configs, done, recheck_fraction):
                want = triton_config.variant_classes(m, n, k)
                shapes = [s for s in shapes if triton_config.variant_classes(*s) == want]
                break
    cells = []
    for m, n, k in shapes:
        rechecks = []
        for cfg in sorted(configs, key=lambda c: prior_key(m, n, c)) if prior else configs:
            c = triton_cell(m, n, k, cfg)
            if (m, n, k, c.kernel_id, 0) not in done:
                cells.append(c)
            if is_recheck(m, n, k, cfg, recheck_fraction) and (m, n, k, c.kernel_id, 1) not in done:
                rechecks.append(triton_cell(m, n, k, cfg, recheck=1))
        cells.extend(rechecks)
    return cells


def check_out(out, inputs, what):
    """Refuses, before anything is read or written, an --out that cannot be replaced by a written file
    (`what`: the kind of file it names, for the message) or that is one of `inputs`."""
    if not out or os.path.isdir(out) or (os.path.exists(out) and not os.path.isfile(out)):
        raise ValueError("--out %s: not a regular file (a directory or a device): name the %s to write" % (out, what))
    parent = os.path.dirname(out) or "."
    if not os.path.isdir(parent):
        raise ValueError("--out %s: the directory %s does not exist" % (out, parent))
    for path in inputs:
        if os.path.exists(out) and os.path.exists(path) and os.path.samefile(out, path):
            raise ValueError("--out %s is the input %s: the output would replace it" % (out, path))


def write_whole(out, suffix, write, newline=None):
    """Writes `out` whole or not at all: `write(f)` fills `out + suffix`, which is then renamed over `out`;
    on any error (an interrupt too) the temporary file is removed. Returns None, or the error message of an
    OSError (anything else is raised again)."""
    tmp, made = out + suffix, False
    try:
        with open(tmp, "w", newline=newline, encoding="utf-8") as f:
            made = True
            write(f)
        os.replace(tmp, out)
    except BaseException as e:
        if made and os.path.lexists(tmp):
            os.remove(tmp)
        if not isinstance(e, OSError):
            raise
        return "cannot write %s: %s" % (out, e)
    return None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", required=True)
    p.add_argument("--configs", default="space")
    p.add_argument("--done", nargs="*", default=[])
    p.add_argument("--recheck-fraction", type=float, default=0.02)
    p.add_argument("--one-class", action="store_true",
                   help="only the shapes sharing the integer specialization classes of the first shape with cells "
                        "left (each class compiles every config once more)")
    p.add_argument("--order", choices=["given", "prior"], default="given",
                   help="configs per shape in the given order, or likely-good first (see prior_key)")
    p.add_argument("--done-rescreen", nargs="*", default=[],
                   help="journals whose measured cells are done but whose screened cells (timing \"estimate\") "
                        "are planned again (screens taken before the harness launched each cell untimed first)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    try:
        shapes = read_shapes(args.shapes)
        configs = read_configs(args.configs)
        done = done_keys([d for d in args.done if os.path.exists(d)])
        done |= done_keys([d for d in args.done_rescreen if os.path.exists(d)], redo_estimates=True)
    except (OSError, ValueError) as e:
        sys.stderr.write("error: %s\n" % e)
        return 2
    cells = plan_cells(shapes, configs, done, args.recheck_fraction, args.one_class, args.order == "prior")
    with open(args.out, "w", encoding="utf-8") as f:
        for c in cells:
            f.write(c.to_json() + "\n")
    sys.stderr.write("# plan: %d cells (%d shapes x %d configs, %d already measured)\n"
                     % (len(cells), len(shapes), len(configs), len(done)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
