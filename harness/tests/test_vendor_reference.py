"""vendor_reference.py's measuring logic with a stand-in for torch and bsbench.runner: the scale layouts it
offers, the per-shape layout search, which errors become which status, and the timing summary it records.
No GPU: the stand-in library computes "right" or "wrong" per (K-block count, scale layout)."""

import contextlib
import csv
import io
import os
import sys
import types
import unittest

HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HARNESS)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vendor_reference as vr  # noqa: E402
from bsbench.vendor import scale_layouts, vendor_gemm  # noqa: E402
from stand_ins import SharedProduct  # noqa: E402

PADDED_VIEW = "a col-major, b transposed view of storage padded to 4 K-blocks"
PITCHED = "a col-major, b K/128-strided view of storage padded to 4 K-blocks"
PADDED = "a col-major, b K-blocks padded to 4, transposed view"
KERNEL = "a8w8_blockscale_1x128x128_256x128x128x128_16x16_32x32_2x2_8x32x1_8x32x1_1x32x1x8_8_1x1_intrawave_v3"


class T(SharedProduct):
    """A 2-D tensor stand-in: a shape, whether it is row- or column-major (``layout``), the stride between
    its rows (row-major) or columns (col-major) as torch sees it (``lead``), and the pitch at which the rows
    of the weight-scale matrix it was made from really lie in its storage (``pitch``)."""

    def __init__(self, shape, layout="row", lead=None, pitch=None, store=None, nbytes=4, copies=None):
        self.shape, self.layout = tuple(shape), layout
        self.lead = lead if lead is not None else (shape[-1] if layout == "row" else shape[0])
        self.pitch = pitch if pitch is not None else self.lead
        # What a product written into this tensor holds (shared with the views of its rows), and the element
        # size; ``copies`` records every copy_ into it (as (rows, source shape)).
        self.store = store if store is not None else {"err": None}
        self.nbytes = nbytes
        self.copies = copies if copies is not None else []
        self.dtype, self.device = "dtype%d" % nbytes, "cuda"

    def element_size(self):
        return self.nbytes

    def view(self, dtype):
        return T(self.shape, self.layout, self.lead, self.pitch, self.store, 1, self.copies)

    def copy_(self, src):
        assert src.shape == self.shape, (src.shape, self.shape)
        self.copies.append((self.shape[0], src.shape))

    def t(self):
        flip = {"row": "col", "col": "row", "flat": "flat"}[self.layout]
        return T(self.shape[::-1], flip, self.lead, self.pitch)

    def contiguous(self):
        if self.layout == "row":
            return self
        return T(self.shape, "row")  # a copy: rows now at the pitch of its own width

    def reshape(self, *shape):
        assert shape == (-1,) and self.layout == "row"
        return T((self.shape[0] * self.shape[1],), "flat", self.lead, self.pitch)

    def as_strided(self, size, stride):
        assert self.layout == "flat" and stride[0] == 1  # the column-major view of the flat storage
        return T(size, "col", stride[1], self.pitch)

    def __getitem__(self, index):
        if isinstance(index, slice):  # [:m], the first m rows: a view sharing the product and the copies
            assert index.start is None and index.step is None
            return T((index.stop,) + self.shape[1:], self.layout, self.lead, self.pitch, self.store, self.nbytes,
                     self.copies)
        rows, cols = index  # only [:, :n], a view: the storage (and its padding) stays
        assert rows == slice(None) and cols.start is None and cols.step is None
        return T((self.shape[0], cols.stop), self.layout, self.lead, self.pitch)

    def fill_(self, _v):
        self.err = None


def fake_torch(kb, log, check="exact"):
    """torch._scaled_mm over cuBLAS on an H100/H200: 1x128 scales col-major; 128x128 weight scales a
    (K/128, N/128) col-major tensor whose leading dimension torch checks, ``exact`` (torch 2.11: exactly
    K/128) or ``padded`` (later releases: K/128 rounded up to 4); cuBLAS then reads the storage at the
    rounded-up pitch, so the product is right only where the data lies at that pitch, else silently
    wrong; M not a multiple of 4 refused."""
    torch = types.SimpleNamespace(bfloat16="bf16", uint8="uint8")
    torch.zeros = lambda shape, dtype=None, device=None: T(shape, "row", nbytes=1 if dtype == "uint8" else 4)
    torch.empty = lambda shape, dtype=None, device=None: T(shape, "row", nbytes=2)
    torch.cuda = types.SimpleNamespace(synchronize=lambda: None)

    def pad(t, amounts):
        left, right = amounts
        assert left == 0
        log.append(("pad", right))
        return T((t.shape[0], t.shape[1] + right), "row")

    torch.nn = types.SimpleNamespace(functional=types.SimpleNamespace(pad=pad))

    def scaled_mm(x, w, sa, sb, out_dtype=None, out=None):
        if x.shape[0] % 4:
            raise RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED")
        kb, nb = x.shape[1] // 128, (w.shape[1] + 127) // 128
        want_lead = kb if check == "exact" else kb + (-kb % 4)
        if sa.layout != "col" or sb.layout != "col" or sb.shape != (kb, nb) or sb.lead != want_lead:
            raise RuntimeError("Invalid scaling configuration.")
        res = out if out is not None else T(x.shape)
        res.err = 0.0 if sb.pitch == kb + (-kb % 4) else 0.5
        return res

    torch._scaled_mm = scaled_mm
    return torch


def fake_runner(times=(5.0, 4.0, 6.0), method="graph"):
    r = types.SimpleNamespace()
    r.gpu_err_ratio = lambda out, ref: out.err
    r.time_graph = lambda ops, opts, best_us=None: ([op() or t for op, t in zip(ops * len(times), times)], method)
    return r


class Ctx:
    def __init__(self, m, n, k, n_sets=2):
        self.m, self.n, self.k, self.ref = m, n, k, "ref"
        kb, nb = k // 128, (n + 127) // 128
        self.sets = [(T((m, k), nbytes=1), T((n, k), nbytes=1), T((m, kb)), T((nb, kb)), T((m, n), nbytes=2), None)
                     for _ in range(n_sets)]


class ScaleLayoutsTest(unittest.TestCase):
    def test_the_weight_scales_are_padded_to_four_k_blocks_where_needed(self):
        log = []
        names = [n for n, _, _ in scale_layouts(fake_torch(18, log), T((7, 18)), T((56, 18)))]
        self.assertEqual(log, [("pad", 2)])  # K 2304: 18 blocks -> 20
        self.assertLess(names.index(PADDED_VIEW), names.index(PITCHED))
        self.assertLess(names.index(PITCHED), names.index(PADDED))
        self.assertLess(names.index(PADDED), names.index("a col-major, b transposed view"))
        # both views have the documented (K/128, N/128) shape over storage at a pitch of 20; torch sees a
        # leading dimension of 20 in the first, 18 in the second; the padded tensor is (20, 56)
        layouts = {n: sb for n, _, sb in scale_layouts(fake_torch(18, []), T((7, 18)), T((56, 18)))}
        self.assertEqual((layouts[PADDED_VIEW].shape, layouts[PADDED_VIEW].lead, layouts[PADDED_VIEW].pitch),
                         ((18, 56), 20, 20))
        self.assertEqual((layouts[PITCHED].shape, layouts[PITCHED].lead, layouts[PITCHED].pitch), ((18, 56), 18, 20))
        self.assertEqual(layouts[PADDED].shape, (20, 56))
        self.assertEqual(layouts["a col-major, b transposed view"].pitch, 18)
        log.clear()
        layouts = {n: sb for n, _, sb in scale_layouts(fake_torch(16, log), T((7, 16)), T((56, 16)))}
        self.assertEqual(log, [])  # K 2048: 16 blocks, nothing to pad
        for name in (PADDED_VIEW, PITCHED, "a col-major, b transposed view"):
            self.assertEqual((layouts[name].shape, layouts[name].lead, layouts[name].pitch), ((16, 56), 16, 16))


class MeasureShapeTest(unittest.TestCase):
    def setUp(self):
        self.msgs = []
        self.log = self.msgs.append

    def test_a_shape_with_18_k_blocks_is_measured_at_the_pitch_cublas_reads(self):
        # torch 2.11's check (leading dimension exactly K/128): the padded view is refused, the plain view is
        # accepted and wrong, the K/128-strided view of padded storage is right
        status, err, summary, layout = vr.measure_shape(fake_torch(18, []), fake_runner(), Ctx(64, 7168, 2304),
                                                        None, None, self.log)
        self.assertEqual((status, err, layout), ("ok", 0.0, PITCHED))
        self.assertEqual((summary["us"], summary["reps"], summary["timing"]), (5.0, 3, "graph"))
        self.assertTrue(any("layout %s rejected at M=64 N=7168 K=2304" % PADDED_VIEW in m for m in self.msgs))
        # a later torch's check (leading dimension rounded up to 4): the padded view is taken first
        status, err, _, layout = vr.measure_shape(fake_torch(18, [], check="padded"), fake_runner(),
                                                  Ctx(64, 7168, 2304), None, None, self.log)
        self.assertEqual((status, err, layout), ("ok", 0.0, PADDED_VIEW))

    def test_a_shape_with_16_k_blocks_takes_the_first_view_under_either_check(self):
        for check in ("exact", "padded"):
            status, err, _, layout = vr.measure_shape(fake_torch(16, [], check=check), fake_runner(),
                                                      Ctx(64, 7168, 2048), None, None, self.log)
            self.assertEqual((status, err, layout), ("ok", 0.0, PADDED_VIEW), check)

    def test_a_layout_kept_from_another_shape_is_searched_again_where_it_computes_wrong(self):
        torch = fake_torch(18, [])
        status, err, _, layout = vr.measure_shape(torch, fake_runner(), Ctx(64, 7168, 2304),
                                                  "a col-major, b transposed view", None, self.log)
        self.assertEqual((status, err), ("ok", 0.0))
        self.assertEqual(layout, PITCHED)
        self.assertTrue(any("computes a wrong product at M=64 N=7168 K=2304" in m for m in self.msgs))

    def test_a_layout_kept_from_another_shape_is_searched_again_where_the_library_refuses_it(self):
        # torch 2.11 takes the padded view at K = 7168 (56 blocks) and refuses it at K = 2304 (18 blocks):
        # the shape is searched again, not recorded as unsupported
        torch = fake_torch(18, [])
        status, err, _, layout = vr.measure_shape(torch, fake_runner(), Ctx(64, 7168, 2304), PADDED_VIEW, None,
                                                  self.log)
        self.assertEqual((status, err, layout), ("ok", 0.0, PITCHED))
        self.assertTrue(any(m.startswith("# layout %s is refused (Invalid scaling configuration.) at M=64 N=7168 "
                                         "K=2304: searching again" % PADDED_VIEW) for m in self.msgs), self.msgs)

    def test_an_m_that_is_not_a_multiple_of_4_runs_padded_as_a_runtime_runs_it(self):
        # cuBLAS refuses M = 2 or 6 as it is; the GEMM runs on 4 or 8 rows, activations and their scales
        # copied in by every call, and the product read from the first M rows
        for m, rows in ((2, 4), (6, 8), (13351, 13352)):
            ctx = Ctx(m, 4096, 4096, n_sets=2)
            runner = fake_runner()
            launched = []
            runner.time_graph = lambda ops, opts, best_us=None: ([launched.append(1) or op() or 5.0 for op in ops],
                                                                 "graph")
            status, err, summary, layout = vr.measure_shape(fake_torch(32, []), runner, ctx, None, None, self.log)
            self.assertEqual((status, err, layout, summary["us"]), ("ok", 0.0, PADDED_VIEW, 5.0), m)
            self.assertEqual(len(launched), 2)
        # the copies: into the padded activations (M of the rows) and scales, once per call
        torch = fake_torch(32, [])
        made = []
        zeros = torch.zeros
        torch.zeros = lambda shape, dtype=None, device=None: made.append(zeros(shape, dtype, device)) or made[-1]
        bufset = Ctx(6, 4096, 4096).sets[0]
        op, result = vendor_gemm(torch, bufset, PADDED_VIEW)
        self.assertEqual([(t.shape, t.nbytes) for t in made], [((8, 4096), 1), ((8, 32), 4)])
        self.assertEqual(result.shape, (6, 4096))
        result.fill_(None)
        op()
        op()
        self.assertEqual(made[0].copies, [(6, (6, 4096))] * 2)  # the activations' M rows, at every call
        self.assertEqual(result.err, 0.0)  # the product landed in the rows the result views
        # a multiple of 4 runs as it is: no copies, the product in the buffer set's own output
        bufset = Ctx(8, 4096, 4096).sets[0]
        op, result = vendor_gemm(torch, bufset, PADDED_VIEW)
        self.assertIs(result, bufset[4])
        op()
        self.assertEqual((bufset[0].copies, bufset[4].err), ([], 0.0))
        with self.assertRaises(KeyError):
            vendor_gemm(torch, bufset, "no such layout")

    def test_the_library_refusing_a_shape_is_unsupported_and_keeps_no_layout(self):
        torch = fake_torch(32, [])
        scaled_mm = torch._scaled_mm

        def refuse_n_8192(x, w, sa, sb, out_dtype=None, out=None):
            if w.shape[1] == 8192:
                raise RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED")
            return scaled_mm(x, w, sa, sb, out_dtype, out)
        torch._scaled_mm = refuse_n_8192
        status, err, summary, layout = vr.measure_shape(torch, fake_runner(), Ctx(64, 8192, 4096), None, None,
                                                        self.log)
        self.assertEqual((status, err, summary, layout), ("fail:unsupported", None, None, None))
        # with a layout known from an earlier shape, the refusal is unsupported too and the layout is kept
        kept = PADDED_VIEW
        status, _, _, layout = vr.measure_shape(torch, fake_runner(), Ctx(64, 8192, 4096), kept, None, self.log)
        self.assertEqual((status, layout), ("fail:unsupported", kept))

    def test_no_layout_right_is_err_ratio(self):
        torch = fake_torch(18, [])
        torch.nn.functional.pad = lambda t, a: T(t.shape, "row", None)  # a library whose padding does nothing
        status, err, summary, _ = vr.measure_shape(torch, fake_runner(), Ctx(64, 7168, 2304),
                                                   "a col-major, b transposed view", None, self.log)
        self.assertEqual((status, err, summary), ("fail:errRatio", 0.5, None))

    def test_a_value_error_of_the_library_is_a_refusal(self):
        torch = fake_torch(32, [])

        def refuse(*a, **k):
            raise ValueError("scale_a must be outer-dim-major")
        torch._scaled_mm = refuse
        status, _, _, layout = vr.measure_shape(torch, fake_runner(), Ctx(64, 4096, 4096), None, None, self.log)
        self.assertEqual((status, layout), ("fail:unsupported", None))

    def test_a_bug_is_not_a_status(self):
        # time_graph's result read wrongly once turned every row into fail:unsupported; now it propagates.
        torch = fake_torch(32, [])
        runner = fake_runner()
        def broken(ops, opts, best_us=None):
            raise TypeError("'<' not supported between instances of 'str' and 'list'")
        runner.time_graph = broken
        with self.assertRaises(TypeError):
            vr.measure_shape(torch, runner, Ctx(64, 4096, 4096), None, None, self.log)


class WholeFileTest(unittest.TestCase):
    """main() writes its CSV whole or not at all (stand-ins for torch, the device and the measuring)."""

    def run_main(self, plan_m, stop_at=None):
        import tempfile
        import bsbench
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        plan = os.path.join(d.name, "plan.jsonl")
        with open(plan, "w") as f:
            for m in plan_m:
                f.write('{"M": %d, "N": 256, "K": 256, "kernelId": 0, "splitK": 0, "kernelName": "%s", '
                        '"BLOCK_SIZE": 256, "MPerBLOCK": 128, "NPerBLOCK": 128, "KPerBLOCK": 128, "pipeline": 3, '
                        '"recheck": 0}\n' % (m, KERNEL))
        out = os.path.join(d.name, "vendor.csv")
        torch = types.SimpleNamespace(float8_e4m3fn="fp8", Generator=lambda device=None: types.SimpleNamespace(
            manual_seed=lambda s: None), cuda=types.SimpleNamespace(empty_cache=lambda: None))
        runner = types.ModuleType("bsbench.runner")
        runner.DEVICE = "cuda"
        runner.Options = lambda mapping: types.SimpleNamespace(l2_factor=3)
        runner.ShapeContext = lambda m, n, k, fp8, n_sets, ws, gen: Ctx(m, n, k, n_sets)
        device = {"gfx": "sm_90", "cu_num": 132, "l2_bytes": 50 << 20, "fp8": "float8_e4m3fn", "name": "NVIDIA H100",
                  "backend": "cuda-13.0"}
        measured = []

        def measure(torch_, runner_, ctx, layout, opts, log):
            if ctx.m == stop_at:
                raise KeyboardInterrupt
            measured.append(ctx.m)
            return "ok", 0.0, {"us": 5.0, "us_min": 4.0, "us_max": 6.0, "us_p10": 4.5, "us_p90": 5.5, "reps": 3,
                               "timing": "graph"}, "layout"
        saved = (vr.env.import_torch, vr.env.import_triton, vr.env.detect, vr.measure_shape,
                 sys.modules.get("bsbench.runner"), getattr(bsbench, "runner", None))
        vr.env.import_torch, vr.env.import_triton = (lambda: torch), (lambda: None)
        vr.env.detect, vr.measure_shape = (lambda t: device), measure
        sys.modules["bsbench.runner"], bsbench.runner = runner, runner
        try:
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                try:
                    code = vr.main(["--plan", plan, "--out", out])
                except KeyboardInterrupt:
                    code = "interrupted"
        finally:
            vr.env.import_torch, vr.env.import_triton, vr.env.detect, vr.measure_shape = saved[:4]
            if saved[4] is None:
                sys.modules.pop("bsbench.runner", None)
            else:
                sys.modules["bsbench.runner"] = saved[4]
            if saved[5] is None:
                delattr(bsbench, "runner")
            else:
                bsbench.runner = saved[5]
        return code, out, measured

    def test_a_finished_run_writes_the_csv_and_no_part_file(self):
        code, out, measured = self.run_main([1, 6, 64])
        self.assertEqual((code, measured), (0, [1, 6, 64]))
        self.assertFalse(os.path.exists(out + ".part"))
        with open(out) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([(r["M"], r["status"], r["us"]) for r in rows], [("1", "ok", "5.0"), ("6", "ok", "5.0"),
                                                                          ("64", "ok", "5.0")])

    def test_an_interrupted_run_leaves_no_csv_only_its_part(self):
        code, out, measured = self.run_main([1, 6, 64], stop_at=64)
        self.assertEqual((code, measured), ("interrupted", [1, 6]))
        self.assertFalse(os.path.exists(out))
        with open(out + ".part") as f:
            self.assertEqual([r["M"] for r in csv.DictReader(f)], ["1", "6"])


if __name__ == "__main__":
    unittest.main()
