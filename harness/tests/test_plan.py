import json
import os
import tempfile
import os
import sys
import unittest

# The harness directory, so `bsbench` imports as the entry point imports it, however the tests are found.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bsbench import plan  # noqa: E402

GOOD = {"M": 16, "N": 5120, "K": 5120, "kernelId": 7, "splitK": 1, "kernelName": "a8w8_blockscale_x",
        "BLOCK_SIZE": 256, "MPerBLOCK": 16, "NPerBLOCK": 128, "KPerBLOCK": 256, "pipeline": 1, "recheck": 0}


class PlanTest(unittest.TestCase):
    def write(self, lines):
        fd, path = tempfile.mkstemp(suffix=".jsonl")
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.addCleanup(os.remove, path)
        return path

    def test_round_trip(self):
        c = plan.parse_cell(json.dumps(GOOD), "p:1")
        self.assertEqual((c.m, c.kernel_id, c.split_k, c.k_per_block), (16, 7, 1, 256))
        self.assertEqual(plan.parse_cell(c.to_json(), "p:1"), c)

    def test_errors_name_line_and_field(self):
        bad = dict(GOOD)
        del bad["KPerBLOCK"]
        path = self.write([json.dumps(GOOD), "", json.dumps(bad)])
        with self.assertRaises(plan.PlanError) as cm:
            plan.read_plan(path)
        self.assertIn(":3:", str(cm.exception))
        self.assertIn("KPerBLOCK", str(cm.exception))
        for field, value in (("M", 0), ("splitK", 9), ("recheck", 2), ("N", "5120"), ("kernelName", "")):
            b = dict(GOOD)
            b[field] = value
            with self.assertRaises(plan.PlanError, msg=field) as cm:
                plan.parse_cell(json.dumps(b), "f:9")
            self.assertIn(field, str(cm.exception))
        with self.assertRaises(plan.PlanError):
            plan.parse_cell("{not json", "f:1")

    def test_group_by_shape(self):
        cells = []
        for m, rc in ((16, 0), (16, 0), (32, 0), (16, 0), (16, 1)):
            d = dict(GOOD, M=m, recheck=rc)
            cells.append(plan.parse_cell(json.dumps(d), "x"))
        groups = plan.group_by_shape(cells)
        self.assertEqual([(k[0], k[3], len(g)) for k, g in groups], [(16, 0, 2), (32, 0, 1), (16, 0, 1), (16, 1, 1)])

    def test_result_line(self):
        c = plan.parse_cell(json.dumps(GOOD), "p:1")
        dev = {"gfx": "sm_90", "cu_num": 132, "name": "GPU", "backend": "cuda-13.0"}
        d = json.loads(plan.result_line(c, dev, "fail:compile"))
        self.assertEqual((d["status"], d["us"], d["kernelId"], d["splitK"], d["cu_num"]), ("fail:compile", None, 7, 1, 132))
        d = json.loads(plan.result_line(c, dev, "ok", timing={"us": 3.5, "reps": 20}, err_ratio=0.0))
        self.assertEqual((d["us"], d["reps"], d["errRatio"]), (3.5, 20, 0.0))


if __name__ == "__main__":
    unittest.main()
