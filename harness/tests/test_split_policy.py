"""measurements/zoo/split_policy.py on a hand-written journal: the grid condition's levels and the best leaf."""

import csv
import io
import os
import sys
import unittest
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "measurements", "zoo"))
import split_policy  # noqa: E402

NAME = "a8w8_blockscale_1x128x128_256x64x128x128_16x16_32x32_2x2_8x32x1_8x32x1_1x32x1x8_8_1x1_intrawave_v3"
HEAD = "cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,timing,status\n"


def row(m, s, us, status="ok", timing="graph"):
    return "8,%d,256,1024,ck,2,%d,%s,%s,%s,%s\n" % (m, s, us, NAME, timing, status)


class SplitPolicyTest(unittest.TestCase):
    def test_levels_by_hand(self):
        tile = (64, 128, 128)
        # 8 CUs. M 1, N 256: 1 x 2 = 2 tiles; level s needs 2 * 2^(s-1) < 8 (s <= 2) and 1024 / 128 = 8 >= 2^s
        # (s <= 3): deepest 2; fill: 2 * 2^s >= 8 first at s = 2.
        self.assertEqual(split_policy.deepest(1, 256, 1024, tile, 8), 2)
        self.assertEqual(split_policy.fill(1, 256, 1024, tile, 8), 2)
        # M 128: 2 x 2 = 4 tiles: level 1 only (4 < 8, 8 >= 8 fails level 2); fill reaches 8 at s = 1.
        self.assertEqual(split_policy.deepest(128, 256, 1024, tile, 8), 1)
        self.assertEqual(split_policy.fill(128, 256, 1024, tile, 8), 1)
        # M 512: 8 x 2 = 16 tiles: no split.
        self.assertEqual(split_policy.deepest(512, 256, 1024, tile, 8), 0)
        self.assertEqual(split_policy.tile_of(NAME), tile)

    def test_computed_level_beats_any_fixed_one(self):
        # The best cell is level 2 at M 1 and level 1 at M 128: no fixed level is best at both (a fixed
        # level 2 runs unsplit at M 128, where the grid refuses it), the deepest allowed level is.
        text = HEAD + row(1, 0, 40) + row(1, 1, 20) + row(1, 2, 10) + row(128, 0, 30) + row(128, 1, 15) \
            + row(128, 1, 1, status="fail:errRatio") + row(1, 2, 2, timing="estimate")
        lat, tiles = defaultdict(dict), {}
        self.assertEqual(split_policy.read_rows(csv.DictReader(io.StringIO(text)), lat, tiles), {("?", 8)})
        self.assertEqual(lat[(256, 1024, 1)], {(2, 0): 40.0, (2, 1): 20.0, (2, 2): 10.0})
        [(nk, fixed, both)] = split_policy.summary(lat, tiles, 8)
        self.assertEqual(nk, (256, 1024))
        # fixed s1: 10/20 at M 1, 15/15 at M 128 -> sqrt(0.5); fixed s2: 1 at M 1, 15/30 at M 128 -> same;
        # the later name wins a tie in max(), so only the value is checked.
        self.assertAlmostEqual(fixed[0], 0.5 ** 0.5)
        # with computed levels: "max" and "fill" are both best everywhere (ties go to the larger name).
        self.assertEqual(both, (1.0, 2, "max"))

    def test_a_file_without_journal_columns_is_one_error_naming_the_column(self):
        import contextlib
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "notes.csv")
            with open(path, "w") as f:
                f.write("name,value\na,1\n")
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                self.assertEqual(split_policy.main(["split_policy.py", path]), 2)
        self.assertIn("no column 'status'", err.getvalue())


if __name__ == "__main__":
    unittest.main()
