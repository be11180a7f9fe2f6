#!/usr/bin/env python3
"""Calibration run for the harness, one GPU session:

1. the warps/stages mapping: every legacy instance on a few shapes under each candidate mapping
   (compile time per mapping, geomean latency, best TFLOP/s at M=4096 N=K=5120);
2. correctness of every instance at every split-K level 0..5 (forced) on odd shapes, with the winner;
3. timing noise: the mapping sweep's cells of the winner measured again;
4. the wall time of a sample of the dataset grid, per shape, for extrapolating the full grid.

Writes JSON lines to --out (one per cell, tagged with the phase) and a summary on stdout.
"""

import argparse
import csv
import json
import math
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bsbench import config, env  # noqa: E402
from bsbench.plan import Cell  # noqa: E402


def load_instances(path):
    out = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["role"] != "candidate":
                continue
            out.append(dict(id=int(row["kernelId"]), name=row["kernelName"], bs=int(row["BLOCK_SIZE"]),
                            bm=int(row["MPerBLOCK"]), bn=int(row["NPerBLOCK"]), bk=int(row["KPerBLOCK"]),
                            pipe=int(row["PIPELINE_VERSION"])))
    return out


def cells_for(insts, shapes, splits_fn, recheck=0):
    cells = []
    for (m, n, k) in shapes:
        for i in insts:
            for s in splits_fn(m, n, k, i):
                cells.append(Cell(m, n, k, i["id"], s, i["name"], i["bs"], i["bm"], i["bn"], i["bk"], i["pipe"], recheck))
    return cells


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--instances", default=os.path.join(os.path.dirname(__file__), "..", "ck-instances",
                                                       "ck_a8w8_blockscale_instances.csv"))
    p.add_argument("--out", required=True)
    p.add_argument("--mappings", default="64:2:3,64:3:4,32:2:3,32:3:4")
    p.add_argument("--sample-m", default="1,16,128,512,2048,8192,16384")
    args = p.parse_args()
    torch = env.import_torch()
    triton = env.import_triton()
    device = env.detect(torch)
    from bsbench import runner
    print("# device", json.dumps(device), "torch", torch.__version__, "triton", triton.__version__, flush=True)
    insts = load_instances(args.instances)
    out = open(args.out, "w")
    rows = []

    def run(phase, mapping_text, cells):
        opts = runner.Options(config.parse_mapping(mapping_text))
        r = runner.Runner(device, opts)
        t0 = time.time()
        ct = r.precompile(cells)
        got = []

        def emit(line):
            d = json.loads(line)
            d["phase"] = phase
            d["mapping"] = mapping_text
            got.append(d)
            out.write(json.dumps(d) + "\n")
            out.flush()
        r.run(cells, emit)
        rows.extend(got)
        return got, ct, time.time() - t0

    # 1. mapping sweep
    sweep_shapes = [(16, 5120, 5120), (256, 5120, 5120), (4096, 5120, 5120), (2048, 25600, 5120)]
    sweep_cells = cells_for(insts, sweep_shapes, lambda m, n, k, i: [0])
    results = {}
    for mt in args.mappings.split(","):
        try:
            got, ct, wall = run("sweep", mt, sweep_cells)
        except Exception:
            traceback.print_exc()
            continue
        results[mt] = got
        ok = [g for g in got if g["status"] == "ok"]
        best = max((g["tflops"] for g in ok if g["M"] == 4096 and g["N"] == 5120), default=0)
        print("mapping %s: compile %.1f s, wall %.1f s, ok %d/%d, best TFLOP/s @4096x5120x5120 = %.0f"
              % (mt, ct, wall, len(ok), len(got), best), flush=True)
    keys = None
    for mt, got in results.items():
        k = {(g["M"], g["N"], g["K"], g["kernelId"]) for g in got if g["status"] == "ok"}
        keys = k if keys is None else keys & k
    scores = {}
    for mt, got in results.items():
        us = [g["us"] for g in got if (g["M"], g["N"], g["K"], g["kernelId"]) in keys]
        scores[mt] = math.exp(sum(math.log(u) for u in us) / len(us)) if us else float("inf")
        best_per_shape = []
        for s in sweep_shapes:
            b = min((g["us"] for g in got if g["status"] == "ok" and (g["M"], g["N"], g["K"]) == s), default=float("nan"))
            best_per_shape.append(b)
        print("mapping %s: geomean us over %d common cells = %.2f; best us per shape %s"
              % (mt, len(us), scores[mt], ["%.1f" % b for b in best_per_shape]), flush=True)
    winner = min(scores, key=scores.get)
    print("WINNER", winner, flush=True)
    for g in results[winner]:
        print("  %-5d %-5d %-5d id=%-2d us=%9.2f tflops=%6.1f err=%s %s" % (
            g["M"], g["N"], g["K"], g["kernelId"], g["us"] or -1, g["tflops"] or 0, g["errRatio"], g["status"]))

    try:
        phases_after_sweep(run, insts, device, winner, sweep_cells, results, args)
    except Exception:
        traceback.print_exc()
    out.close()


def phases_after_sweep(run, insts, device, winner, sweep_cells, results, args):
    # 2. correctness with every split level forced
    corr_shapes = [(1, 5120, 4096), (37, 5120, 12800), (200, 25600, 5120)]
    got, ct, wall = run("correct", winner, cells_for(insts, corr_shapes, lambda m, n, k, i: [0, 1, 2, 3, 4, 5]))
    bad = [g for g in got if g["status"] != "ok"]
    print("correctness: %d cells, %d not ok, max errRatio %.4g, wall %.1f s" % (
        len(got), len(bad), max((g["errRatio"] or 0) for g in got), wall), flush=True)
    for g in bad:
        print("  BAD", json.dumps(g))

    # 3. noise: the winner's sweep again
    got, ct, wall = run("noise", winner, sweep_cells)
    first = {(g["M"], g["N"], g["K"], g["kernelId"]): g["us"] for g in results[winner] if g["status"] == "ok"}
    rel = sorted(abs(g["us"] - first[k]) / first[k] for g in got if g["status"] == "ok"
                 for k in [(g["M"], g["N"], g["K"], g["kernelId"])] if k in first)
    if rel:
        print("noise: median rel diff %.4f, p90 %.4f over %d cells" % (rel[len(rel) // 2], rel[int(len(rel) * 0.9)], len(rel)))

    # 4. grid sample for extrapolation (split-K by the rule)
    layers = [(5120, 5120), (5120, 4096), (25600, 5120), (5120, 12800)]
    ms = [int(x) for x in args.sample_m.split(",")]
    cu = device["cu_num"]
    total = 0.0
    for (n, k) in layers:
        for m in ms:
            cells = cells_for(insts, [(m, n, k)],
                              lambda m, n, k, i: config.split_levels(m, n, k, i["bm"], i["bn"], i["bk"], cu))
            got, ct, wall = run("sample", winner, cells)
            total += wall
            print("sample M=%-6d N=%-6d K=%-6d cells=%3d wall=%6.2f s  (%.1f ms/cell) best=%.1f us"
                  % (m, n, k, len(cells), wall, wall * 1e3 / len(cells),
                     min((g["us"] for g in got if g["status"] == "ok"), default=-1)), flush=True)
    print("sample total %.1f s" % total)


if __name__ == "__main__":
    main()
