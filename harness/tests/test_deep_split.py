"""measurements/zoo/deep_split.py on a hand-written journal: the ratios and the M where deeper levels win."""

import csv
import io
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "measurements", "zoo"))
import deep_split  # noqa: E402

ROWS = """M,N,K,splitK,us,status,recheck
1,256,8192,0,40,ok,0
1,256,8192,3,10,ok,0
1,256,8192,5,8,ok,0
1,256,8192,5,1,ok,1
4,256,8192,3,10,ok,0
4,256,8192,4,20,ok,0
4,256,8192,5,5,fail:errRatio,0
"""


class DeepSplitTest(unittest.TestCase):
    def test_ratios_by_hand(self):
        best = deep_split.best_times(csv.DictReader(io.StringIO(ROWS)))
        # M 1: best <= 3 is 10 us, best overall 8 (the recheck's 1 us and the failed cell do not count);
        # M 4: level 3 is the best (10 us), ratio 1.
        self.assertEqual(best[(256, 8192, 1)], {0: 40.0, 3: 10.0, 5: 8.0})
        [(n, k, geo, top, at, deeper)] = deep_split.summary(best)
        self.assertEqual((n, k, at, deeper), (256, 8192, 1, [1]))
        self.assertAlmostEqual(top, 1.25)
        self.assertAlmostEqual(geo, 1.25 ** 0.5)


if __name__ == "__main__":
    unittest.main()
