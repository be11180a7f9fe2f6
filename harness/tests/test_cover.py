import contextlib
import io
import json
import os
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import triton_cover  # noqa: E402


def _put(d, name, text):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def _space_lines(rows):
    """Journal lines of (M, config, us, timing) cells of one (N, K) = (256, 256)."""
    return "".join(json.dumps({"libtype": "triton", "M": m, "N": 256, "K": 256, "kernelName": c, "us": us,
                               "status": "ok", "timing": t}) + "\n" for m, c, us, t in rows)


def _main(args):
    """(exit status, stderr, stdout) of triton_cover.main(args)."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        rc = triton_cover.main(args)
    return rc, err.getvalue(), out.getvalue()


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

    def test_the_incumbent_is_kept_while_some_of_it_is_a_minimum_cover(self):
        covers = {"a": frozenset({1, 2}), "b": frozenset({2, 3}), "c": frozenset({3}), "d": frozenset({1}),
                  "e": frozenset({2})}
        key = lambda cs: cs  # noqa: E731
        # the best 2-cover of {1, 2, 3} is (a, b); the incumbent's (b, d) is another 2-cover: kept, with the
        # incumbent's extra name (not in any cover) left out
        self.assertEqual(triton_cover.choose({1, 2, 3}, covers, key, ["d", "b", "vllm_default"]),
                         (("b", "d"), "incumbent", ("a", "b")))
        # (c, d) misses 2; (c, d, e) covers with three, one more than the minimum: the best is kept
        self.assertEqual(triton_cover.choose({1, 2, 3}, covers, key, ["c", "d", "e"]),
                         (("a", "b"), "best", ("a", "b")))
        self.assertEqual(triton_cover.choose({1, 2, 3}, covers, key, ["c", "d"]), (("a", "b"), "best", ("a", "b")))
        self.assertEqual(triton_cover.choose({1, 2, 3}, covers, key), (("a", "b"), "best", ("a", "b")))

    def test_main_keeps_the_incumbent_and_reports_the_best_cover(self):
        with tempfile.TemporaryDirectory() as d:
            def put(name, text):
                return _put(d, name, text)
            # two shapes, configs x (best on 1), y (best on 2), z (within 1% of both, slower than x on 1)
            rows = [(1, "x", 10.0), (1, "y", 20.0), (1, "z", 10.05), (2, "x", 30.0), (2, "y", 10.0),
                    (2, "z", 10.09)]
            space = put("space.jsonl", _space_lines((m, c, us, "graph") for m, c, us in rows))
            shapes = put("s.csv", "M,N,K\n1,256,256\n2,256,256\n")
            kept = put("kept.txt", "# in use\nx\ny\n")
            out = os.path.join(d, "cover.json")
            # the single-config cover {z} beats the incumbent's two: the incumbent is not kept
            args = ["--space", space, "--sample", shapes, "--validate", shapes, "--space-size", "3", "--out", out]
            self.assertEqual(triton_cover.main(args + ["--incumbent", kept]), 0)
            with open(out) as f:
                r = json.load(f)
            self.assertEqual((r["kept"], r["kept_from"], r["best_cover"]), (["z"], "best", ["z"]))
            kept = put("kept.txt", "z\nx\n")
            self.assertEqual(triton_cover.main(args + ["--incumbent", kept]), 0)
            with open(out) as f:
                r = json.load(f)
            self.assertEqual((r["kept"], r["kept_from"]), (["z"], "incumbent"))
            self.assertAlmostEqual(r["sample_loss_geomean"], (1.005 * 1.009) ** 0.5)
            typo = put("typo.txt", "z\nx_typo\n")
            self.assertEqual(triton_cover.main(args + ["--incumbent", typo]), 2)
            empty = put("none.txt", "# nothing\n")
            self.assertEqual(triton_cover.main(args + ["--incumbent", empty]), 2)

    def test_score_reports_a_given_set_and_searches_no_cover(self):
        with tempfile.TemporaryDirectory() as d:
            def put(name, text):
                return _put(d, name, text)
            # shape 1: x 10, y 12 (set {y}: loss 1.2); shape 2: y screened at 50 against x's 20 (every config
            # of the set screened: the estimate's loss 2.5); shape 3 lacks z's row (not the whole space)
            rows = [(1, "x", 10.0, "graph"), (1, "y", 12.0, "graph"), (1, "z", 11.0, "graph"),
                    (2, "x", 20.0, "graph"), (2, "y", 50.0, "estimate"), (2, "z", 25.0, "graph"),
                    (3, "x", 5.0, "graph"), (3, "y", 5.0, "graph")]
            space = put("space.jsonl", _space_lines(rows))
            sample = put("s.csv", "M,N,K\n1,256,256\n3,256,256\n")
            validate = put("v.csv", "M,N,K\n2,256,256\n")
            out = os.path.join(d, "score.json")
            args = ["--space", space, "--sample", sample, "--validate", validate, "--space-size", "3", "--out", out]
            self.assertEqual(triton_cover.main(args + ["--score", put("set.txt", "# another card's\ny\n")]), 0)
            with open(out) as f:
                r = json.load(f)
            self.assertEqual((r["kept"], r["kept_from"], r["best_cover"]), (["y"], "score", None))
            self.assertEqual(r["sample_left"], [[3, 256, 256]])
            self.assertAlmostEqual(r["sample_loss_geomean"], 1.2)
            self.assertEqual([(v["kept_pick"], v["kept_timing"]) for v in r["validation"]], [("y", "estimate")])
            self.assertAlmostEqual(r["validation_loss_geomean"], 2.5)
            # the cover itself still refuses the incomplete sample shape
            self.assertEqual(triton_cover.main(args), 2)
            self.assertEqual(triton_cover.main(args + ["--score", put("typo.txt", "y_typo\n")]), 2)
            bad = put("bad.jsonl", '{"libtype": "triton", "N": 256, "K": 256, "kernelName": "x"}\n')
            self.assertEqual(triton_cover.main(args + ["--score", put("y.txt", "y\n"), "--space", space, bad]), 2)
            nowhere = args[:-1] + [os.path.join(d, "no", "such", "dir", "o.json")]
            self.assertEqual(triton_cover.main(nowhere + ["--score", put("y.txt", "y\n")]), 2)
            both = ["--score", put("a.txt", "y\n"), "--incumbent", put("b.txt", "y\n")]
            self.assertEqual(triton_cover.main(args + both), 2)
            only3 = put("s3.csv", "M,N,K\n3,256,256\n")
            args[3] = only3
            self.assertEqual(triton_cover.main(args + ["--score", put("c.txt", "y\n")]), 2)

    def test_other_space_covers_both_cards(self):
        with tempfile.TemporaryDirectory() as d:
            # card A: z within 1% of x on shape 1, y best on 2 and w within 1% of it; card B: z 5% behind x on
            # shape 1, w best on 2 and y 2% behind it; shape 3 measured on card B only, and not in full
            a = _put(d, "a.jsonl", _space_lines([
                (1, "x", 10.0, "graph"), (1, "y", 30.0, "graph"), (1, "z", 10.05, "graph"), (1, "w", 30.0, "graph"),
                (2, "x", 30.0, "graph"), (2, "y", 10.0, "graph"), (2, "z", 30.0, "graph"), (2, "w", 10.05, "graph")]))
            b = _put(d, "b.jsonl", _space_lines([
                (1, "x", 10.0, "graph"), (1, "y", 30.0, "graph"), (1, "z", 10.5, "graph"), (1, "w", 30.0, "graph"),
                (2, "x", 30.0, "graph"), (2, "y", 10.2, "graph"), (2, "z", 30.0, "graph"), (2, "w", 10.0, "graph"),
                (3, "x", 9.0, "graph")]))
            shapes = _put(d, "s.csv", "M,N,K\n1,256,256\n2,256,256\n")
            val = _put(d, "v.csv", "M,N,K\n3,256,256\n")
            out = os.path.join(d, "cover.json")
            args = ["--space", a, "--sample", shapes, "--validate", val, "--space-size", "4", "--out", out]
            # card A alone: {x, y}, every loss 1.0
            self.assertEqual(triton_cover.main(args), 0)
            with open(out) as f:
                self.assertEqual(json.load(f)["kept"], ["x", "y"])
            # both cards: card B needs w on shape 2; shape 3 (validation) is left out on both cards
            self.assertEqual(triton_cover.main(args + ["--other-space", b]), 0)
            with open(out) as f:
                r = json.load(f)
            self.assertEqual(r["kept"], ["w", "x"])
            self.assertEqual(r["other_space_left"], [[3, 256, 256]])
            self.assertEqual([(x["space"], x["sample_shapes"]) for x in r["by_space"]], [(0, 2), (1, 2)])
            self.assertEqual(sorted((x["M"], x["space"]) for x in r["sample"]), [(1, 0), (1, 1), (2, 0), (2, 1)])
            # scored: {z, y} is within 1% on card A and 5% / 2% behind on card B
            self.assertEqual(triton_cover.main(args + ["--other-space", b, "--score", _put(d, "zy.txt", "z\ny\n")]), 0)
            with open(out) as f:
                r = json.load(f)
            self.assertAlmostEqual(r["by_space"][0]["sample_loss_geomean"], 1.005 ** 0.5)
            self.assertAlmostEqual(r["by_space"][1]["sample_loss_geomean"], (1.05 * 1.02) ** 0.5)
            # a validation shape without an ok row (every config refused): one error, with both cards too
            fails = _put(d, "f.jsonl", "".join(json.dumps(
                {"libtype": "triton", "M": 4, "N": 256, "K": 256, "kernelName": c, "us": 0.0,
                 "status": "fail:out-of-resources", "timing": ""}) + "\n" for c in "wxyz"))
            v4 = _put(d, "v4.csv", "M,N,K\n4,256,256\n")
            args[5] = v4
            self.assertEqual(triton_cover.main(args + ["--space", a, fails]), 2)
            self.assertEqual(triton_cover.main(args + ["--space", a, fails, "--other-space", b, fails]), 2)
            args[3] = v4  # the same shape as the sample: no best to cover
            self.assertEqual(triton_cover.main(args + ["--space", a, fails]), 2)


    def _two_shapes(self, d, patch=None, line=0):
        """A space of two shapes x configs x, y (3 configs counted with --space-size 2), sample = validation;
        ``patch`` updates the row of journal line ``line`` + 1. The args of a cover into d/cover.json."""
        rows = [(1, "x", 10.0, "graph"), (1, "y", 20.0, "graph"), (2, "x", 30.0, "graph"), (2, "y", 10.0, "graph")]
        lines = _space_lines(rows).splitlines()
        if patch:
            r = json.loads(lines[line])
            r.update(patch)
            lines[line] = json.dumps(r)
        space = _put(d, "space.jsonl", "\n".join(lines) + "\n")
        shapes = _put(d, "s.csv", "M,N,K\n1,256,256\n2,256,256\n")
        return ["--space", space, "--sample", shapes, "--validate", shapes, "--space-size", "2",
                "--out", os.path.join(d, "cover.json")], space

    def test_latencies_that_are_no_times_are_errors_naming_file_and_line(self):
        with tempfile.TemporaryDirectory() as d:
            args, space = self._two_shapes(d)
            self.assertEqual(_main(args)[0], 0)
            for patch in ({"us": 0}, {"us": 0.0}, {"us": -1}, {"us": float("nan")}, {"us": float("inf")},
                          {"us": "5"}, {"us": None}, {"us": True}, {"us": -3.0, "timing": "estimate"}):
                args, space = self._two_shapes(d, patch, line=2)
                if os.path.exists(args[-1]):
                    os.remove(args[-1])
                rc, err, _ = _main(args)
                self.assertEqual(rc, 2, patch)
                self.assertRegex(err, r"^error: %s:3: us = .*: expected a finite positive time" % space)
                self.assertEqual(err.count("\n"), 1)
                self.assertFalse(os.path.exists(args[-1]))
                with self.assertRaisesRegex(ValueError, r"^%s:3: us = " % space):
                    triton_cover.read_space([space], {})
            # sizes that are not positive integers, a missing or empty config name
            for patch, what in (({"M": 1.9}, "M, N, K"), ({"K": 0}, "M, N, K"), ({"N": "256"}, "M, N, K"),
                                ({"kernelName": ""}, "kernelName"), ({"kernelName": None}, "kernelName")):
                args, space = self._two_shapes(d, patch, line=1)
                rc, err, _ = _main(args)
                self.assertEqual(rc, 2, patch)
                self.assertRegex(err, r"^error: %s:2: %s = " % (space, what))
            # a failed cell has no time to check (shape 1 is then y's alone)
            args, space = self._two_shapes(d, {"status": "fail:out-of-resources", "us": None, "timing": ""}, 0)
            self.assertEqual(_main(args)[0], 0)
            with open(args[-1]) as f:
                self.assertEqual(json.load(f)["kept"], ["y"])

    def test_bad_lines_are_errors_but_a_cut_last_line(self):
        with tempfile.TemporaryDirectory() as d:
            args, space = self._two_shapes(d)
            with open(space) as f:
                lines = f.read().splitlines()
            _put(d, "space.jsonl", "\n".join(lines[:1] + [lines[1][:50]] + lines[2:]) + "\n")
            rc, err, _ = _main(args)
            self.assertEqual(rc, 2)
            self.assertRegex(err, r"^error: %s:2: not a harness result line" % space)
            _put(d, "space.jsonl", "\n".join(lines) + "\n" + lines[0][:50])
            rc, err, _ = _main(args)
            self.assertEqual(rc, 0)
            self.assertIn("%s:5: the last line is cut off" % space, err)

    def test_tolerance_must_be_finite_and_not_negative(self):
        with tempfile.TemporaryDirectory() as d:
            args, _ = self._two_shapes(d)
            for t in ("nan", "-1", "-0.01", "inf"):
                rc, err, _ = _main(args + ["--tolerance", t])
                self.assertEqual(rc, 2, t)
                self.assertEqual(err, "error: --tolerance %s: expected a finite share >= 0 (0.01: within 1%% of "
                                      "the best)\n" % float(t))
                self.assertFalse(os.path.exists(args[-1]))
            self.assertEqual(_main(args + ["--tolerance", "0"])[0], 0)

    def test_out_that_cannot_be_written_is_refused_and_no_part_file_is_left(self):
        with tempfile.TemporaryDirectory() as d:
            args, space = self._two_shapes(d)
            od = os.path.join(d, "od")
            os.mkdir(od)
            rc, err, _ = _main(args[:-1] + [od])
            self.assertEqual(rc, 2)
            self.assertEqual(err, "error: --out %s: not a regular file (a directory or a device): name the JSON "
                                  "file to write\n" % od)
            self.assertFalse(os.path.exists(od + ".part"))
            self.assertEqual(os.listdir(od), [])
            nowhere = os.path.join(d, "no", "o.json")
            rc, err, _ = _main(args[:-1] + [nowhere])
            self.assertEqual((rc, err), (2, "error: --out %s: the directory %s does not exist\n"
                                         % (nowhere, os.path.dirname(nowhere))))
            # an input (the sample CSV) is not replaced
            with open(args[3]) as f:
                sample = f.read()
            rc, err, _ = _main(args[:-1] + [args[3]])
            self.assertEqual(rc, 2)
            self.assertIn("is the input", err)
            with open(args[3]) as f:
                self.assertEqual(f.read(), sample)
            # a failure while writing or renaming leaves neither --out nor the .part file
            out = args[-1]
            with mock.patch.object(triton_cover.os, "replace", side_effect=OSError(28, "No space left on device")):
                rc, err, _ = _main(args)
            self.assertEqual(rc, 2)
            self.assertIn("error: cannot write %s" % out, err)
            self.assertFalse(os.path.exists(out) or os.path.exists(out + ".part"))
            with mock.patch.object(triton_cover.json, "dump", side_effect=KeyboardInterrupt):
                with self.assertRaises(KeyboardInterrupt):
                    _main(args)
            self.assertFalse(os.path.exists(out) or os.path.exists(out + ".part"))
            self.assertEqual(_main(args)[0], 0)
            self.assertEqual(sorted(os.listdir(d)), ["cover.json", "od", "s.csv", "space.jsonl"])

if __name__ == "__main__":
    unittest.main()
