import contextlib
import csv
import gzip
import io
import json
import os
import shutil
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import triton_journal  # noqa: E402


def row(m, us, timing="graph", status="ok", device="NVIDIA H200", recheck=0):
    return {"gfx": "sm_90", "cu_num": 132, "M": m, "N": 4096, "K": 512, "libtype": "triton", "kernelId": 67703222,
            "splitK": 0, "us": us, "kernelName": "triton_bm64_bn128_bk128_g32_w4_s2", "tflops": 1.0, "bw": 2.0,
            "errRatio": 0.0, "us_min": us, "us_max": us, "us_p10": us, "us_p90": us, "reps": 20, "status": status,
            "recheck": recheck, "device": device, "backend": "cuda-13.0", "timing": timing}


class JournalTest(unittest.TestCase):
    def write(self, rows, gz=False):
        fd, path = tempfile.mkstemp(suffix=".jsonl.gz" if gz else ".jsonl")
        os.close(fd)
        self.addCleanup(os.remove, path)
        text = "".join(json.dumps(r) + "\n" for r in rows) + '{"M": 1, "N"'  # a cut last line is skipped
        if gz:
            with gzip.open(path, "wt") as f:
                f.write(text)
        else:
            with open(path, "w") as f:
                f.write(text)
        return path

    def test_estimates_left_out_later_rows_win_failures_kept_empty(self):
        a = self.write([row(1, 5.0), row(2, 80.0, timing="estimate"), row(4, 9.0)], gz=True)
        b = self.write([row(4, 7.0), row(8, 0.0, status="fail:out-of-resources"), row(1, 5.5, recheck=1)])
        out = a + ".csv"
        self.addCleanup(lambda: os.path.exists(out) and os.remove(out))
        self.assertEqual(triton_journal.main([a, b, "--out", out]), 0)
        with open(out, newline="") as f:
            got = list(csv.DictReader(f))
        self.assertEqual([(r["M"], r["recheck"], r["us"], r["status"]) for r in got],
                         [("1", "0", "5.0", "ok"), ("4", "0", "7.0", "ok"),
                          ("8", "0", "", "fail:out-of-resources"), ("1", "1", "5.5", "ok")])
        self.assertEqual(list(got[0].keys()), triton_journal.COLUMNS)

    def test_two_devices_are_refused_and_nothing_is_written(self):
        a = self.write([row(1, 5.0), row(2, 5.0, device="NVIDIA H100")])
        out = a + ".csv"
        self.assertEqual(triton_journal.main([a, "--out", out]), 2)
        self.assertFalse(os.path.exists(out))
        with self.assertRaisesRegex(ValueError, r":2: device 'NVIDIA H100'"):
            triton_journal.read_rows([a])

    def test_configs_keeps_only_the_named_configs(self):
        other = dict(row(1, 3.0), kernelId=66703225, kernelName="triton_bm64_bn64_bk128_g32_w4_s5")
        a = self.write([row(1, 5.0), other, row(2, 6.0)])
        fd, kept = tempfile.mkstemp(suffix=".txt")
        os.close(fd)
        self.addCleanup(os.remove, kept)
        with open(kept, "w") as f:
            f.write("# the set in use\ntriton_bm64_bn128_bk128_g32_w4_s2\n")
        out = a + ".csv"
        self.addCleanup(lambda: os.path.exists(out) and os.remove(out))
        self.assertEqual(triton_journal.main([a, "--configs", kept, "--out", out]), 0)
        with open(out, newline="") as f:
            got = list(csv.DictReader(f))
        self.assertEqual([(r["M"], r["kernelName"]) for r in got],
                         [("1", "triton_bm64_bn128_bk128_g32_w4_s2"), ("2", "triton_bm64_bn128_bk128_g32_w4_s2")])
        # A config of the file without a row in the inputs is an error naming it; nothing is written.
        os.remove(out)
        with open(kept, "a") as f:
            f.write("triton_bm16_bn32_bk128_g1_w4_s5\n")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(triton_journal.main([a, "--configs", kept, "--out", out]), 2)
        self.assertIn("triton_bm16_bn32_bk128_g1_w4_s5, which no row of the inputs measured", err.getvalue())
        self.assertFalse(os.path.exists(out))
        with open(kept, "w") as f:
            f.write("triton_bm64_bn128_bk128_g32_w4_s2\n")
        self.assertEqual(triton_journal.main([a, "--configs", kept, "--out", out]), 0)
        # A name that is no config is one error naming the file and line; nothing is written.
        os.remove(out)
        with open(kept, "a") as f:
            f.write("triton_bm64\n")
        self.assertEqual(triton_journal.main([a, "--configs", kept, "--out", out]), 2)
        self.assertFalse(os.path.exists(out))


    def run_main(self, args):
        """(exit status, stderr) of triton_journal.main(args)."""
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = triton_journal.main(args)
        return rc, err.getvalue()

    def text_file(self, text, suffix=".jsonl", gz=False):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        path = os.path.join(d, "in" + suffix)
        data = text if isinstance(text, bytes) else text.encode()
        with (gzip.open(path, "wb") if gz else open(path, "wb")) as f:
            f.write(data)
        return path

    def assert_nothing_written(self, out):
        self.assertFalse(os.path.exists(out))
        self.assertFalse(os.path.exists(out + ".partial"))

    def test_a_bad_line_before_the_last_is_an_error_naming_file_and_line(self):
        good = [json.dumps(row(m, 5.0)) for m in (1, 2, 3)]
        for bad in (good[1][:60], "garbage", "[1, 2]", '{"M": 1} {"M": 2}'):
            for gz in (False, True):
                path = self.text_file("\n".join([good[0], bad, good[2]]) + "\n", ".jsonl.gz" if gz else ".jsonl",
                                      gz=gz)
                out = path + ".csv"
                rc, err = self.run_main([path, "--out", out])
                self.assertEqual(rc, 2, bad)
                self.assertRegex(err, r"^error: %s:2: not a harness result line" % path)
                self.assertEqual(err.count("\n"), 1)
                self.assert_nothing_written(out)
        # a cut last line (no newline: a stopped run) is skipped, with a note naming the file and line
        path = self.text_file("\n".join(good) + "\n" + good[0][:60])
        out = path + ".csv"
        rc, err = self.run_main([path, "--out", out])
        self.assertEqual(rc, 0)
        self.assertIn("%s:4: the last line is cut off" % path, err)
        with open(out) as f:
            self.assertEqual(len(f.read().splitlines()), 4)
        # the same line with its newline is whole, so not cut off: an error
        path = self.text_file("\n".join(good) + "\n" + good[0][:60] + "\n")
        rc, err = self.run_main([path, "--out", path + ".csv"])
        self.assertEqual(rc, 2)
        self.assertRegex(err, r"^error: %s:4: " % path)
        # blank lines are no result lines, nor errors
        path = self.text_file("\n".join(good) + "\n\n")
        self.assertEqual(self.run_main([path, "--out", path + ".csv"])[0], 0)

    def test_a_gzip_file_cut_short_or_corrupt_is_one_error_naming_it(self):
        text = "".join(json.dumps(row(m, 5.0)) + "\n" for m in range(1, 200))
        full = self.text_file(text, ".jsonl.gz", gz=True)
        with open(full, "rb") as f:
            data = f.read()
        for cut in (data[:len(data) // 2], data[:-4], b"{not gzip}\n"):
            path = self.text_file(cut, ".jsonl.gz")
            out = path + ".csv"
            rc, err = self.run_main([path, "--out", out])
            self.assertEqual(rc, 2)
            self.assertRegex(err, r"^error: %s: not a whole gzip file" % path)
            self.assertEqual(err.count("\n"), 1)
            self.assert_nothing_written(out)

    def test_text_that_is_not_utf8_is_an_error_naming_file_and_line(self):
        lines = [json.dumps(row(m, 5.0)).encode() for m in (1, 2, 3)]
        lines[1] = lines[1].replace(b"NVIDIA H200", b"NVIDIA \xff200")
        for gz in (False, True):
            path = self.text_file(b"\n".join(lines) + b"\n", ".jsonl.gz" if gz else ".jsonl", gz=gz)
            out = path + ".csv"
            rc, err = self.run_main([path, "--out", out])
            self.assertEqual(rc, 2)
            self.assertRegex(err, r"^error: %s:2: not UTF-8 text" % path)
            self.assert_nothing_written(out)
        # a last line cut inside a character is a cut-off line: skipped
        cut = json.dumps(row(4, 5.0)).encode().replace(b"NVIDIA H200", "NVIDIA H\u00e9".encode())
        path = self.text_file(b"\n".join(lines[:1]) + b"\n" + cut[:cut.index(b"\xc3") + 1])
        rc, err = self.run_main([path, "--out", path + ".csv"])
        self.assertEqual(rc, 0)
        self.assertIn("%s:2: the last line is cut off" % path, err)

    def test_values_the_journal_reader_would_refuse_are_errors_naming_file_and_line(self):
        nan, inf = float("nan"), float("inf")
        cases = [("us", nan), ("us", inf), ("us", -5.0), ("us", 0.0), ("us", 0), ("us", "5.0"), ("us", None),
                 ("us", True), ("us", 1e13), ("M", 1.9), ("M", 16.0), ("M", 0), ("M", -1), ("M", "16"), ("M", True),
                 ("N", 2 ** 32), ("K", None), ("kernelId", 1.5), ("kernelId", 2 ** 31), ("splitK", -1),
                 ("splitK", 17), ("recheck", 2), ("recheck", True), ("cu_num", 0), ("errRatio", 1.5),
                 ("errRatio", nan), ("errRatio", None), ("tflops", -1.0), ("bw", inf), ("us_min", nan),
                 ("us_p90", -0.5), ("reps", 0), ("reps", 2.5), ("status", "done"), ("status", "fail:"),
                 ("status", None), ("kernelName", ""), ("kernelName", 7), ("gfx", None), ("device", 1),
                 ("timing", 3), ("libtype", None)]
        for col, value in cases:
            bad = dict(row(2, 5.0), **{col: value})
            path = self.text_file("".join(json.dumps(r) + "\n" for r in (row(1, 5.0), bad)))
            with self.assertRaisesRegex(ValueError, r"^%s:2: %s = " % (path, col) if col != "status" else
                                        r"^%s:2: status " % path, msg=(col, value)):
                triton_journal.read_rows([path])
            out = path + ".csv"
            rc, err = self.run_main([path, "--out", out])
            self.assertEqual(rc, 2, (col, value))
            self.assertIn("%s:2:" % path, err)
            self.assert_nothing_written(out)
        for col in ("M", "kernelId", "kernelName", "status", "us", "errRatio"):
            bad = row(2, 5.0)
            del bad[col]
            path = self.text_file(json.dumps(bad) + "\n")
            with self.assertRaisesRegex(ValueError, r"^%s:1: not a harness result line \(no %s\)" % (path, col)):
                triton_journal.read_rows([path])
        # a failed row has no times to check (they are written empty), and optional times may be null
        fail = dict(row(3, None, status="fail:out-of-resources"), errRatio=None, tflops=None, bw=None, reps=0)
        ok = dict(row(4, 5.0), tflops=None, us_min=None, reps=None)
        path = self.text_file("".join(json.dumps(r) + "\n" for r in (row(1, 5.0), fail, ok)))
        cells, _, _ = triton_journal.read_rows([path])
        self.assertEqual(len(cells), 3)

    def test_out_that_cannot_be_written_is_refused_and_no_partial_file_is_left(self):
        path = self.text_file("".join(json.dumps(row(m, 5.0)) + "\n" for m in (1, 2)))
        d = os.path.dirname(path)
        # a directory: refused before reading, naming it; nothing created beside it
        outdir = os.path.join(d, "outdir")
        os.mkdir(outdir)
        rc, err = self.run_main([path, "--out", outdir])
        self.assertEqual(rc, 2)
        self.assertEqual(err, "error: --out %s: not a regular file (a directory or a device): name the journal "
                              "CSV to write\n" % outdir)
        self.assertFalse(os.path.exists(outdir + ".partial"))
        self.assertEqual(os.listdir(outdir), [])
        # a directory that does not exist
        nowhere = os.path.join(d, "no", "such", "j.csv")
        rc, err = self.run_main([path, "--out", nowhere])
        self.assertEqual(rc, 2)
        self.assertEqual(err, "error: --out %s: the directory %s does not exist\n"
                         % (nowhere, os.path.dirname(nowhere)))
        self.assertFalse(os.path.exists(os.path.join(d, "no")))
        # an input: refused, the input kept
        with open(path) as f:
            before = f.read()
        rc, err = self.run_main([path, "--out", path])
        self.assertEqual(rc, 2)
        self.assertIn("is the input", err)
        with open(path) as f:
            self.assertEqual(f.read(), before)
        # a failure while writing or renaming (disk full, interrupted) leaves neither --out nor the partial file
        out = os.path.join(d, "j.csv")
        with mock.patch.object(triton_journal.os, "replace", side_effect=OSError(28, "No space left on device")):
            rc, err = self.run_main([path, "--out", out])
        self.assertEqual(rc, 2)
        self.assertIn("error: cannot write %s" % out, err)
        self.assert_nothing_written(out)
        with mock.patch.object(triton_journal, "to_record", side_effect=KeyboardInterrupt):
            with self.assertRaises(KeyboardInterrupt):
                self.run_main([path, "--out", out])
        self.assert_nothing_written(out)
        # and a good run leaves --out only
        self.assertEqual(self.run_main([path, "--out", out])[0], 0)
        self.assertTrue(os.path.isfile(out))
        self.assertFalse(os.path.exists(out + ".partial"))

if __name__ == "__main__":
    unittest.main()
