"""Measures plan cells on the GPU: inputs, fp32 reference, correctness ratio, cold-L2 graph timing."""

import gc
import math
import sys
import time

import torch

from . import config, stats, triton_config, triton_kernel
from .env import EXIT_DEVICE_LOST, EnvError
from .kernel import launch
from .plan import TritonCell, group_by_shape, result_line

#: Torch device of every buffer ("cuda" also on ROCm builds).
DEVICE = "cuda"


class Options:
    """Timing knobs (defaults are the dataset's)."""

    def __init__(self, mapping, budget_us=4000.0, min_reps=20, max_reps=100, min_replay_us=100.0,
                 use_graph=True, seed=1234, l2_factor=3, compile_jobs=1, slow_cutoff=0.0, slow_reps=5):
        self.mapping = mapping
        self.budget_us = budget_us
        self.min_reps = min_reps
        self.max_reps = max_reps
        self.min_replay_us = min_replay_us
        self.use_graph = use_graph
        self.seed = seed
        self.l2_factor = l2_factor
        self.compile_jobs = compile_jobs
        # A cell whose warm-up estimate exceeds slow_cutoff times the best median measured so far on the
        # same shape is timed with slow_reps repetitions (cutoff 0 = off): it cannot be near the best, and
        # at large shapes the slow corners of a config space would otherwise take most of the run. With
        # slow_reps 0 such a cell keeps its two warm-up launches as its times (timing "estimate"): a
        # screening figure, good for "more than cutoff x the best" and nothing finer.
        self.slow_cutoff = slow_cutoff
        self.slow_reps = slow_reps


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def classify(exc):
    """Short failure reason for a status "fail:<reason>"."""
    name = type(exc).__name__
    msg = str(exc).lower()
    if "outofresources" in name.lower() or "out of resource" in msg:
        return "out-of-resources"
    if isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in msg:
        return "oom"
    if "compil" in name.lower() or "compil" in msg[:200]:
        return "compile"
    return "launch"


def _random_fp8(shape, fp8, gen):
    """Random values in +-[0.25, 2) (never zero), rounded to fp8."""
    mag = torch.rand(shape, device=DEVICE, generator=gen) * 1.75 + 0.25
    sign = torch.randint(0, 2, shape, device=DEVICE, generator=gen) * 2 - 1
    return (mag * sign).to(fp8)


def _random_scales(shape, gen):
    return torch.rand(shape, device=DEVICE, generator=gen) * 1.0 + 0.5


def make_inputs(m, n, k, fp8, gen):
    x = _random_fp8((m, k), fp8, gen)
    w = _random_fp8((n, k), fp8, gen)
    xs = _random_scales((m, k // config.SCALE_K), gen)
    ws = _random_scales((config.cdiv(n, config.SCALE_N), k // config.SCALE_K), gen)
    return x, w, xs, ws


def reference(x, w, xs, ws):
    """Dequantized fp32 product on the GPU with TF32 off."""
    m, k = x.shape
    n = w.shape[0]
    xd = x.float() * xs.repeat_interleave(config.SCALE_K, dim=1)[:, :k]
    wsd = ws.repeat_interleave(config.SCALE_N, dim=0)[:n].repeat_interleave(config.SCALE_K, dim=1)[:, :k]
    wd = w.float() * wsd
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return xd @ wd.t()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def gpu_err_ratio(out, ref):
    bad = (~torch.isclose(out.float(), ref, rtol=stats.RTOL, atol=stats.ATOL)).sum().item()
    return bad / out.numel()


class ShapeContext:
    """Buffer sets for one shape: set 0 holds fresh random data, the others copies of it; each set has
    its own bf16 output (and fp32 workspace when split-K cells follow)."""

    def __init__(self, m, n, k, fp8, n_sets, with_workspace, gen):
        self.m, self.n, self.k = m, n, k
        self.best_us = None  # lowest median measured on this shape so far
        x, w, xs, ws = make_inputs(m, n, k, fp8, gen)
        self.ref = reference(x, w, xs, ws)
        self.sets = []
        for i in range(n_sets):
            if i > 0:
                x, w, xs, ws = x.clone(), w.clone(), xs.clone(), ws.clone()
            out = torch.empty((m, n), device=DEVICE, dtype=torch.bfloat16)
            work = torch.empty((m, n), device=DEVICE, dtype=torch.float32) if with_workspace else None
            self.sets.append((x, w, xs, ws, out, work))


def make_op(cell, cfg, bufset):
    """The timed operation of a cell on one buffer set (split-K: zero + atomics + cast)."""
    x, w, xs, ws, out, work = bufset
    if isinstance(cell, TritonCell):
        def op_triton():
            triton_kernel.launch(x, w, xs, ws, out, cfg)
        return op_triton
    if cell.split_k == 0:
        groups = cell.k // config.SCALE_K

        def op():
            launch(x, w, xs, ws, out, cfg, groups, 1, False)
        return op
    ranges = config.split_ranges(cell.k, cfg.block_k, cell.split_k)
    gps = ranges[0][1] - ranges[0][0]
    n_splits = len(ranges)

    def op_split():
        work.zero_()
        launch(x, w, xs, ws, work, cfg, gps, n_splits, True)
        out.copy_(work)
    return op_split


def _event():
    return torch.cuda.Event(enable_timing=True)


def _queue_ahead(us):
    """Keeps the GPU busy for about ``us`` microseconds so the host can enqueue the timed replays ahead
    of the device: otherwise host-side enqueue gaps would land between a start event and its replay."""
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is not None:
        sleep(int(us * 2000))  # cycles at ~2 GHz


def time_graph(ops, opts, best_us=None):
    """Per-launch times (us) from replays of a CUDA/HIP graph cycling through the buffer sets. With
    ``best_us`` and ``opts.slow_cutoff``, a cell estimated slower than cutoff x best gets slow_reps."""
    n_sets = len(ops)
    # Untimed first launches: the first call of a variant on new arguments does host work (argument
    # binding, module load) that can outlast any queued-ahead sleep, and then lands between the events.
    for i in range(min(n_sets, 2)):
        ops[i]()
    torch.cuda.synchronize()
    marks = [_event() for _ in range(3)]
    _queue_ahead(1000.0)  # both launches enqueued before the GPU reaches them: device time, no host gaps
    marks[0].record()
    for i in range(2):
        ops[i % n_sets]()
        marks[i + 1].record()
    torch.cuda.synchronize()
    warm = [max(marks[i].elapsed_time(marks[i + 1]) * 1e3, 1e-3) for i in range(2)]
    t_est = max(sum(warm) / 2, 1.0)
    if opts.slow_reps == 0 and stats.screened(warm, best_us, opts.slow_cutoff):
        return warm, "estimate"
    per_replay = n_sets * max(1, math.ceil(opts.min_replay_us / (t_est * n_sets)))
    per_replay = min(per_replay, max(n_sets, 256))
    e0, e1 = marks[0], marks[1]
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(per_replay):
            ops[i % n_sets]()
    e0.record()
    graph.replay()
    e1.record()
    torch.cuda.synchronize()
    t_replay = max(e0.elapsed_time(e1) * 1e3, 1.0)
    reps = int(opts.budget_us / t_replay)
    reps = max(opts.min_reps, min(opts.max_reps, reps))
    if stats.screened(warm, best_us, opts.slow_cutoff):
        reps = min(reps, opts.slow_reps)
    starts = [_event() for _ in range(reps)]
    ends = [_event() for _ in range(reps)]
    _queue_ahead(reps * 25.0)
    for i in range(reps):
        starts[i].record()
        graph.replay()
        ends[i].record()
    torch.cuda.synchronize()
    times = [starts[i].elapsed_time(ends[i]) * 1e3 / per_replay for i in range(reps)]
    del graph
    return times, "graph"


def time_events(ops, opts, flush):
    """Fallback: one launch per repetition between events, an L2-sized buffer rewritten before each."""
    n_sets = len(ops)
    for i in range(2):
        ops[i % n_sets]()
    torch.cuda.synchronize()
    reps = opts.min_reps * 2
    starts = [_event() for _ in range(reps)]
    ends = [_event() for _ in range(reps)]
    for i in range(reps):
        flush.zero_()
        starts[i].record()
        ops[i % n_sets]()
        ends[i].record()
    torch.cuda.synchronize()
    return [starts[i].elapsed_time(ends[i]) * 1e3 for i in range(reps)]


def check_device():
    """Raises EnvError(EXIT_DEVICE_LOST) when the device no longer answers after a failure."""
    try:
        torch.cuda.synchronize()
    except Exception as e:
        raise EnvError(EXIT_DEVICE_LOST, "the GPU stopped working after a failed launch: %s" % e)


def variant_key(cell, cfg):
    """Identity of one compiled kernel variant: a triton config with its M specialization class, or a CK
    launch config with or without the split-K atomics."""
    if isinstance(cell, TritonCell):
        return ("triton", cfg.key(), triton_config.variant_classes(cell.m, cell.n, cell.k))
    return ("ck", cfg.key(), cell.split_k > 0)


def compile_variant(key, cfg, fp8, gen):
    """Compiles (and runs once) one variant on a tiny problem of its specialization class."""
    n, k = 256, 1024
    if key[0] == "triton":
        m, n, k = triton_config.tiny_shape(key[2])
        x, w, xs, ws = make_inputs(m, n, k, fp8, gen)
        out = torch.empty((m, n), device=DEVICE, dtype=torch.bfloat16)
        triton_kernel.launch(x, w, xs, ws, out, cfg)
    else:
        atomic = key[2]
        x, w, xs, ws = make_inputs(16, n, k, fp8, gen)
        out = torch.empty((16, n), device=DEVICE, dtype=torch.float32 if atomic else torch.bfloat16)
        if atomic:
            out.zero_()
        launch(x, w, xs, ws, out, cfg, k // config.SCALE_K, 1, atomic)
    torch.cuda.synchronize()


class Runner:
    def __init__(self, device, opts):
        self.device = device
        self.opts = opts
        self.fp8 = getattr(torch, device["fp8"])
        self.gen = torch.Generator(device=DEVICE)
        self.gen.manual_seed(opts.seed)
        self.compile_failures = {}
        self.flush = None
        self.graph_ok = opts.use_graph

    def config_of(self, cell):
        if isinstance(cell, TritonCell):
            return cell.config
        return config.launch_config(cell.m_per_block, cell.n_per_block, cell.k_per_block, cell.block_size,
                                    cell.pipeline, self.opts.mapping)

    def precompile(self, cells, warm_cache=None):
        """Compiles every kernel variant of the plan once on a tiny problem; returns the seconds spent.
        Failures are remembered and their cells fail without launching. With ``compile_jobs > 1`` and a
        ``warm_cache(keys, jobs, fp8_name)`` (``compile_pool.warm_cache``, handed in by the entry point so
        this module does not import the pool that imports it) the variants are first compiled by that many
        worker processes into Triton's on-disk cache, so the pass here only loads them."""
        t0 = time.time()
        specs = []
        seen = set()
        for c in cells:
            try:
                cfg = self.config_of(c)
            except ValueError:
                continue
            key = variant_key(c, cfg)
            if key not in seen:
                seen.add(key)
                specs.append((key, cfg))
        if warm_cache is not None and self.opts.compile_jobs > 1 and len(specs) > 1:
            warm_cache([s[0] for s in specs], self.opts.compile_jobs, self.device["fp8"])
            log("# %d variants compiled by %d workers in %.1f s" % (len(specs), self.opts.compile_jobs,
                                                                   time.time() - t0))
        for key, cfg in specs:
            try:
                compile_variant(key, cfg, self.fp8, self.gen)
            except Exception as e:
                reason = classify(e)
                if reason == "launch":
                    reason = "compile"
                self.compile_failures[key] = reason
                log("compile failure %s: %s: %s" % (key, type(e).__name__, str(e)[:300]))
                check_device()
        dt = time.time() - t0
        log("# precompiled %d variants in %.1f s (%d failed)" % (len(specs), dt, len(self.compile_failures)))
        # Every graph capture runs a full garbage collection (torch.cuda.graph does); with a thousand
        # compiled kernels alive that costs a quarter of a second per cell. What exists now lives until
        # the end anyway, so it is moved out of the collector's sight.
        gc.collect()
        gc.freeze()
        return dt

    def measure(self, cell, ctx):
        """Result JSON line of one cell."""
        t0 = time.time()
        dev = self.device

        def fail(reason, err=None):
            return result_line(cell, dev, "fail:" + reason, err_ratio=err, wall_s=time.time() - t0)

        try:
            cfg = self.config_of(cell)
        except ValueError as e:
            log("cell %s: %s" % (cell.to_json(), e))
            return fail("unsupported-params")
        if cell.k % config.SCALE_K != 0:
            return fail("k-not-multiple-of-128")
        reason = self.compile_failures.get(variant_key(cell, cfg))
        if reason:
            return fail(reason)
        ops = [make_op(cell, cfg, s) for s in ctx.sets]
        try:
            out0 = ctx.sets[0][4]
            out0.fill_(float("nan"))
            ops[0]()
            torch.cuda.synchronize()
            err = gpu_err_ratio(out0, ctx.ref)
        except Exception as e:
            log("cell M=%d N=%d K=%d id=%d sk=%d: %s: %s" % (cell.m, cell.n, cell.k, cell.kernel_id, cell.split_k,
                                                            type(e).__name__, str(e)[:300]))
            check_device()
            return fail(classify(e))
        if err > stats.MAX_ERR_RATIO:
            return fail("errRatio", err)
        try:
            if self.graph_ok:
                try:
                    times, method = time_graph(ops, self.opts, ctx.best_us)
                except Exception as e:
                    # Only a failure of the runtime (capture unsupported, a driver error) falls back to
                    # events; anything else is a defect here and stops the run instead of changing the
                    # timing method of every cell that follows.
                    if classify(e) == "oom" or not isinstance(e, RuntimeError):
                        raise
                    log("graph capture/replay failed (%s: %s); falling back to events with an L2 flush"
                        % (type(e).__name__, str(e)[:200]))
                    check_device()
                    self.graph_ok = False
            if not self.graph_ok:
                if self.flush is None:
                    self.flush = torch.empty(2 * dev["l2_bytes"], device=DEVICE, dtype=torch.int8)
                times = time_events(ops, self.opts, self.flush)
                method = "events+flush"
        except Exception as e:
            log("timing M=%d N=%d K=%d id=%d sk=%d: %s: %s" % (cell.m, cell.n, cell.k, cell.kernel_id, cell.split_k,
                                                              type(e).__name__, str(e)[:300]))
            check_device()
            return fail(classify(e), err)
        summary = stats.summarize(times)
        us = summary["us"]
        if method != "estimate" and (ctx.best_us is None or us < ctx.best_us):
            ctx.best_us = us
        return result_line(cell, dev, "ok", timing=summary, err_ratio=err,
                           tflops=stats.tflops(cell.m, cell.n, cell.k, us),
                           bw=stats.gbps(config.moved_bytes(cell.m, cell.n, cell.k), us),
                           method=method, wall_s=time.time() - t0)

    def run(self, cells, emit):
        """Measures all cells, calling ``emit(line)`` as each finishes; returns the number measured."""
        done = 0
        t_start = time.time()
        for (m, n, k, _recheck), group in group_by_shape(cells):
            need_ws = any(c.split_k > 0 for c in group)
            n_sets = config.buffer_sets(m, n, k, need_ws, self.device["l2_bytes"], self.opts.l2_factor)
            ctx = None
            try:
                ctx = ShapeContext(m, n, k, self.fp8, n_sets, need_ws, self.gen)
            except Exception as e:
                log("shape M=%d N=%d K=%d: cannot allocate %d buffer sets: %s" % (m, n, k, n_sets, e))
                check_device()
                for c in group:
                    emit(result_line(c, self.device, "fail:" + classify(e)))
                    done += 1
                torch.cuda.empty_cache()
                continue
            for c in group:
                emit(self.measure(c, ctx))
                done += 1
            del ctx
            torch.cuda.empty_cache()
            log("# %d/%d cells, %.1f s" % (done, len(cells), time.time() - t_start))
        return done
