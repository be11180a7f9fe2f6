import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import triton_rescreen  # noqa: E402


def row(m, name, us, timing="graph", status="ok", recheck=0):
    return {"M": m, "N": 4096, "K": 512, "kernelName": name, "us": us, "timing": timing, "status": status,
            "recheck": recheck}


class RescreenTest(unittest.TestCase):
    def write(self, rows):
        fd, path = tempfile.mkstemp(suffix=".jsonl")
        os.close(fd)
        self.addCleanup(os.remove, path)
        with open(path, "w") as f:
            f.write("# a comment line\n" + "".join(json.dumps(r) + "\n" for r in rows))
        return path

    def test_counts_against_the_earlier_best(self):
        before = self.write([
            row(8, "a", 10.0), row(8, "b", 40.0, timing="estimate"),  # an estimate is not a best
            row(8, "c", 9.0, recheck=1),  # nor is a recheck
            row(16, "a", 20.0),
        ])
        after = self.write([
            row(8, "b", 10.05), row(8, "c", 25.0, timing="estimate"), row(8, "d", 10.2),
            row(16, "b", 18.0), row(16, "c", 19.0, status="fail:out-of-resources"),
        ])
        rows, totals = triton_rescreen.report(triton_rescreen.best_graph([before]),
                                              triton_rescreen.later_cells([after]), 0.01)
        # M=8: 3 again, b and d graph-timed, b within 1% of 10.0 (10.05), d not (10.2); no new best.
        # M=16: b graph-timed at 18 < 20: within, new best 0.9; the failed cell is left out.
        self.assertEqual(rows, [((8, 4096, 512), 3, 2, 1, None), ((16, 4096, 512), 1, 1, 1, 0.9)])
        self.assertEqual(totals, [4, 3, 2, 1])

    def test_a_shape_never_timed_before_has_nothing_within(self):
        after = self.write([row(8, "a", 5.0)])
        rows, _ = triton_rescreen.report({}, triton_rescreen.later_cells([after]), 0.01)
        self.assertEqual(rows, [((8, 4096, 512), 1, 1, 0, None)])

    def test_missing_file_is_an_error(self):
        self.assertEqual(triton_rescreen.main(["--before", "/nonexistent/x.jsonl", "--after", "/nonexistent/y"]), 2)


if __name__ == "__main__":
    unittest.main()
