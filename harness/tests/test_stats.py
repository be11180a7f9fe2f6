import math
import os
import sys
import unittest

# The harness directory, so `bsbench` imports as the entry point imports it, however the tests are found.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bsbench import stats  # noqa: E402


class StatsTest(unittest.TestCase):
    def test_err_ratio(self):
        ref = [1.0, 100.0, 0.0, -2.0]
        # tolerances: 0.02, 1.01, 0.01, 0.03
        out = [1.015, 101.5, 0.011, -2.02]
        # |d| = 0.015 ok, 1.5 > 1.01 bad, 0.011 > 0.01 bad, 0.02 ok
        self.assertAlmostEqual(stats.err_ratio(out, ref), 0.5)
        self.assertEqual(stats.err_ratio(ref, ref), 0.0)

    def test_nan_is_never_close(self):
        self.assertEqual(stats.err_ratio([float("nan"), 1.0], [1.0, 1.0]), 0.5)
        self.assertEqual(stats.err_ratio([float("nan")], [float("nan")]), 1.0)

    def test_err_ratio_length_mismatch(self):
        with self.assertRaises(ValueError):
            stats.err_ratio([1.0], [1.0, 2.0])

    def test_percentiles(self):
        xs = [5.0, 1.0, 3.0, 2.0, 4.0]
        self.assertEqual(stats.median(xs), 3.0)
        self.assertEqual(stats.percentile(xs, 0), 1.0)
        self.assertEqual(stats.percentile(xs, 100), 5.0)
        self.assertAlmostEqual(stats.percentile(xs, 10), 1.4)
        self.assertEqual(stats.median([1.0, 2.0]), 1.5)
        s = stats.summarize(xs)
        self.assertEqual((s["us"], s["us_min"], s["us_max"], s["reps"]), (3.0, 1.0, 5.0, 5))

    def test_tflops(self):
        # 2*4096*5120*5120 flop in 320 us = 671.1 TFLOP/s
        self.assertAlmostEqual(stats.tflops(4096, 5120, 5120, 320.0), 2 * 4096 * 5120 * 5120 / 320e6)
        self.assertTrue(math.isclose(stats.gbps(1e9, 1e3), 1000.0))

    def test_screen_uses_the_fastest_warm_up(self):
        # best 10 us, cutoff 2: a cell is screened only when even its fastest launch exceeds 20 us
        self.assertTrue(stats.screened([21.0, 80.0], 10.0, 2.0))
        # one launch delayed by host work (80 us) beside a fast one (12 us): measured, not screened
        self.assertFalse(stats.screened([80.0, 12.0], 10.0, 2.0))
        self.assertFalse(stats.screened([20.0, 20.0], 10.0, 2.0))  # exactly at the cutoff: measured
        self.assertFalse(stats.screened([500.0, 500.0], None, 2.0))  # no best yet
        self.assertFalse(stats.screened([500.0, 500.0], 10.0, 0.0))  # screening off
        self.assertFalse(stats.screened([], 10.0, 2.0))


if __name__ == "__main__":
    unittest.main()
