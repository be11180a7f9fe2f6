"""The GPU side of layer_sequence.py (bsbench/layer_runner.py and the measuring loop of the entry point) run
with stand-ins for torch and bsbench.runner: what is checked is the glue (which GEMM runs what, in which
order, what a failure reports, how the lines and the summary are assembled), not any kernel or timing."""

import contextlib
import io
import json
import os
import sys
import tempfile
import types
import unittest

HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HARNESS)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bsbench import layer  # noqa: E402
from stand_ins import SharedProduct  # noqa: E402

L2 = 60 * 1024 * 1024


#: Shapes of the stand-in tensors by role (M rows where the tensor has them; weight scales of 4 K-blocks, so
#: the vendor layouts pad nothing).
SHAPES = {"x": lambda m: (m, 128), "xs": lambda m: (m, 1), "ws": lambda m: (1, 4), "out": lambda m: (m, 8)}


class FakeTensor(SharedProduct):
    """Stands for a tensor: the GEMM it belongs to, its M, and an errRatio its writer leaves in it (shared
    with views of its first rows)."""

    def __init__(self, gemm, m, role, shape=None, store=None, copies=None):
        self.gemm, self.m, self.role = gemm, m, role
        self.shape = shape or SHAPES.get(role, lambda m: (1, 4))(m)
        self.store = store if store is not None else {"err": None}
        self.copies = copies if copies is not None else []
        self.dtype, self.device = role, "cuda"

    def element_size(self):
        return 1 if self.role == "x" else 4

    def view(self, _dtype):
        return self

    def copy_(self, src):
        self.copies.append(src.role)

    def t(self):
        return self

    def contiguous(self):
        return self

    def __getitem__(self, index):
        if isinstance(index, slice):  # the first rows: a view sharing the product
            return FakeTensor(self.gemm, index.stop, self.role, (index.stop,) + self.shape[1:], self.store,
                              self.copies)
        return self

    def reshape(self, *_shape):
        return self

    def as_strided(self, _size, _stride):
        return self

    def fill_(self, _v):
        self.err = None


class World:
    """Everything the fakes record."""

    def __init__(self):
        self.calls = []  # (gemm N, backend, split) per launch, in order
        self.time_graph_calls = []
        self.bad_err = set()  # (N, kernelId) whose output is wrong
        self.compile_fail = set()  # variant keys that fail to compile
        self.wrong_layout = set()  # (N, scale_b role) the vendor GEMM computes wrong with
        self.refuse_n = set()  # N the vendor GEMM refuses


def fake_modules(world):
    torch = types.ModuleType("torch")
    torch.__version__ = "0.0-fake"
    torch.float8_e4m3fn, torch.bfloat16, torch.int8 = "fp8", "bf16", "int8"
    torch.version = types.SimpleNamespace(cuda="13.0", hip=None)

    class Generator:
        def __init__(self, device=None):
            pass

        def manual_seed(self, s):
            return self

    def scaled_mm(x, w, sa, sb, out_dtype=None, out=None):
        if x.shape[0] % 4 or w.gemm in world.refuse_n:  # cuBLAS: M in multiples of 4 only
            raise RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED")
        world.calls.append((w.gemm, "vendor", 0))
        res = out if out is not None else FakeTensor(w.gemm, x.shape[0], "y")
        # A scale layout the library reads wrong on this GEMM: a wrong product, no error (as cuBLAS does).
        res.err = 0.5 if (w.gemm, sb.role) in world.wrong_layout else 0.0
        return res

    torch.Generator, torch._scaled_mm = Generator, scaled_mm
    torch.uint8 = "uint8"
    torch.zeros = lambda shape, dtype=None, device=None: FakeTensor(None, shape[0], "x" if dtype == "uint8" else "xs",
                                                                    tuple(shape))
    torch.empty = lambda shape, *a, **k: FakeTensor(None, shape[0], "out" if len(shape) == 2 else "flush", tuple(shape))
    props = types.SimpleNamespace(name="NVIDIA H200", major=9, minor=0, multi_processor_count=132,
                                  L2_cache_size=L2, total_memory=141 << 30)
    torch.cuda = types.SimpleNamespace(is_available=lambda: True, device_count=lambda: 1, synchronize=lambda: None,
                                       empty_cache=lambda: None, get_device_properties=lambda i: props)
    triton = types.ModuleType("triton")
    triton.__version__ = "0.0-fake"
    triton.language = types.ModuleType("triton.language")

    runner = types.ModuleType("bsbench.runner")
    runner.DEVICE = "cuda"
    runner.log = lambda msg: None

    class Options:
        def __init__(self, mapping, budget_us=4000.0, min_reps=20, max_reps=100, min_replay_us=100.0,
                     use_graph=True, seed=1234, l2_factor=3, compile_jobs=1, slow_cutoff=0.0, slow_reps=5):
            self.mapping, self.use_graph, self.seed, self.l2_factor = mapping, use_graph, seed, l2_factor
            self.compile_jobs, self.slow_cutoff, self.slow_reps = compile_jobs, slow_cutoff, slow_reps

    class ShapeContext:
        def __init__(self, m, n, k, fp8, n_sets, with_workspace, gen):
            self.m, self.n, self.k, self.ref = m, n, k, "ref"
            self.with_workspace = with_workspace
            self.sets = [(FakeTensor(n, m, "x"), FakeTensor(n, m, "w"), FakeTensor(n, m, "xs"), FakeTensor(n, m, "ws"),
                          FakeTensor(n, m, "out"), FakeTensor(n, m, "work") if with_workspace else None)
                         for _ in range(n_sets)]

    def make_op(cell, cfg, bufset):
        out = bufset[4]
        backend = getattr(cell, "libtype", "ck")

        def op():
            world.calls.append((cell.n, backend, cell.split_k))
            out.err = 0.5 if (cell.n, cell.kernel_id) in world.bad_err else 0.0
        return op

    def variant_key(cell, cfg):
        return (getattr(cell, "libtype", "ck"), cfg.key(), cell.split_k > 0)

    def compile_variant(key, cfg, fp8, gen):
        if key in world.compile_fail:
            raise RuntimeError("fake compile error")

    def time_graph(ops, opts, best_us=None):
        world.time_graph_calls.append(len(ops))
        before = len(world.calls)
        ops[0]()
        launches = world.calls[before:]
        # A sequence "takes" 10 us per launch plus 1 us per split level, so tests can tell choices apart.
        us = sum(10.0 + s for _, _, s in launches)
        return [us] * 20, "graph"

    runner.Options, runner.ShapeContext, runner.make_op = Options, ShapeContext, make_op
    runner.variant_key, runner.compile_variant, runner.time_graph = variant_key, compile_variant, time_graph
    runner.time_events = lambda ops, opts, flush: [1.0]
    runner.check_device = lambda: None
    runner.classify = lambda e: "launch"
    runner.gpu_err_ratio = lambda out, ref: out.err
    return {"torch": torch, "triton": triton, "triton.language": triton.language, "bsbench.runner": runner}


@contextlib.contextmanager
def faked(world):
    """The fakes in sys.modules (and a fresh bsbench.layer_runner bound to them); everything restored after."""
    import bsbench
    fakes = fake_modules(world)
    names = list(fakes) + ["bsbench.layer_runner"]
    saved = {k: sys.modules.get(k) for k in names}
    saved_attrs = {a: getattr(bsbench, a, None) for a in ("runner", "layer_runner")}
    sys.modules.pop("bsbench.layer_runner", None)
    sys.modules.update(fakes)
    bsbench.runner = fakes["bsbench.runner"]
    try:
        from bsbench import layer_runner
        yield layer_runner, fakes
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
        for a, v in saved_attrs.items():
            if v is None:
                if hasattr(bsbench, a):
                    delattr(bsbench, a)
            else:
                setattr(bsbench, a, v)


def scale_layouts(torch, xs, ws):
    return [("only", xs, ws)]


DEVICE = {"name": "NVIDIA H200", "gfx": "sm_90", "cu_num": 132, "l2_bytes": L2, "fp8": "float8_e4m3fn",
          "backend": "cuda-13.0"}


class LayerRunnerTest(unittest.TestCase):
    def setUp(self):
        self.inst = layer.load_ck_instances()
        self.gemms = [layer.Gemm("a", 512, 1024), layer.Gemm("b", 1024, 512)]

    def runner(self, lr_mod, fakes):
        from bsbench import config
        opts = fakes["bsbench.runner"].Options(config.parse_mapping(config.DEFAULT_MAPPING_TEXT))
        return lr_mod.LayerRunner(DEVICE, opts, scale_layouts, log=lambda m: None)

    def test_a_sequence_runs_every_gemm_in_order_with_its_choice(self):
        world = World()
        with faked(world) as (lr_mod, fakes):
            lr = self.runner(lr_mod, fakes)
            choices = [layer.ck_choice(self.inst, 4, 2, "t"), layer.default_choice("triton", self.inst, "t")]
            vend = [layer.vendor_choice("v"), layer.vendor_choice("v")]
            ctxs, n_sets = lr.contexts(16, self.gemms, {"mix": choices, "vendor": vend})
            self.assertEqual([c.with_workspace for c in ctxs], [True, False])  # only GEMM a is split
            self.assertEqual(n_sets, layer.layer_buffer_sets(16, self.gemms, [True, False], L2))
            world.calls.clear()
            row = lr.measure(16, self.gemms, choices, ctxs)
            self.assertEqual(row["status"], "ok")
            self.assertEqual(row["errRatio"], [0.0, 0.0])
            # The checks run each GEMM once, then the timed sequence runs both in order.
            self.assertEqual(world.calls, [(512, "ck", 2), (1024, "triton", 0), (512, "ck", 2), (1024, "triton", 0)])
            self.assertEqual(row["us"], 10.0 + 2 + 10.0)
            self.assertEqual(world.time_graph_calls, [n_sets])
            v = lr.measure(16, self.gemms, vend, ctxs)
            self.assertEqual((v["status"], v["us"]), ("ok", 20.0))

    def test_failures_name_the_gemm(self):
        world = World()
        world.bad_err.add((1024, 67703222))
        with faked(world) as (lr_mod, fakes):
            lr = self.runner(lr_mod, fakes)
            tri = [layer.default_choice("ck", self.inst, "t"), layer.default_choice("triton", self.inst, "t")]
            ctxs, _ = lr.contexts(16, self.gemms, {"p": tri})
            row = lr.measure(16, self.gemms, tri, ctxs)
            self.assertEqual((row["status"], row["failed_gemm"], row["errRatio"]), ("fail:errRatio", "b", [0.0, 0.5]))
            # The vendor at M = 2 runs on 4 padded rows, as a runtime runs it: the activations copied in at
            # every call, the product read from the first 2 rows.
            vend = [layer.vendor_choice("v")] * 2
            ctxs, _ = lr.contexts(2, self.gemms, {"v": vend})
            world.calls.clear()
            row = lr.measure(2, self.gemms, vend, ctxs)
            self.assertEqual((row["status"], row["errRatio"]), ("ok", [0.0, 0.0]))
            a, b = (512, "vendor", 0), (1024, "vendor", 0)
            self.assertEqual(world.calls, [a, a, b, b, a, b])  # per GEMM the layout search and the check; the timing
            # A GEMM the library refuses in every layout -> unsupported, naming it.
            world.refuse_n.add(1024)
            lr.vendor_layouts.clear()
            row = lr.measure(2, self.gemms, vend, ctxs)
            self.assertEqual((row["status"], row["failed_gemm"]), ("fail:unsupported", "b"))
            # Once a layout is known, a refused launch is unsupported too.
            world.refuse_n.clear()
            ctxs4, _ = lr.contexts(4, self.gemms, {"v": vend})
            self.assertEqual(lr.measure(4, self.gemms, vend, ctxs4)["status"], "ok")
            world.refuse_n.add(512)
            self.assertEqual(lr.measure(4, self.gemms, vend, ctxs4)["status"], "fail:unsupported")

    def test_the_vendor_scale_layout_is_found_per_shape(self):
        # GEMM b (N 1024) is computed wrong with the first layout, right with the second; GEMM a right with
        # both. A layout kept from GEMM a would fail GEMM b's check.
        world = World()
        world.wrong_layout.add((1024, "ws"))
        seen = []
        with faked(world) as (lr_mod, fakes):
            def two_layouts(torch, xs, ws):
                return [("plain", xs, ws), ("padded", xs, FakeTensor(ws.gemm, ws.m, "ws-padded"))]
            from bsbench import config
            opts = fakes["bsbench.runner"].Options(config.parse_mapping(config.DEFAULT_MAPPING_TEXT))
            lr = lr_mod.LayerRunner(DEVICE, opts, two_layouts, log=seen.append)
            vend = [layer.vendor_choice("v")] * 2
            ctxs, _ = lr.contexts(16, self.gemms, {"v": vend})
            row = lr.measure(16, self.gemms, vend, ctxs)
            self.assertEqual((row["status"], row["errRatio"]), ("ok", [0.0, 0.0]))
            self.assertEqual(lr.vendor_layouts, {(512, 1024): "plain", (1024, 512): "padded"})
            self.assertIn("# vendor layout plain computes a different product", seen)

    def test_a_bug_in_the_vendor_path_is_not_reported_as_unsupported(self):
        world = World()
        with faked(world) as (lr_mod, fakes):
            def broken(torch, xs, ws):
                raise TypeError("'<' not supported between instances of 'str' and 'list'")
            from bsbench import config
            opts = fakes["bsbench.runner"].Options(config.parse_mapping(config.DEFAULT_MAPPING_TEXT))
            lr = lr_mod.LayerRunner(DEVICE, opts, broken, log=lambda m: None)
            vend = [layer.vendor_choice("v")] * 2
            ctxs, _ = lr.contexts(16, self.gemms, {"v": vend})
            with self.assertRaises(TypeError):
                lr.measure(16, self.gemms, vend, ctxs)

    def test_compile_failures_fail_their_sequences_only(self):
        world = World()
        with faked(world) as (lr_mod, fakes):
            lr = self.runner(lr_mod, fakes)
            ck = [layer.ck_choice(self.inst, 4, 1, "t")] * 2
            key = ("ck", lr_mod.cell_and_config(ck[0], 16, self.gemms[0], lr.opts.mapping)[1].key(), True)
            world.compile_fail.add(key)
            plain = [layer.default_choice("vendor", self.inst, "v")] * 2
            lr.precompile(self.gemms, {(16, "ck"): ck, (16, "v"): plain})
            self.assertEqual(lr.compile_failures, {key: "compile"})
            ctxs, _ = lr.contexts(16, self.gemms, {"ck": ck})
            row = lr.measure(16, self.gemms, ck, ctxs)
            self.assertEqual((row["status"], row["failed_gemm"]), ("fail:compile", "a"))
            self.assertEqual(lr.measure(16, self.gemms, plain, ctxs)["status"], "ok")


    def test_the_warm_up_times_the_first_policy_that_runs_once(self):
        world = World()
        with faked(world) as (lr_mod, fakes):
            lr = self.runner(lr_mod, fakes)
            vend = [layer.vendor_choice("v")] * 2
            ck = [layer.ck_choice(self.inst, 4, 1, "t")] * 2
            ctxs, n_sets = lr.contexts(2, self.gemms, {"v": vend, "ck": ck})
            world.calls.clear()
            world.refuse_n.add(512)
            # cuBLAS refuses GEMM a, so the CK policy is timed: its checks, then one timing (10 + 1 us a GEMM).
            w = lr.warm_up(2, self.gemms, [("v", vend), ("ck", ck)], ctxs)
            self.assertEqual(w, {"policy": "ck", "us": 22.0})
            self.assertEqual(world.time_graph_calls, [n_sets])
            # No policy runs: no warm-up, nothing timed.
            self.assertIsNone(lr.warm_up(2, self.gemms, [("v", vend)], ctxs))
            self.assertEqual(world.time_graph_calls, [n_sets])


class EntryPointLoopTest(unittest.TestCase):
    def run_main(self, m, extra):
        """layer_sequence.main over a two-GEMM layer with a selector (CK split 1 below M = 8, vendor from 8)
        and the vendor policy at the M values ``m``, plus ``extra`` arguments; (lines written, stdout)."""
        world = World()
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        sel = os.path.join(d.name, "select_kernel.py")
        with open(sel, "w") as f:
            f.write('def select(M, N, K):\n    return ("ck", 4, 1) if M < 8 else ("vendor", 0, 0)\n')
        out_path = os.path.join(d.name, "run.jsonl")
        with faked(world):
            import layer_sequence
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = layer_sequence.main(["--layers", "a=512:1024,b=1024:512", "--m", m, "--out", out_path,
                                            "--policy", "selector=" + sel, "--policy", "vendor"] + extra)
        self.assertEqual(code, 0, err.getvalue())
        with open(out_path) as f:
            return [json.loads(x) for x in f], out.getvalue()

    def test_lines_recheck_and_summary(self):
        rows, text = self.run_main("2,16", ["--policy", "threshold=ck:vendor:8"])
        self.assertEqual([(r["M"], r["policy"].split("=")[0], r["status"]) for r in rows], [
            (2, "selector", "ok"), (2, "vendor", "ok"), (2, "threshold", "ok"),
            (16, "selector", "ok"), (16, "vendor", "ok"), (16, "threshold", "ok")])
        first = rows[0]
        self.assertEqual(first["us"], 2 * 11.0)
        self.assertEqual(first["us_recheck"], 2 * 11.0)
        self.assertEqual(first["status_recheck"], "ok")
        self.assertEqual([g["splits"] for g in first["gemms"]], [2, 2])
        self.assertEqual([g["errRatio"] for g in first["gemms"]], [0.0, 0.0])
        self.assertEqual((first["device"], first["n_sets"] >= 1), ("NVIDIA H200", True))
        self.assertAlmostEqual(first["tflops"], layer.layer_flops(2, [layer.Gemm("a", 512, 1024)] * 2) / 22.0 / 1e6)
        self.assertEqual((rows[1]["us"], rows[1]["failed_gemm"]), (20.0, None))  # M = 2 padded to 4 rows
        self.assertIn("mixed rule / other", text)
        self.assertIn("/ vendor alone: 1.049 over 2 M (recheck 1.049)", text)
        self.assertIn("/ best threshold [threshold=ck:vendor:8]: 1.049 over 2 M", text)
        self.assertIn("vLLM default: not measured", text)

    def test_more_rounds_give_every_round_and_their_median(self):
        rows, text = self.run_main("16", ["--rounds", "3"])
        for r in rows:
            self.assertEqual(len(r["us_rounds"]), 3, r["policy"])
            self.assertEqual(r["us_median_rounds"], sorted(r["us_rounds"])[1])
            self.assertEqual((r["us"], r["us_recheck"]), tuple(r["us_rounds"][:2]))
        self.assertIn("median of the rounds 1.000", text)
        # Every line of an M names the timing that was discarded before its rounds: the selector's (first).
        self.assertEqual([(r["warmup"]["policy"].split("=")[0], r["warmup"]["us"]) for r in rows],
                         [("selector", 20.0), ("selector", 20.0)])
        rows, _ = self.run_main("16", ["--no-warmup"])
        self.assertEqual([r["warmup"] for r in rows], [None, None])

    def test_rounds_out_of_range_is_an_argument_error(self):
        import layer_sequence
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as cm:
            layer_sequence.parse_args(["--layers", "1:128", "--out", "x.jsonl", "--rounds", "0"])
        self.assertEqual(cm.exception.code, 2)
        self.assertIn("--rounds must be 1 to 20, not 0", err.getvalue())
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as cm:
            layer_sequence.parse_args(["--layers", "1:128", "--out", "x.jsonl", "--no-recheck", "--rounds", "5"])
        self.assertEqual(cm.exception.code, 2)
        self.assertIn("--no-recheck and --rounds both set the number of rounds", err.getvalue())
        self.assertEqual(layer_sequence.parse_args(["--layers", "1:128", "--out", "x.jsonl"]).rounds, 2)
        self.assertEqual(layer_sequence.parse_args(["--layers", "1:128", "--out", "x.jsonl", "--no-recheck"]).rounds, 1)


class RoundsFieldsTest(unittest.TestCase):
    def test_median_of_the_ok_rounds(self):
        ok = lambda us: {"status": "ok", "us": us}  # noqa: E731
        failed = {"status": "fail:errRatio"}
        self.assertEqual(layer.rounds_fields([ok(10.0), failed, ok(14.0), ok(12.0)]),
                         {"us_rounds": [10.0, None, 14.0, 12.0], "us_median_rounds": 12.0})
        self.assertEqual(layer.rounds_fields([ok(10.0), ok(20.0), failed]),
                         {"us_rounds": [10.0, 20.0, None], "us_median_rounds": 15.0})
        self.assertEqual(layer.rounds_fields([failed, failed, failed]),
                         {"us_rounds": [None, None, None], "us_median_rounds": None})


if __name__ == "__main__":
    unittest.main()
