#!/usr/bin/env python3
"""Reference measurement: the vendor library's own block-scaled FP8 GEMM on every shape of a plan.

On CUDA this is cuBLAS through ``torch._scaled_mm`` with 1x128 activation scales and 128x128 weight scales
(the DeepSeek recipe); the same tensors, correctness check and cold-L2 graph timing as the CK-geometry
harness. Their ``libtype`` is ``vendor``: a yardstick for the harness (how far its best instance is from the
vendor's best), and a candidate of a selection rule where ``--backends`` names ``vendor``.

    python3 harness/vendor_reference.py --plan plan.jsonl --out vendor.csv

The plan is the one ``synth bench --plan-only`` writes; each distinct (M, N, K) without ``recheck`` is
measured once. cuBLAS takes M in multiples of 4 only; elsewhere (M = 1, 2, 6, ...) the GEMM runs as vLLM's
torch._scaled_mm backend runs it, on activations padded to the next multiple of 4 rows, the two copies
inside the timed call (``bsbench.vendor.vendor_gemm``). Shapes the library rejects get ``status``
``fail:unsupported``; a shape no scale layout computes right on gets ``fail:errRatio``. Any other error
stops the run with its traceback. The CSV is written whole or not at all: a run stopped early leaves its
rows in ``OUT.part`` and no ``OUT``.
"""

import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bsbench import config, env, stats  # noqa: E402
from bsbench.plan import PlanError, read_plan  # noqa: E402
from bsbench.vendor import LIBRARY_ERRORS, find_layout, vendor_gemm  # noqa: E402

#: Column order of the output (AITER's columns, then the harness's extras).
COLUMNS = ["gfx", "cu_num", "M", "N", "K", "libtype", "kernelId", "splitK", "us", "kernelName", "tflops", "bw",
           "errRatio", "device", "backend", "timing", "us_min", "us_max", "us_p10", "us_p90", "reps", "status",
           "recheck"]
#: Name recorded for the vendor kernel.
KERNEL_NAME = "vendor_scaled_mm_blockwise_1x128_128x128"


def measure_shape(torch, runner, ctx, layout, opts, log):
    """(status, errRatio, timing summary (with ``timing``, the method) or None, layout) of the vendor GEMM
    on one shape.

    ``layout`` is the one found on an earlier shape of the same (N, K) (None: search now); a shape it
    computes wrong on, or that the library refuses with it, is searched again, so one shape's layout never
    decides another's correctness or support (torch's checks of the weight-scale tensor depend on K: a
    layout taken at K = 7168 is refused at K = 2304). The library refusing the shape with every layout
    (one of ``LIBRARY_ERRORS``, e.g. at M = 1) is ``fail:unsupported``; any other exception is a bug of
    this script and propagates."""
    kept = layout
    if layout is None:
        layout = find_layout(torch, runner, ctx, log)
        if layout is None:
            return "fail:unsupported", None, None, None

    def run_checked(name):
        gemms = [vendor_gemm(torch, bufset, name) for bufset in ctx.sets]
        ops = [op for op, _ in gemms]
        result0 = gemms[0][1]
        result0.fill_(float("nan"))
        ops[0]()
        torch.cuda.synchronize()
        return ops, runner.gpu_err_ratio(result0, ctx.ref)

    def search_again(why):
        log("# layout %s %s at M=%d N=%d K=%d: searching again" % (layout, why, ctx.m, ctx.n, ctx.k))
        return find_layout(torch, runner, ctx, log)

    try:
        try:
            ops, err = run_checked(layout)
        except LIBRARY_ERRORS as e:
            if kept is None:
                raise
            torch.cuda.synchronize()
            first_line = (str(e).splitlines() or [""])[0][:120]
            again = search_again("is refused (%s)" % first_line if first_line else "is refused")
            if again is None:
                return "fail:unsupported", None, None, layout
            layout = again
            ops, err = run_checked(layout)
        if err > stats.MAX_ERR_RATIO:
            again = search_again("computes a wrong product")
            if again is None:
                return "fail:errRatio", err, None, layout
            layout = again
            ops, err = run_checked(layout)
            if err > stats.MAX_ERR_RATIO:
                return "fail:errRatio", err, None, layout
        times, method = runner.time_graph(ops, opts)
    except LIBRARY_ERRORS as e:
        log("# M=%d N=%d K=%d: %s: %s" % (ctx.m, ctx.n, ctx.k, type(e).__name__, str(e)[:200]))
        torch.cuda.synchronize()
        return "fail:unsupported", None, None, layout
    return "ok", err, dict(stats.summarize(times), timing=method), layout


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--plan", required=True, help="plan file (JSON lines) from `synth bench --plan-only`")
    p.add_argument("--out", required=True, help="CSV to write")
    p.add_argument("--seed", type=int, default=1234)
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        cells = read_plan(args.plan)
    except (PlanError, OSError) as e:
        sys.stderr.write("error: %s\n" % e)
        return env.EXIT_USAGE
    try:
        torch = env.import_torch()
        env.import_triton()
        device = env.detect(torch)
    except env.EnvError as e:
        sys.stderr.write("error: %s\n" % e)
        return e.code
    from bsbench import runner
    shapes = []
    for c in cells:
        if c.recheck == 0 and c.shape() not in shapes:
            shapes.append(c.shape())
    fp8 = getattr(torch, device["fp8"])
    gen = torch.Generator(device=runner.DEVICE)
    gen.manual_seed(args.seed)
    opts = runner.Options(config.parse_mapping(config.DEFAULT_MAPPING_TEXT))
    layouts = {}  # (N, K) -> the scale layout found on its first shape the library ran
    # Written whole or not at all: rows go to OUT.part (flushed as they come, so a stopped run shows how far
    # it got), renamed to OUT once every shape is measured.
    part = args.out + ".part"
    with open(part, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for i, (m, n, k) in enumerate(shapes):
            n_sets = config.buffer_sets(m, n, k, False, device["l2_bytes"], opts.l2_factor)
            ctx = runner.ShapeContext(m, n, k, fp8, n_sets, False, gen)
            status, err, summary, layout = measure_shape(torch, runner, ctx, layouts.get((n, k)), opts,
                                                         lambda msg: sys.stderr.write(msg + "\n"))
            if layout is not None:
                layouts[(n, k)] = layout
            us = summary["us"] if summary else None
            row = {
                "gfx": device["gfx"], "cu_num": device["cu_num"], "M": m, "N": n, "K": k, "libtype": "vendor",
                "kernelId": 0, "splitK": 0, "us": us, "kernelName": KERNEL_NAME,
                "tflops": stats.tflops(m, n, k, us) if us else None,
                "bw": stats.gbps(config.moved_bytes(m, n, k), us) if us else None,
                "errRatio": err, "device": device["name"], "backend": device["backend"],
                "timing": summary["timing"] if summary else "", "reps": summary["reps"] if summary else 0,
                "status": status, "recheck": 0,
            }
            for key in ("us_min", "us_max", "us_p10", "us_p90"):
                row[key] = summary[key] if summary else None
            w.writerow(["" if row[c] is None else row[c] for c in COLUMNS])
            f.flush()
            del ctx
            torch.cuda.empty_cache()
            if (i + 1) % 50 == 0:
                sys.stderr.write("# vendor %d/%d shapes\n" % (i + 1, len(shapes)))
    os.replace(part, args.out)
    sys.stderr.write("# vendor reference: %d shapes -> %s\n" % (len(shapes), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
