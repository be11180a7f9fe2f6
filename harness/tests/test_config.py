import os
import sys
import unittest

# The harness directory, so `bsbench` imports as the entry point imports it, however the tests are found.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bsbench import config  # noqa: E402


class MappingTest(unittest.TestCase):
    def test_parse_and_apply(self):
        m = config.parse_mapping("64:2:3")
        # Instance 0: BlockSize 256, 128x128x128, pipeline v3.
        c = config.launch_config(128, 128, 128, 256, 3, m)
        self.assertEqual(c.key(), (128, 128, 128, 4, 3))
        # Instance 7: 16x128x256, v1.
        c = config.launch_config(16, 128, 256, 256, 1, m)
        self.assertEqual(c.key(), (16, 128, 256, 4, 2))
        c = config.launch_config(16, 128, 256, 256, 1, config.parse_mapping("32:3:4"))
        self.assertEqual((c.num_warps, c.num_stages), (8, 3))

    def test_default_mapping_parses(self):
        config.parse_mapping(config.DEFAULT_MAPPING_TEXT)

    def test_bad_mappings(self):
        for text in ("64:2", "48:2:3", "64:x:3", "64:0:3", "64:2:9"):
            with self.assertRaises(ValueError, msg=text):
                config.parse_mapping(text)

    def test_bad_params(self):
        m = config.parse_mapping("64:2:3")
        with self.assertRaises(ValueError):
            config.launch_config(16, 128, 192, 256, 1, m)  # KPerBLOCK not a multiple of 128
        with self.assertRaises(ValueError):
            config.launch_config(24, 128, 128, 256, 1, m)  # not a power of two
        with self.assertRaises(ValueError):
            config.launch_config(16, 128, 128, 256, 2, m)  # no pipeline v2
        with self.assertRaises(ValueError):
            config.launch_config(16, 128, 128, 96, 1, m)  # BlockSize not a multiple of 64


class SplitTest(unittest.TestCase):
    def test_levels_hand_computed(self):
        # M=16, N=5120, 16x128 tile: 1*40 = 40 tiles; 40 < 132, 80 < 132, 160 >= 132 -> levels 0,1,2.
        self.assertEqual(config.split_levels(16, 5120, 5120, 16, 128, 256, 132), [0, 1, 2])
        # 16x256 tile at N=5120: 20 tiles; 20, 40, 80 all < 132 -> 0..3.
        self.assertEqual(config.split_levels(1, 5120, 5120, 16, 256, 128, 132), [0, 1, 2, 3])
        # 132 tiles exactly: no split.
        self.assertEqual(config.split_levels(128 * 66, 256, 4096, 128, 128, 128, 132), [0])
        # 128x128 at M=256, N=5120: 2*40 = 80 < 132 -> level 1 only (160 >= 132).
        self.assertEqual(config.split_levels(256, 5120, 5120, 128, 128, 128, 132), [0, 1])
        # K=512, KPerBLOCK 256: 2 steps -> at most KBatch 2.
        self.assertEqual(config.split_levels(1, 256, 512, 16, 128, 256, 132), [0, 1])
        # K=256, KPerBLOCK 256: one step -> no split.
        self.assertEqual(config.split_levels(1, 256, 256, 16, 128, 256, 132), [0])

    def test_ranges_even(self):
        # K=4096, KPerBLOCK 256: 32 groups, 16 steps; KBatch 4 -> 4 steps = 8 groups each.
        self.assertEqual(config.split_ranges(4096, 256, 2), [(0, 8), (8, 16), (16, 24), (24, 32)])
        self.assertEqual(config.split_ranges(4096, 128, 0), [(0, 32)])

    def test_ranges_uneven(self):
        # K=5120, KPerBLOCK 256: 40 groups, 20 steps; KBatch 8 -> 3 steps (6 groups) each, 7 splits.
        r = config.split_ranges(5120, 256, 3)
        self.assertEqual(r[0], (0, 6))
        self.assertEqual(r[-1], (36, 40))
        self.assertEqual(len(r), 7)
        # contiguous, covering, every split starting on a step boundary
        self.assertEqual(r[0][0], 0)
        for a, b in zip(r, r[1:]):
            self.assertEqual(a[1], b[0])
            self.assertEqual(b[0] % 2, 0)
        # K=12800 (100 groups), KPerBLOCK 256, KBatch 8: 50 steps -> 7 steps (14 groups) each, last 2 groups.
        r = config.split_ranges(12800, 256, 3)
        self.assertEqual(len(r), 8)
        self.assertEqual(r[-1], (98, 100))
        self.assertEqual(config.groups_per_split(12800, 256, 3), 14)

    def test_ranges_deep_splits(self):
        # The levels of `synth bench --split-k aiter` (up to 5, KBatch 32). K=16384, KPerBLOCK 128: 128
        # steps -> 4 steps (4 groups) each, 32 splits.
        r = config.split_ranges(16384, 128, 5)
        self.assertEqual(len(r), 32)
        self.assertEqual(r[1], (4, 8))
        # K=7168 (56 groups), KBatch 32: 2 steps each -> 28 splits, fewer than KBatch.
        r = config.split_ranges(7168, 128, 5)
        self.assertEqual((len(r), r[-1]), (28, (54, 56)))
        # K=12288 with KPerBLOCK 256: 48 steps, KBatch 16 -> 3 steps (6 groups) each, 16 splits.
        self.assertEqual(config.groups_per_split(12288, 256, 4), 6)
        self.assertEqual(len(config.split_ranges(12288, 256, 4)), 16)

    def test_ranges_odd_groups(self):
        # K=384: 3 groups; KPerBLOCK 256 -> 2 steps (the last half full); KBatch 2 -> (0,2), (2,3).
        self.assertEqual(config.split_ranges(384, 256, 1), [(0, 2), (2, 3)])
        with self.assertRaises(ValueError):
            config.split_ranges(300, 128, 0)


class BufferTest(unittest.TestCase):
    def test_sets(self):
        l2 = 60 * 1024 * 1024
        # M=1, N=K=5120: 26.2 MB of weights + small -> 8 sets exceed 180 MiB (7 would not).
        per = config.set_bytes(1, 5120, 5120, False)
        self.assertEqual(per, 5120 + 5120 * 5120 + 4 * 40 + 4 * 40 * 40 + 2 * 5120)
        n = config.buffer_sets(1, 5120, 5120, False, l2)
        self.assertGreater(n * per, 3 * l2)
        self.assertLessEqual((n - 1) * per, 3 * l2)
        # One set larger than 3x L2: a single set.
        self.assertEqual(config.buffer_sets(16384, 25600, 5120, False, l2), 1)
        # The workspace counts.
        self.assertGreater(config.set_bytes(64, 5120, 5120, True), config.set_bytes(64, 5120, 5120, False))


if __name__ == "__main__":
    unittest.main()
