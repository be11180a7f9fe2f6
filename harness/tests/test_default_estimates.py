"""measurements/h200/triton-heldout/default_estimates.py on hand-written journals and a compare CSV."""

import csv
import io
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "measurements", "h200", "triton-heldout"))
import default_estimates as de  # noqa: E402

D = de.VLLM_DEFAULT


def line(m, us, timing, name=D, status="ok"):
    return {"M": m, "N": 256, "K": 1024, "kernelName": name, "us": us, "timing": timing, "status": status}


COMPARE = """layer,M,N,K,policy,kernelId,splitK,lookup,status,us,default_us,tuned_us,oracle_us
x,1,256,1024,rule,triton:1,0,,ok,10,40,-,10
x,2,256,1024,rule,triton:1,0,,ok,10,20,-,10
x,4,256,1024,rule,triton:1,0,,ok,10,10,-,10
x,1,256,1024,default,triton:2,0,,missing,40,40,-,10
"""


class DefaultEstimatesTest(unittest.TestCase):
    def test_screens_across_journals(self):
        first = [line(1, 99.0, "estimate"), line(2, 50.0, "estimate"), line(4, 7.0, "estimate")]
        # The second journal times M 2 (so its screen is dropped) and screens M 1 again (the last screen wins);
        # another config's screen and a failed cell do not count.
        second = [line(2, 21.0, "graph"), line(1, 80.0, "estimate"), line(4, 1.0, "estimate", name="other"),
                  line(4, 2.0, "estimate", status="fail:errRatio")]
        self.assertEqual(de.screens(first + second, D), {(1, 256, 1024): 80.0, (4, 256, 1024): 7.0})

    def test_figures_by_hand(self):
        est = {(1, 256, 1024): 80.0, (4, 256, 1024): 5.0}
        n, charged, with_est, used, ratios = de.figures(csv.DictReader(io.StringIO(COMPARE)), "rule", est)
        # charged: 4, 2, 1 -> cube root of 8 = 2; with the screens: 8, 2, 0.5 -> cube root of 8 = 2 as well,
        # so check the parts: 2 screens used, estimate / charge 2 and 0.5.
        self.assertEqual((n, used), (3, 2))
        self.assertAlmostEqual(charged, 2.0)
        self.assertAlmostEqual(with_est, 2.0)
        self.assertEqual(sorted(ratios), [0.5, 2.0])
        n, charged, with_est, used, _ = de.figures(csv.DictReader(io.StringIO(COMPARE)), "rule",
                                                  {(1, 256, 1024): 80.0})
        self.assertAlmostEqual(with_est, (8 * 2 * 1) ** (1 / 3))
        with self.assertRaises(ValueError):
            de.figures(csv.DictReader(io.StringIO(COMPARE)), "nope", est)


if __name__ == "__main__":
    unittest.main()
