import contextlib
import gzip
import io
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bsbench import plan, triton_config as tc  # noqa: E402
import triton_plan  # noqa: E402


class ConfigTest(unittest.TestCase):
    def test_space_is_the_tuners(self):
        space = tc.tuner_space()
        self.assertEqual(len(space), 4 * 5 * 2 * 4 * 2 * 4)
        self.assertEqual(len(set(space)), 1280)
        self.assertEqual(space[0], tc.TritonConfig(16, 32, 64, 1, 4, 2))
        self.assertEqual(space[1], tc.TritonConfig(16, 32, 64, 16, 4, 2))
        self.assertEqual(space[-1], tc.TritonConfig(256, 256, 128, 64, 8, 5))
        self.assertTrue(all(128 % c.block_k == 0 for c in space))
        self.assertIn(tc.VLLM_DEFAULT, space)
        self.assertIn(tc.SGLANG_DEFAULT, space)

    def test_name_round_trip_and_ids_distinct(self):
        ids = set()
        for c in tc.tuner_space() + [tc.TritonConfig(64, 128, 128, 8, 4, 3)]:
            self.assertEqual(tc.parse_name(c.name()), c)
            ids.add(tc.kernel_id(c))
        self.assertEqual(len(ids), 1281)
        self.assertEqual(tc.VLLM_DEFAULT.name(), "triton_bm64_bn128_bk128_g32_w4_s2")
        self.assertEqual(tc.kernel_id(tc.VLLM_DEFAULT), 67703222)

    def test_hostile_names(self):
        for bad in ["triton_bm64_bn128_bk128_g32_w4", "triton_bm64_bn128_bk256_g32_w4_s2",
                    "triton_bm48_bn128_bk128_g32_w4_s2", "triton_bm064_bn128_bk128_g32_w4_s2",
                    "triton_bm64_bn128_bk128_g0_w4_s2", "triton_bm64_bn128_bk128_g32_w3_s2",
                    "triton_bm64_bn128_bk128_g32_w4_s2\n", " triton_bm64_bn128_bk128_g32_w4_s2",
                    "triton_bm64_bn128_bk128_g32_w4_s10", "ck_bm64", ""]:
            with self.assertRaises(ValueError, msg=bad) as e:
                tc.parse_name(bad)
            self.assertIn(repr(bad), str(e.exception))

    def test_runtime_dict(self):
        d = tc.VLLM_DEFAULT.runtime_dict()
        self.assertEqual(tc.from_runtime_dict(d, "f:1"), tc.VLLM_DEFAULT)
        d["num_stages"] = "2"
        with self.assertRaisesRegex(ValueError, "f:1: 'num_stages' must be an integer"):
            tc.from_runtime_dict(d, "f:1")

    def test_specialization_classes(self):
        self.assertEqual([tc.m_class(m) for m in (1, 2, 16, 17, 4096)], ["one", "any", "div16", "any", "div16"])
        # K/128 is the scale tensors' row stride: 5120/128 = 40 is not a multiple of 16, 8192/128 = 64 is
        self.assertEqual(tc.variant_classes(32, 1280, 8192), ("div16", "div16", "div16"))
        self.assertEqual(tc.variant_classes(1, 5120, 5120), ("one", "div16", "any"))
        for classes in [("one", "div16", "any"), ("any", "any", "div16"), ("div16", "one", "one")]:
            m, n, k = tc.tiny_shape(classes)
            self.assertEqual(tc.variant_classes(m, n, k), classes)
            self.assertLessEqual(m * n * k, 17 * 256 * 2176)


class PlanTest(unittest.TestCase):
    def test_round_trip_and_dispatch(self):
        c = plan.triton_cell(7, 5120, 5120, tc.VLLM_DEFAULT)
        back = plan.parse_cell(c.to_json(), "p:1")
        self.assertIsInstance(back, plan.TritonCell)
        self.assertEqual(back, c)
        self.assertEqual(json.loads(c.to_json())["kernelId"], 67703222)

    def test_inconsistent_lines_rejected(self):
        good = json.loads(plan.triton_cell(7, 5120, 5120, tc.VLLM_DEFAULT).to_json())
        cases = [("kernelName", "triton_bm64_bn128_bk128_g32_w4_s3", "does not name"),
                 ("kernelId", 1, "is not the id"), ("BLOCK_SIZE_K", 256, "BLOCK_SIZE_K 256"),
                 ("splitK", 1, "no split-K"), ("num_warps", True, "must be an integer"),
                 ("libtype", "asm", "must be \"ck\" or \"triton\""), ("M", 0, "must be positive")]
        for field, value, msg in cases:
            bad = dict(good)
            bad[field] = value
            with self.assertRaisesRegex(plan.PlanError, "p:3: .*" + msg, msg=field):
                plan.parse_cell(json.dumps(bad), "p:3")

    def test_result_line_libtype(self):
        c = plan.triton_cell(7, 5120, 5120, tc.VLLM_DEFAULT)
        dev = {"gfx": "sm_90", "cu_num": 132, "name": "H200", "backend": "cuda"}
        row = json.loads(plan.result_line(c, dev, "ok"))
        self.assertEqual((row["libtype"], row["splitK"], row["kernelName"]), ("triton", 0, c.kernel_name))


class TritonPlanTest(unittest.TestCase):
    def test_resume_skips_done_and_keeps_rechecks_after_shape(self):
        cfgs = tc.tuner_space()[:40]
        shapes = [(16, 5120, 5120), (1, 5120, 2048)]
        full = triton_plan.plan_cells(shapes, cfgs, set(), 0.2)
        first = [c for c in full if c.recheck == 0]
        self.assertEqual(len(first), 80)
        n_re = len(full) - 80
        self.assertTrue(0 < n_re < 40)
        # rechecks of shape 0 come before every cell of shape 1
        idx_last_re0 = max(i for i, c in enumerate(full) if c.recheck and c.m == 16)
        idx_first_s1 = min(i for i, c in enumerate(full) if c.m == 1)
        self.assertLess(idx_last_re0, idx_first_s1)
        done = {(c.m, c.n, c.k, c.kernel_id, c.recheck) for c in full[:50]}
        rest = triton_plan.plan_cells(shapes, cfgs, done, 0.2)
        self.assertEqual(rest, full[50:])
        # one class at a time: shape 0 has cells left, so only shapes of its classes
        mixed = [(16, 5120, 4096), (1, 5120, 4096), (32, 3584, 2048), (48, 5120, 5120)]
        only = triton_plan.plan_cells(mixed, cfgs, set(), 0.0, one_class=True)
        self.assertEqual(sorted({c.m for c in only}), [16, 32])
        done_first = {(16, 5120, 4096, c.kernel_id, 0) for c in only if c.m == 16}
        done_first |= {(32, 3584, 2048, c.kernel_id, 0) for c in only if c.m == 32}
        nxt = triton_plan.plan_cells(mixed, cfgs, done_first, 0.0, one_class=True)
        self.assertEqual({c.m for c in nxt}, {1})

    def test_prior_order_is_a_permutation_with_the_likely_best_first(self):
        space = tc.tuner_space()
        for m, n in ((1, 5120), (32, 1280), (300, 8192), (16384, 28672)):
            cells = triton_plan.plan_cells([(m, n, 4096)], space, set(), 0.0, prior=True)
            self.assertEqual(sorted(c.kernel_id for c in cells), sorted(tc.kernel_id(c) for c in space))
            first = cells[0].config
            want_bm = {1: 16, 32: 32, 300: 128, 16384: 128}[m]
            want_bn = 64 if n <= 2048 else 128
            self.assertEqual((first.block_m, first.block_n, first.block_k, first.num_stages, first.num_warps,
                              first.group_m), (want_bm, want_bn, 128, 3, 4, 32))
        # the given order stays the default
        given = triton_plan.plan_cells([(16, 5120, 4096)], space[:10], set(), 0.0)
        self.assertEqual([c.config for c in given], space[:10])

    def test_done_file_tolerates_cut_line(self):
        c = plan.triton_cell(16, 5120, 5120, tc.VLLM_DEFAULT)
        row = {"M": 16, "N": 5120, "K": 5120, "kernelId": c.kernel_id, "recheck": 0}
        fd, path = tempfile.mkstemp()
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(row) + "\n" + '{"M": 16, "N": 51')
        self.addCleanup(os.remove, path)
        self.assertEqual(triton_plan.done_keys([path]), {(16, 5120, 5120, c.kernel_id, 0)})

    def test_result_lines_skip_bad_lines_for_the_planner_and_name_unreadable_files(self):
        c = plan.triton_cell(16, 5120, 5120, tc.VLLM_DEFAULT)
        row = json.dumps({"M": 16, "N": 5120, "K": 5120, "kernelId": c.kernel_id, "recheck": 0})
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        # a run stopped mid-line and resumed appends after the cut line: the planner skips it, as before
        resumed = os.path.join(d, "resumed.jsonl")
        with open(resumed, "w") as f:
            f.write("# a comment\n" + row[:20] + row + "\n" + row.replace("16", "32", 1) + "\n")
        self.assertEqual(triton_plan.done_keys([resumed]), {(32, 5120, 5120, c.kernel_id, 0)})
        self.assertEqual([n for n, _ in triton_plan.result_lines(resumed)], [3])
        with self.assertRaisesRegex(ValueError, r"^%s:1: not a harness result line" % resumed):
            list(triton_plan.result_lines(resumed, strict=True))
        # a gzip file cut short, and text that is not UTF-8: errors naming the file (and line)
        whole = gzip.compress((row + "\n").encode() * 500)
        cut = os.path.join(d, "cut.jsonl.gz")
        with open(cut, "wb") as f:
            f.write(whole[:len(whole) // 2])
        with self.assertRaisesRegex(ValueError, r"^%s: not a whole gzip file" % cut):
            triton_plan.done_keys([cut])
        latin = os.path.join(d, "latin.jsonl")
        with open(latin, "wb") as f:
            f.write(row.encode() + b"\n" + row.encode().replace(b"M", b"\xb5") + b"\n")
        with self.assertRaisesRegex(ValueError, r"^%s:2: not UTF-8 text" % latin):
            triton_plan.done_keys([latin])
        shapes = os.path.join(d, "shapes.csv")
        with open(shapes, "w") as f:
            f.write("N,K,M\n5120,5120,16\n")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = triton_plan.main(["--shapes", shapes, "--done", cut, "--out", os.path.join(d, "plan.jsonl")])
        self.assertEqual(rc, 2)
        self.assertRegex(err.getvalue(), r"^error: %s: not a whole gzip file.*\n$" % cut)

    def test_redo_estimates_plans_screened_cells_again(self):
        c = plan.triton_cell(16, 5120, 5120, tc.VLLM_DEFAULT)
        rows = [{"M": 16, "N": 5120, "K": 5120, "kernelId": c.kernel_id, "recheck": 0, "timing": "estimate"},
                {"M": 32, "N": 5120, "K": 5120, "kernelId": c.kernel_id, "recheck": 0, "timing": "graph"}]
        fd, path = tempfile.mkstemp()
        with os.fdopen(fd, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))
        self.addCleanup(os.remove, path)
        both = {(16, 5120, 5120, c.kernel_id, 0), (32, 5120, 5120, c.kernel_id, 0)}
        self.assertEqual(triton_plan.done_keys([path]), both)
        self.assertEqual(triton_plan.done_keys([path], redo_estimates=True), {(32, 5120, 5120, c.kernel_id, 0)})

    def test_shapes_file_errors(self):
        fd, path = tempfile.mkstemp(suffix=".csv")
        with os.fdopen(fd, "w") as f:
            f.write("N,K,M\n5120,5120,16\n5120,100,16\n")
        self.addCleanup(os.remove, path)
        with self.assertRaisesRegex(ValueError, ":3: .*multiple of 128"):
            triton_plan.read_shapes(path)


if __name__ == "__main__":
    unittest.main()
