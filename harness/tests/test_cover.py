import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import triton_cover  # noqa: E402


class CoverTest(unittest.TestCase):
    def test_exact_cover_is_smallest_and_ties_go_to_the_key(self):
        covers = {"a": frozenset({1, 2}), "b": frozenset({2, 3}), "c": frozenset({3}), "d": frozenset({1}),
                  "e": frozenset({4}), "f": frozenset({1, 4})}
        # {1, 2, 3, 4} needs 2 sets; the 2-set covers are {a,?} impossible (a misses 3 and 4): {b, f} only
        self.assertEqual(triton_cover.exact_cover({1, 2, 3, 4}, covers, lambda cs: cs), ("b", "f"))
        # {1, 2, 3}: {a, b}, {a, c}, {b, d}, {b, f}; the key picks the least tuple
        self.assertEqual(triton_cover.exact_cover({1, 2, 3}, covers, lambda cs: cs), ("a", "b"))
        self.assertEqual(triton_cover.exact_cover({1, 2, 3}, covers, lambda cs: ("f" not in cs, cs)), ("b", "f"))

    def test_a_shape_nothing_covers_is_an_error(self):
        with self.assertRaises(ValueError):
            triton_cover.exact_cover({1, 9}, {"a": frozenset({1})}, lambda cs: cs)

    def test_greedy_would_be_larger(self):
        # greedy takes the 3-element set first and then needs two more; the optimum is 2
        covers = {"big": frozenset({2, 3, 4}), "l": frozenset({1, 2, 3}), "r": frozenset({4, 5, 6}),
                  "x": frozenset({1}), "y": frozenset({5, 6})}
        self.assertEqual(len(triton_cover.exact_cover({1, 2, 3, 4, 5, 6}, covers, lambda cs: cs)), 2)


if __name__ == "__main__":
    unittest.main()
