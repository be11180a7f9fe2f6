"""Parallel compilation: worker processes compile kernel variants into Triton's on-disk cache.

Triton compiles one variant at a time per process (most of it in the CPU-bound backend), so a plan of a
thousand configs pays minutes serially. Each worker takes every ``jobs``-th variant, compiles it by running
it once on a tiny problem, and exits; the measuring process then finds the binaries in the cache. Errors in
a worker are left for the measuring process to meet again and record (the cache holds no failures).
"""

import multiprocessing
import os
import sys


def _config_of(key):
    if key[0] == "triton":
        from .triton_config import TritonConfig
        return TritonConfig(*key[1])
    from .config import LaunchConfig
    return LaunchConfig(*key[1])


def _worker(args):
    keys, fp8_name, seed = args
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    import torch

    from . import runner
    fp8 = getattr(torch, fp8_name)
    gen = torch.Generator(device=runner.DEVICE)
    gen.manual_seed(seed)
    failed = 0
    for key in keys:
        try:
            runner.compile_variant(key, _config_of(key), fp8, gen)
        except Exception:
            failed += 1
            try:
                torch.cuda.synchronize()
            except Exception:
                return failed  # the context is gone; the measuring process recompiles what is left
    return failed


def warm_cache(keys, jobs, fp8_name, seed=1):
    """Compiles ``keys`` (variant keys of :func:`runner.variant_key`) in ``jobs`` processes."""
    jobs = max(1, min(jobs, len(keys)))
    shares = [(keys[i::jobs], fp8_name, seed + i) for i in range(jobs)]
    ctx = multiprocessing.get_context("spawn")
    try:
        with ctx.Pool(jobs) as pool:
            failed = sum(pool.map(_worker, shares))
    except Exception as e:  # a worker that cannot start leaves the work to the serial pass
        sys.stderr.write("# parallel compile stopped (%s: %s); compiling the rest serially\n" % (type(e).__name__, e))
        return
    sys.stderr.write("# parallel compile: %d variants, %d failed in the workers\n" % (len(keys), failed))
