"""Runs a decoder layer's GEMM sequence on the GPU under each policy's choices: inputs and references per
GEMM (``runner.ShapeContext``), a correctness check of every GEMM, and the whole sequence captured in one
CUDA graph and timed with ``runner.time_graph`` (cold L2 by rotating buffer sets of the whole layer).

Each GEMM runs as the bench runs it: a CK-geometry instance through ``runner.make_op`` (split-K: the fp32
workspace zeroed, the atomic partial sums, the cast to bf16, all inside the timed sequence), a triton config
through the block-FP8 Triton kernel, the vendor GEMM through ``torch._scaled_mm`` with 1x128 activation and
128x128 weight scales in the first layout that the library takes and that computes the right product
(``vendor.scale_layouts``), M padded to a multiple of 4 where it is not one (``vendor.vendor_gemm``).
"""

import gc
import time

import torch

from . import config, layer, runner, stats
from .plan import Cell, triton_cell
from .vendor import LIBRARY_ERRORS, find_layout, vendor_gemm


class GemmFailure(Exception):
    """A GEMM of the sequence that cannot run (status ``fail:<reason>``), with the errRatios before it."""

    def __init__(self, status, gemm, errs=()):
        Exception.__init__(self, "%s at %s" % (status, gemm))
        self.status, self.gemm, self.errs = status, gemm, list(errs)


def cell_and_config(choice, m, gemm, mapping):
    """The bench's cell and launch config of a CK or triton choice."""
    if choice.backend == "triton":
        return triton_cell(m, gemm.n, gemm.k, choice.triton), choice.triton
    i = choice.ck
    cell = Cell(m, gemm.n, gemm.k, choice.kernel_id, choice.split_k, choice.kernel_name, i.block_size,
                i.m_per_block, i.n_per_block, i.k_per_block, i.pipeline, 0)
    cfg = config.launch_config(i.m_per_block, i.n_per_block, i.k_per_block, i.block_size, i.pipeline, mapping)
    return cell, cfg


class LayerRunner:
    def __init__(self, device, opts, scale_layouts, log=runner.log):
        self.device = device
        self.opts = opts
        self.fp8 = getattr(torch, device["fp8"])
        self.gen = torch.Generator(device=runner.DEVICE)
        self.gen.manual_seed(opts.seed)
        self.scale_layouts = scale_layouts
        self.vendor_layouts = {}  # (N, K) -> the scale layout found right on that shape
        self.compile_failures = {}
        self.graph_ok = opts.use_graph
        self.flush = None
        self.log = log

    # -- compilation ------------------------------------------------------------------------------

    def variant_key(self, choice, m, gemm):
        if choice.backend == "vendor":
            return None
        cell, cfg = cell_and_config(choice, m, gemm, self.opts.mapping)
        return runner.variant_key(cell, cfg), cfg

    def precompile(self, gemms, planned, warm_cache=None):
        """Compiles every Triton variant the plan uses once (in ``compile_jobs`` workers first when given)."""
        t0 = time.time()
        specs = {}
        for (m, _label), choices in planned.items():
            for g, c in zip(gemms, choices):
                kc = self.variant_key(c, m, g)
                if kc is not None and kc[0] not in specs:
                    specs[kc[0]] = kc[1]
        if warm_cache is not None and self.opts.compile_jobs > 1 and len(specs) > 1:
            warm_cache(list(specs), self.opts.compile_jobs, self.device["fp8"])
        for key, cfg in specs.items():
            try:
                runner.compile_variant(key, cfg, self.fp8, self.gen)
            except Exception as e:
                self.compile_failures[key] = "compile"
                self.log("compile failure %s: %s: %s" % (key, type(e).__name__, str(e)[:300]))
                runner.check_device()
        self.log("# precompiled %d variants in %.1f s (%d failed)" % (len(specs), time.time() - t0,
                                                                      len(self.compile_failures)))
        gc.collect()
        gc.freeze()

    # -- one GEMM ---------------------------------------------------------------------------------

    def _vendor_op(self, bufset, layout):
        """The vendor GEMM as ``vendor_gemm`` runs it (M padded to a multiple of 4 where it is not one); the
        op carries the tensor its product is read from as ``result``."""
        op, result = vendor_gemm(torch, bufset, layout, self.scale_layouts)
        op.result = result
        return op

    def _find_vendor_layout(self, ctx):
        """The first scale layout the library takes and computes right with on this GEMM's shape. Kept per
        (N, K): a layout right on one shape can be silently wrong on another (cuBLAS reads the weight scales
        with a leading dimension padded to 4 K-blocks)."""
        return find_layout(torch, runner, ctx, self.log, self.scale_layouts, prefix="vendor ")

    def gemm_ops(self, choice, m, gemm, ctx):
        """One callable per buffer set; GemmFailure where the choice cannot run."""
        if choice.backend == "vendor":
            layout = self.vendor_layouts.get((ctx.n, ctx.k))
            if layout is None:
                layout = self._find_vendor_layout(ctx)
                if layout is None:
                    raise GemmFailure("fail:unsupported", gemm.name)
                self.vendor_layouts[(ctx.n, ctx.k)] = layout
            return [self._vendor_op(s, layout) for s in ctx.sets]
        cell, cfg = cell_and_config(choice, m, gemm, self.opts.mapping)
        reason = self.compile_failures.get(runner.variant_key(cell, cfg))
        if reason:
            raise GemmFailure("fail:" + reason, gemm.name)
        return [runner.make_op(cell, cfg, s) for s in ctx.sets]

    def check(self, op, ctx):
        out0 = getattr(op, "result", ctx.sets[0][4])
        out0.fill_(float("nan"))
        op()
        torch.cuda.synchronize()
        return runner.gpu_err_ratio(out0, ctx.ref)

    # -- one M ------------------------------------------------------------------------------------

    def contexts(self, m, gemms, choices_by_policy):
        """Buffer sets of the layer at M: per GEMM a ShapeContext with the layer's set count and a split-K
        workspace where any policy splits that GEMM."""
        workspace = [any(cs[i].backend == "ck" and cs[i].split_k > 0 for cs in choices_by_policy.values())
                     for i in range(len(gemms))]
        n_sets = layer.layer_buffer_sets(m, gemms, workspace, self.device["l2_bytes"], self.opts.l2_factor)
        ctxs = [runner.ShapeContext(m, g.n, g.k, self.fp8, n_sets, w, self.gen) for g, w in zip(gemms, workspace)]
        return ctxs, n_sets

    def prepare(self, m, gemms, choices, ctxs):
        """(sequence ops per buffer set, per-GEMM errRatio); GemmFailure naming the first GEMM that fails."""
        per_gemm, errs = [], []
        for g, c, ctx in zip(gemms, choices, ctxs):
            try:
                ops = self.gemm_ops(c, m, g, ctx)
                err = self.check(ops[0], ctx)
            except GemmFailure as e:
                e.errs = list(errs)
                raise
            except Exception as e:
                if c.backend == "vendor" and not isinstance(e, LIBRARY_ERRORS):
                    raise  # not the library refusing: a bug here, which no status may hide
                self.log("M=%d %s (%s %s): %s: %s" % (m, g.name, c.backend, c.kernel_name, type(e).__name__,
                                                     str(e)[:300]))
                runner.check_device()
                # The library refusing a shape is "unsupported", as in vendor_reference.py.
                reason = "unsupported" if c.backend == "vendor" else runner.classify(e)
                raise GemmFailure("fail:" + reason, g.name, errs)
            errs.append(err)
            if err > stats.MAX_ERR_RATIO:
                raise GemmFailure("fail:errRatio", g.name, errs)
            per_gemm.append(ops)
        n_sets = len(ctxs[0].sets)

        def sequence(s):
            todo = [ops[s] for ops in per_gemm]

            def run_layer():
                for op in todo:
                    op()
            return run_layer
        return [sequence(s) for s in range(n_sets)], errs

    def warm_up(self, m, gemms, choices_in_order, ctxs):
        """Measures the first policy's sequence that passes its checks once and returns that time, which no
        line uses: on an H100 the first sequence timed at each M took 10-14 us more than the same policy in
        every later round, whichever policy came first (an untimed 200 ms run of the sequence before it did
        not remove that). ``choices_in_order``: (label, choices) pairs. Returns {"policy", "us"}, or None
        where no policy runs at this M or the timing itself failed (``measure`` logged why)."""
        for label, choices in choices_in_order:
            row = self.measure(m, gemms, choices, ctxs)
            if row["status"] == "ok":
                return {"policy": label, "us": row["us"]}
            if row["failed_gemm"] is None:
                return None
        return None

    def time_sequence(self, seq_ops):
        """(per-sequence times in us, method): graph replays (``runner.time_graph``); where capture fails,
        one sequence per repetition between events after an L2 flush (``runner.time_events``)."""
        if self.graph_ok:
            try:
                return runner.time_graph(seq_ops, self.opts)
            except RuntimeError as e:
                if runner.classify(e) == "oom":
                    raise
                self.log("graph capture/replay failed (%s); falling back to events with an L2 flush" % str(e)[:200])
                runner.check_device()
                self.graph_ok = False
        if self.flush is None:
            self.flush = torch.empty(2 * self.device["l2_bytes"], device=runner.DEVICE, dtype=torch.int8)
        return runner.time_events(seq_ops, self.opts, self.flush), "events+flush"

    def measure(self, m, gemms, choices, ctxs):
        """{status, us..., errRatio per GEMM, failed_gemm} of one policy's sequence at M."""
        t0 = time.time()
        try:
            seq_ops, errs = self.prepare(m, gemms, choices, ctxs)
        except GemmFailure as e:
            return {"status": e.status, "failed_gemm": e.gemm, "errRatio": e.errs, "wall_s": round(time.time() - t0, 4)}
        try:
            times, method = self.time_sequence(seq_ops)
        except Exception as e:
            self.log("M=%d timing: %s: %s" % (m, type(e).__name__, str(e)[:300]))
            runner.check_device()
            return {"status": "fail:" + runner.classify(e), "failed_gemm": None, "errRatio": errs,
                    "wall_s": round(time.time() - t0, 4)}
        row = {"status": "ok", "failed_gemm": None, "errRatio": errs, "timing": method,
               "wall_s": round(time.time() - t0, 4)}
        row.update(stats.summarize(times))
        return row
