"""The plan the driver hands to the harness (JSON lines, one cell per line) and the result line the
harness streams back per cell. Pure Python."""

import json
from dataclasses import dataclass

from . import triton_config


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
    """Parses one plan line; ``where`` ("file:line") prefixes every error. A line with ``"libtype":
    "triton"`` is a :class:`TritonCell`; any other line (no libtype, or ``"ck"``) a CK :class:`Cell`."""
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise PlanError("%s: not valid JSON (%s)" % (where, e))
    if not isinstance(obj, dict):
        raise PlanError("%s: expected a JSON object, got %s" % (where, type(obj).__name__))
    lib = obj.get("libtype", "ck")
    if lib == "triton":
        return parse_triton_cell(obj, where)
    if lib != "ck":
        raise PlanError("%s: field 'libtype' must be \"ck\" or \"triton\", got %r" % (where, lib))
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


#: Integer fields of a triton plan line besides the shape.
TRITON_META = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")


@dataclass(frozen=True)
class TritonCell:
    """One measurement of the block-FP8 Triton kernel (libtype ``triton``) with one config on one shape."""

    m: int
    n: int
    k: int
    kernel_id: int
    kernel_name: str
    config: triton_config.TritonConfig
    recheck: int

    split_k = 0
    libtype = "triton"

    def shape(self):
        return (self.m, self.n, self.k)

    def to_json(self):
        row = {"libtype": "triton", "M": self.m, "N": self.n, "K": self.k, "kernelId": self.kernel_id,
               "splitK": 0, "kernelName": self.kernel_name}
        row.update(self.config.runtime_dict())
        row["recheck"] = self.recheck
        return json.dumps(row)


def triton_cell(m, n, k, cfg, recheck=0):
    return TritonCell(m, n, k, triton_config.kernel_id(cfg), cfg.name(), cfg, recheck)


def parse_triton_cell(obj, where):
    vals = {}
    for f in ("M", "N", "K", "kernelId", "recheck") + TRITON_META:
        v = obj.get(f)
        if isinstance(v, bool) or not isinstance(v, int):
            raise PlanError("%s: field %r must be an integer, got %r" % (where, f, v))
        vals[f] = v
    for f in ("M", "N", "K"):
        if vals[f] <= 0:
            raise PlanError("%s: field %r must be positive, got %d" % (where, f, vals[f]))
    if vals["recheck"] not in (0, 1):
        raise PlanError("%s: field 'recheck' must be 0 or 1, got %d" % (where, vals["recheck"]))
    if obj.get("splitK", 0) != 0:
        raise PlanError("%s: field 'splitK' must be 0 for a triton cell (the kernel has no split-K), got %r"
                        % (where, obj.get("splitK")))
    cfg = triton_config.TritonConfig(*(vals[f] for f in TRITON_META))
    try:
        cfg.validate()
    except ValueError as e:
        raise PlanError("%s: %s" % (where, e))
    name = obj.get("kernelName")
    if name != cfg.name():
        raise PlanError("%s: field 'kernelName' %r does not name the config of the line (%s)" % (where, name, cfg.name()))
    if vals["kernelId"] != triton_config.kernel_id(cfg):
        raise PlanError("%s: field 'kernelId' %d is not the id of %s (%d)"
                        % (where, vals["kernelId"], name, triton_config.kernel_id(cfg)))
    return TritonCell(vals["M"], vals["N"], vals["K"], vals["kernelId"], name, cfg, vals["recheck"])


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
        "libtype": getattr(cell, "libtype", "ck"), "kernelId": cell.kernel_id, "splitK": cell.split_k, "kernelName": cell.kernel_name,
        "us": None, "tflops": tflops, "bw": bw, "errRatio": err_ratio,
        "us_min": None, "us_max": None, "us_p10": None, "us_p90": None, "reps": 0,
        "status": status, "recheck": cell.recheck, "device": device["name"], "backend": device["backend"],
        "timing": method, "wall_s": round(wall_s, 4),
    }
    if timing:
        row.update(timing)
    return json.dumps(row)
