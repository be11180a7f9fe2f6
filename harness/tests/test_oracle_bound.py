"""measurements/h200/layer-sequence/oracle_bound.py on a hand-written layer and journal."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "measurements", "h200", "layer-sequence"))
import oracle_bound  # noqa: E402

HEADER = "M,N,K,libtype,kernelId,splitK,us,status,recheck\n"


class OracleBoundTest(unittest.TestCase):
    def run_main(self, layers, journal):
        with tempfile.TemporaryDirectory() as d:
            lp, jp = os.path.join(d, "layer.csv"), os.path.join(d, "j.csv")
            with open(lp, "w") as f:
                f.write(layers)
            with open(jp, "w") as f:
                f.write(journal)
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = oracle_bound.main(["oracle_bound.py", lp, jp])
        return rc, out.getvalue(), err.getvalue()

    def test_sums_the_best_of_each_gemm_against_vendor(self):
        layers = "# a comment\nname,N,K\na,256,512\nb,512,256\n"
        journal = HEADER + "".join([
            "1,256,512,vendor,0,0,10.0,ok,0\n",
            "1,256,512,ck,3,0,8.0,ok,0\n",
            "1,256,512,ck,4,1,1.0,ok,1\n",        # a recheck: not a first measurement
            "1,256,512,ck,5,0,0.5,fail:errRatio,0\n",  # not ok
            "1,512,256,vendor,0,0,5.0,ok,0\n",
            "1,512,256,ck,3,0,6.0,ok,0\n",
            "2,256,512,vendor,0,0,10.0,ok,0\n",   # M = 2 lacks b's vendor row
        ])
        rc, out, err = self.run_main(layers, journal)
        self.assertEqual(rc, 0, err)
        # M = 1: vendor 10 + 5 = 15, oracle 8 + 5 = 13.
        self.assertIn("     1         15.0         13.0    1.154", out)
        self.assertIn("     2  no vendor row for b", out)
        self.assertIn("geomean vendor / oracle over 1 M: 1.154", out)

    def test_bad_input_is_one_error(self):
        rc, out, err = self.run_main("name,N,K\na,256,512\n", "M,N\n1,256\n")
        self.assertEqual(rc, 2)
        self.assertIn("not a journal", err)
        rc, out, err = self.run_main("name,N,K\n", HEADER)
        self.assertEqual(rc, 2)
        self.assertIn("no GEMM rows", err)
        rc, out, err = self.run_main("name,N,K\na,abc,512\n", HEADER)
        self.assertEqual(rc, 2)
        self.assertIn("layer.csv: not a layer list", err)
        rc = oracle_bound.main(["oracle_bound.py", "/nonexistent/layer.csv", "/nonexistent/j.csv"])
        self.assertEqual(rc, 2)


if __name__ == "__main__":
    unittest.main()
