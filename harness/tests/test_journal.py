import contextlib
import csv
import gzip
import io
import json
import os
import sys
import tempfile
import unittest

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


if __name__ == "__main__":
    unittest.main()
