"""vendor_reference.py's measuring logic with a stand-in for torch and bsbench.runner: the scale layouts it
offers, the per-shape layout search, which errors become which status, and the timing summary it records.
No GPU: the stand-in library computes "right" or "wrong" per (K-block count, scale layout)."""

import os
import sys
import types
import unittest

HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HARNESS)
import vendor_reference as vr  # noqa: E402

PADDED_VIEW = "a col-major, b transposed view of storage padded to 4 K-blocks"
PADDED = "a col-major, b K-blocks padded to 4, transposed view"


class T:
    """A tensor stand-in: a shape, strides-as-a-tag (``layout``), and the error its writer leaves."""

    def __init__(self, shape, layout="row", padded_to=None):
        self.shape, self.layout, self.padded_to, self.err = tuple(shape), layout, padded_to, None

    def t(self):
        flip = {"row": "col", "col": "row"}[self.layout]
        return T(self.shape[::-1], flip, self.padded_to)

    def contiguous(self):
        return T(self.shape, "row", self.padded_to)

    def __getitem__(self, index):
        rows, cols = index  # only [:, :n], a view: the storage (and its padding) stays
        assert rows == slice(None) and cols.start is None and cols.step is None
        return T((self.shape[0], cols.stop), self.layout, self.padded_to)

    def fill_(self, _v):
        self.err = None


def fake_torch(kb, log):
    """cuBLAS as seen on the H200: 1x128 scales col-major, 128x128 weight scales as a col-major view whose
    leading dimension must be a multiple of 4 K-blocks, else a silently wrong product; M < 4 refused."""
    torch = types.SimpleNamespace(bfloat16="bf16")
    torch.cuda = types.SimpleNamespace(synchronize=lambda: None)

    def pad(t, amounts):
        left, right = amounts
        assert left == 0
        log.append(("pad", right))
        return T((t.shape[0], t.shape[1] + right), "row", t.shape[1] + right)

    torch.nn = types.SimpleNamespace(functional=types.SimpleNamespace(pad=pad))

    def scaled_mm(x, w, sa, sb, out_dtype=None, out=None):
        if x.shape[0] < 4:
            raise RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED")
        kb, nb = x.shape[1] // 128, (w.shape[1] + 127) // 128
        if sa.layout != "col" or sb.layout != "col" or sb.shape[0] < kb or sb.shape[1] != nb:
            raise RuntimeError("Invalid scaling configuration.")
        lead = sb.padded_to if sb.padded_to is not None else sb.shape[0]
        res = out if out is not None else T(x.shape)
        res.err = 0.0 if lead % 4 == 0 else 0.5
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
        self.sets = [(T((m, k)), T((n, k)), T((m, kb)), T((nb, kb)), T((m, n)), None) for _ in range(n_sets)]


class ScaleLayoutsTest(unittest.TestCase):
    def test_the_weight_scales_are_padded_to_four_k_blocks_where_needed(self):
        log = []
        names = [n for n, _, _ in vr.scale_layouts(fake_torch(18, log), T((7, 18)), T((56, 18)))]
        self.assertEqual(log, [("pad", 2)])  # K 2304: 18 blocks -> 20
        self.assertLess(names.index(PADDED_VIEW), names.index(PADDED))
        self.assertLess(names.index(PADDED), names.index("a col-major, b transposed view"))
        # the storage view has the documented (K/128, N/128) shape; the padded tensor is (20, 56)
        layouts = {n: sb for n, _, sb in vr.scale_layouts(fake_torch(18, []), T((7, 18)), T((56, 18)))}
        self.assertEqual((layouts[PADDED_VIEW].shape, layouts[PADDED_VIEW].padded_to), ((18, 56), 20))
        self.assertEqual(layouts[PADDED].shape, (20, 56))
        log.clear()
        vr.scale_layouts(fake_torch(16, log), T((7, 16)), T((56, 16)))
        self.assertEqual(log, [])  # K 2048: 16 blocks, nothing to pad


class MeasureShapeTest(unittest.TestCase):
    def setUp(self):
        self.msgs = []
        self.log = self.msgs.append

    def test_a_shape_with_18_k_blocks_is_measured_with_the_padded_layout(self):
        torch = fake_torch(18, [])
        status, err, summary, layout = vr.measure_shape(torch, fake_runner(), Ctx(64, 7168, 2304), None, None,
                                                        self.log)
        self.assertEqual((status, err, layout), ("ok", 0.0, PADDED_VIEW))
        self.assertEqual((summary["us"], summary["reps"], summary["timing"]), (5.0, 3, "graph"))

    def test_a_layout_kept_from_another_shape_is_searched_again_where_it_computes_wrong(self):
        torch = fake_torch(18, [])
        status, err, _, layout = vr.measure_shape(torch, fake_runner(), Ctx(64, 7168, 2304),
                                                  "a col-major, b transposed view", None, self.log)
        self.assertEqual((status, err), ("ok", 0.0))
        self.assertEqual(layout, PADDED_VIEW)
        self.assertTrue(any("computes a wrong product at M=64 N=7168 K=2304" in m for m in self.msgs))

    def test_the_library_refusing_a_shape_is_unsupported_and_keeps_no_layout(self):
        torch = fake_torch(32, [])
        status, err, summary, layout = vr.measure_shape(torch, fake_runner(), Ctx(2, 4096, 4096), None, None,
                                                        self.log)
        self.assertEqual((status, err, summary, layout), ("fail:unsupported", None, None, None))
        # with a layout known from an earlier shape, the refusal is unsupported too and the layout is kept
        kept = PADDED_VIEW
        status, _, _, layout = vr.measure_shape(torch, fake_runner(), Ctx(2, 4096, 4096), kept, None, self.log)
        self.assertEqual((status, layout), ("fail:unsupported", kept))

    def test_a_library_that_wants_the_exact_shape_gets_the_storage_view(self):
        # A library that refuses a scale tensor of any but the (K/128, N/128) shape: the padded tensor is
        # refused, the view of padded storage is taken.
        torch = fake_torch(18, [])
        inner = torch._scaled_mm

        def exact(x, w, sa, sb, out_dtype=None, out=None):
            if sb.shape[0] != x.shape[1] // 128:
                raise RuntimeError("scale_b must have shape (K/128, N/128)")
            return inner(x, w, sa, sb, out_dtype=out_dtype, out=out)
        torch._scaled_mm = exact
        status, _, _, layout = vr.measure_shape(torch, fake_runner(), Ctx(64, 7168, 2304), None, None, self.log)
        self.assertEqual((status, layout), ("ok", PADDED_VIEW))

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


if __name__ == "__main__":
    unittest.main()
