"""The plan the driver hands to the harness (JSON lines, one cell per line) and the result line the
harness streams back per cell. Pure Python."""

import json
from dataclasses import dataclass


class PlanError(Exception):
    """A plan line that cannot be used; the message names the file, line and field."""


#: Plan fields: name -> expected Python type.
INT_FIELDS = ("M", "N", "K", "kernelId", "splitK", "BLOCK_SIZE", "MPerBLOCK", "NPerBLOCK", "KPerBLOCK",
              "pipeline", "recheck")
STR_FIELDS = ("kernelName",)


@dataclass(frozen=True)
class Cell:
    """One measurement to make: an instance with a split-K level on one shape."""

    m: int
    n: int
    k: int
    kernel_id: int
    split_k: int
    kernel_name: str
    block_size: int
    m_per_block: int
    n_per_block: int
    k_per_block: int
    pipeline: int
    recheck: int

    def shape(self):
        return (self.m, self.n, self.k)

    def to_json(self):
        return json.dumps({
            "M": self.m, "N": self.n, "K": self.k, "kernelId": self.kernel_id, "splitK": self.split_k,
            "kernelName": self.kernel_name, "BLOCK_SIZE": self.block_size, "MPerBLOCK": self.m_per_block,
            "NPerBLOCK": self.n_per_block, "KPerBLOCK": self.k_per_block, "pipeline": self.pipeline,
            "recheck": self.recheck,
        })


def parse_cell(text, where):
    """Parses one plan line; ``where`` ("file:line") prefixes every error."""
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise PlanError("%s: not valid JSON (%s)" % (where, e))
    if not isinstance(obj, dict):
        raise PlanError("%s: expected a JSON object, got %s" % (where, type(obj).__name__))
    vals = {}
    for f in INT_FIELDS:
        if f not in obj:
            raise PlanError("%s: missing field %r" % (where, f))
        v = obj[f]
        if isinstance(v, bool) or not isinstance(v, int):
            raise PlanError("%s: field %r must be an integer, got %r" % (where, f, v))
        vals[f] = v
    for f in STR_FIELDS:
        if not isinstance(obj.get(f), str) or not obj[f]:
            raise PlanError("%s: field %r must be a non-empty string, got %r" % (where, f, obj.get(f)))
        vals[f] = obj[f]
    for f in ("M", "N", "K", "BLOCK_SIZE", "MPerBLOCK", "NPerBLOCK", "KPerBLOCK"):
        if vals[f] <= 0:
            raise PlanError("%s: field %r must be positive, got %d" % (where, f, vals[f]))
    if not 0 <= vals["splitK"] <= 8:
        raise PlanError("%s: field 'splitK' must be in 0..8, got %d" % (where, vals["splitK"]))
    if vals["recheck"] not in (0, 1):
        raise PlanError("%s: field 'recheck' must be 0 or 1, got %d" % (where, vals["recheck"]))
    return Cell(vals["M"], vals["N"], vals["K"], vals["kernelId"], vals["splitK"], vals["kernelName"],
                vals["BLOCK_SIZE"], vals["MPerBLOCK"], vals["NPerBLOCK"], vals["KPerBLOCK"], vals["pipeline"],
                vals["recheck"])


def read_plan(path):
    """All cells of a plan file, in file order (blank lines skipped)."""
    cells = []
    with open(path, "r", encoding="utf-8") as f:
        for i, line in enumerate(f, start=1):
            if line.strip():
                cells.append(parse_cell(line, "%s:%d" % (path, i)))
    return cells


def group_by_shape(cells):
    """Consecutive runs of cells with the same (M, N, K, recheck): one buffer allocation each."""
    groups = []
    for c in cells:
        key = (c.m, c.n, c.k, c.recheck)
        if groups and groups[-1][0] == key:
            groups[-1][1].append(c)
        else:
            groups.append((key, [c]))
    return groups


def result_line(cell, device, status, timing=None, err_ratio=None, tflops=None, bw=None, method="", wall_s=0.0):
    """The JSON line streamed back for one finished cell (AITER column names plus extras)."""
    row = {
        "gfx": device["gfx"], "cu_num": device["cu_num"], "M": cell.m, "N": cell.n, "K": cell.k,
        "libtype": "ck", "kernelId": cell.kernel_id, "splitK": cell.split_k, "kernelName": cell.kernel_name,
        "us": None, "tflops": tflops, "bw": bw, "errRatio": err_ratio,
        "us_min": None, "us_max": None, "us_p10": None, "us_p90": None, "reps": 0,
        "status": status, "recheck": cell.recheck, "device": device["name"], "backend": device["backend"],
        "timing": method, "wall_s": round(wall_s, 4),
    }
    if timing:
        row.update(timing)
    return json.dumps(row)
