#!/usr/bin/env python3
"""Parity of the harness's block-FP8 Triton kernel with a reference kernel at equal meta-parameters.

    python3 harness/triton_parity.py --reference PATH/ref.py --out parity.jsonl

``--reference`` is a Python file defining ``launch(A, B, As, Bs, C, config)`` (the runtime's kernel and its
call, e.g. vLLM's ``_w8a8_triton_block_scaled_mm``); it is a yardstick and is not part of the harness.
Variants timed on every shape, on the same buffers and with the harness's timing (cold L2, CUDA graphs):

* ``reference`` and ``triton`` (this harness's kernel) at each config of --configs;
* at the first config, four more that locate a gap: ``triton-nomask`` (K loads unmasked),
  ``triton-nospec-m`` (M not specialized, as the CK-geometry kernel has it), ``triton-const-groups``
  (scale-group sizes and unit strides as compile-time constants, as the CK-geometry kernel has them) and
  ``ck-geometry`` (the harness's CK-geometry kernel of the same tile, warps and stages, whose
  GROUP_SIZE_M is 8).

Every variant is checked against the fp32 reference product first. Rounds repeat the whole sweep in a
rotated variant order, so the spread between rounds is the noise. One JSON line per timing to --out;
a summary (geomean ratio of each variant to ``reference``) on stdout.
"""

import argparse
import importlib.util
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from bsbench import config, env, stats, triton_config, triton_kernel  # noqa: E402

#: Qwen3-32B TP=2 layers (qkv, o, gate_up, down) as (N, K).
QWEN3_32B_TP2 = ((5120, 5120), (5120, 4096), (25600, 5120), (5120, 12800))
DEFAULT_CONFIGS = ("triton_bm64_bn128_bk128_g8_w4_s3", "triton_bm64_bn128_bk128_g32_w4_s2",
                   "triton_bm16_bn64_bk128_g1_w4_s4", "triton_bm128_bn128_bk64_g16_w8_s3")


@triton.jit
def _ablation_const_groups(
    a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr, M, N, K,
    stride_am, stride_bn, stride_cm, stride_as_m, stride_bs_n,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr, GROUP_N: tl.constexpr, GROUP_K: tl.constexpr,
):
    """Ablation only: the harness kernel's loop with the scale-group sizes and the unit strides known at
    compile time (as the CK-geometry kernel has them) instead of runtime arguments."""
    pid = tl.program_id(axis=0)
    tiles_m = tl.cdiv(M, BLOCK_SIZE_M)
    tiles_n = tl.cdiv(N, BLOCK_SIZE_N)
    per_group = GROUP_SIZE_M * tiles_n
    first_m = (pid // per_group) * GROUP_SIZE_M
    rows_here = min(tiles_m - first_m, GROUP_SIZE_M)
    tile_m = first_m + (pid % rows_here)
    tile_n = (pid % per_group) // rows_here
    rows = (tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    cols = (tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    ks = tl.arange(0, BLOCK_SIZE_K)
    a_tile = a_ptr + rows[:, None] * stride_am + ks[None, :]
    b_tile = b_ptr + ks[:, None] + cols[None, :] * stride_bn
    a_scale = as_ptr + rows * stride_as_m
    b_scale = bs_ptr + (cols // GROUP_N) * stride_bs_n
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for step in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        left = K - step * BLOCK_SIZE_K
        a = tl.load(a_tile, mask=ks[None, :] < left, other=0.0)
        b = tl.load(b_tile, mask=ks[:, None] < left, other=0.0)
        group = (step * BLOCK_SIZE_K) // GROUP_K
        sa = tl.load(a_scale + group)
        sb = tl.load(b_scale + group)
        acc += tl.dot(a, b) * sa[:, None] * sb[None, :]
        a_tile += BLOCK_SIZE_K
        b_tile += BLOCK_SIZE_K
    out_rows = tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    out_cols = tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_tile = c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :]
    tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=(out_rows[:, None] < M) & (out_cols[None, :] < N))


def launch_const_groups(a, b, a_s, b_s, c, cfg):
    m, k = a.shape
    n = b.shape[0]
    grid = (triton.cdiv(m, cfg.block_m) * triton.cdiv(n, cfg.block_n),)
    _ablation_const_groups[grid](
        a, b, c, a_s, b_s, m, n, k, a.stride(0), b.stride(0), c.stride(0), a_s.stride(0), b_s.stride(0),
        BLOCK_SIZE_M=cfg.block_m, BLOCK_SIZE_N=cfg.block_n, BLOCK_SIZE_K=cfg.block_k,
        GROUP_SIZE_M=cfg.group_m, GROUP_N=128, GROUP_K=128,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages)


def load_reference(path):
    spec = importlib.util.spec_from_file_location("parity_reference", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def variants(ref, cfgs):
    """(name, config name, launch(x, w, xs, ws, out)) for every timed variant."""
    from bsbench.kernel import launch as ck_launch
    nospec = triton.jit(do_not_specialize=["M"])(triton_kernel._block_fp8_mm.fn)
    out = []
    for i, cfg in enumerate(cfgs):
        d = cfg.runtime_dict()
        out.append(("reference", cfg.name(), lambda x, w, xs, ws, o, d=d: ref.launch(x, w, xs, ws, o, d)))
        out.append(("triton", cfg.name(), lambda x, w, xs, ws, o, c=cfg: triton_kernel.launch(x, w, xs, ws, o, c)))
        if i == 0:
            out.append(("triton-nomask", cfg.name(),
                        lambda x, w, xs, ws, o, c=cfg: triton_kernel.launch(x, w, xs, ws, o, c, mask_k=False)))
            out.append(("triton-nospec-m", cfg.name(),
                        lambda x, w, xs, ws, o, c=cfg: triton_kernel.launch(x, w, xs, ws, o, c, kernel=nospec)))
            out.append(("triton-const-groups", cfg.name(),
                        lambda x, w, xs, ws, o, c=cfg: launch_const_groups(x, w, xs, ws, o, c)))
            lc = config.LaunchConfig(cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_warps, cfg.num_stages)
            out.append(("ck-geometry", cfg.name(),
                        lambda x, w, xs, ws, o, lc=lc: ck_launch(x, w, xs, ws, o, lc, x.shape[1] // 128, 1, False)))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reference", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--configs", default=",".join(DEFAULT_CONFIGS))
    p.add_argument("--m", default="1,256,4096", help="M values (comma-separated)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--variants", default="", help="only these variant names (comma-separated)")
    args = p.parse_args(argv)
    cfgs = [triton_config.parse_name(c) for c in args.configs.split(",")]
    ms = [int(m) for m in args.m.split(",")]
    torch = env.import_torch()
    env.import_triton()
    device = env.detect(torch)
    from bsbench import runner
    ref = load_reference(args.reference)
    fp8 = getattr(torch, device["fp8"])
    gen = torch.Generator(device=runner.DEVICE)
    gen.manual_seed(11)
    opts = runner.Options(None)
    vs = variants(ref, cfgs)
    if args.variants:
        keep = set(args.variants.split(","))
        vs = [v for v in vs if v[0] in keep]
    rows = []
    with open(args.out, "w") as f:
        for (n, k) in QWEN3_32B_TP2:
            for m in ms:
                n_sets = config.buffer_sets(m, n, k, False, device["l2_bytes"])
                ctx = runner.ShapeContext(m, n, k, fp8, n_sets, False, gen)
                errs = {}
                for name, cname, fn in vs:
                    x, w, xs, ws, o, _ = ctx.sets[0]
                    o.fill_(float("nan"))
                    fn(x, w, xs, ws, o)
                    torch.cuda.synchronize()
                    errs[(name, cname)] = runner.gpu_err_ratio(o, ctx.ref)
                for rnd in range(args.rounds):
                    order = vs[rnd % len(vs):] + vs[:rnd % len(vs)] if rnd % 2 == 0 else list(reversed(vs))
                    for name, cname, fn in order:
                        ops = [(lambda s=s, fn=fn: fn(s[0], s[1], s[2], s[3], s[4])) for s in ctx.sets]
                        t = stats.summarize(runner.time_graph(ops, opts)[0])
                        row = dict(M=m, N=n, K=k, variant=name, config=cname, round=rnd,
                                   errRatio=errs[(name, cname)], **t)
                        rows.append(row)
                        f.write(json.dumps(row) + "\n")
                        f.flush()
                del ctx
                torch.cuda.empty_cache()
    summarize(rows)
    return 0


def summarize(rows):
    """Geomean over shapes of (variant median / reference median) per config, and the round-to-round spread."""
    by = {}
    for r in rows:
        by.setdefault((r["variant"], r["config"], r["M"], r["N"], r["K"]), []).append(r["us"])
    med = {key: sorted(v)[len(v) // 2] if len(v) % 2 else sum(sorted(v)[len(v) // 2 - 1:len(v) // 2 + 1]) / 2
           for key, v in by.items()}
    spread = [abs(v[0] - v[1]) / min(v[0], v[1]) for v in by.values() if len(v) >= 2]
    print("round-to-round |a-b|/min: median %.4f, max %.4f over %d cells" % (
        sorted(spread)[len(spread) // 2] if spread else float("nan"), max(spread) if spread else float("nan"),
        len(spread)))
    keys = sorted({(k[0], k[1]) for k in med})
    for variant, cname in keys:
        ratios, per_m = [], {}
        for (v, c, m, n, k), us in med.items():
            if v != variant or c != cname:
                continue
            refc = cname
            ref = med.get(("reference", refc, m, n, k))
            if ref:
                ratios.append(us / ref)
                per_m.setdefault(m, []).append(us / ref)
        if not ratios:
            continue
        g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        pm = " ".join("M=%d %.3f" % (m, math.exp(sum(math.log(x) for x in v) / len(v))) for m, v in sorted(per_m.items()))
        print("%-16s %-36s time/reference geomean %.4f (min %.3f max %.3f)  %s" % (
            variant, cname, g, min(ratios), max(ratios), pm))


if __name__ == "__main__":
    sys.exit(main())
