import contextlib
import io
import json
import math
import os
import sys
import tempfile
import types
import unittest

# The harness directory, so `bsbench` imports as the entry point imports it, however the tests are found.
HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HARNESS)
from bsbench import layer, triton_config as tc  # noqa: E402
import layer_sequence  # noqa: E402

REPO = os.path.dirname(HARNESS)
VLLM_DIR = os.path.join(REPO, "measurements", "h200", "vllm-h200-configs")
CK4 = "a8w8_blockscale_1x128x128_256x16x256x128_8x16_16x16_1x4_16x16x1_8x32x1_1x16x1x16_8_1x2_intrawave_v1"
CK7 = "a8w8_blockscale_1x128x128_256x16x128x256_16x16_16x16_1x2_16x16x1_16x16x1_1x16x1x16_8_1x2_intrawave_v1"

# A selector written by hand in the form synth's Python renderer emits (select, KERNEL_NAMES, TRITON_CONFIGS).
SELECTOR = '''
def select(M, N, K):
    if M <= 16:
        return ("ck", 4, 2)
    if M < 256:
        return ("triton", 67703222, 0)
    if N > 100000:
        return ("cktile", 1, 0)
    return ("vendor", 0, 0)

KERNEL_NAMES = {
    ("ck", 4): "%s",
    ("triton", 67703222): "triton_bm64_bn128_bk128_g32_w4_s2",
    ("vendor", 0): "vendor(0)",
}

TRITON_CONFIGS = {
    67703222: {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, "num_warps": 4, "num_stages": 2},
}
''' % CK4


class Temp(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path


class PolicyParsingTest(unittest.TestCase):
    def err(self, text):
        with self.assertRaises(layer.LayerError) as cm:
            layer.parse_policy(text)
        return str(cm.exception)

    def test_good_policies(self):
        self.assertEqual(layer.parse_policy("vendor"), layer.Policy("vendor", "vendor"))
        self.assertEqual(layer.parse_policy("vllm-default").kind, "vllm-default")
        p = layer.parse_policy("selector=out/select_kernel.py")
        self.assertEqual((p.kind, p.path, p.label), ("selector", "out/select_kernel.py", "selector=out/select_kernel.py"))
        self.assertEqual(layer.parse_policy("vllm-tuned=cfgs").path, "cfgs")
        t = layer.parse_policy("threshold=ck:vendor:64")
        self.assertEqual((t.below, t.above, t.m0), ("ck", "vendor", 64))

    def test_errors_name_the_bad_value(self):
        e = self.err("cublas")
        self.assertIn("'cublas'", e)
        self.assertIn("unknown kind", e)
        self.assertIn("threshold=A:B:M0", e)
        self.assertIn("vendor takes no value", self.err("vendor=fast"))
        self.assertIn("needs a value: selector=PATH", self.err("selector"))
        self.assertIn("needs a value: vllm-tuned=DIR", self.err("vllm-tuned="))
        self.assertIn("got 2 fields", self.err("threshold=ck:64"))
        e = self.err("threshold=ck:hipblaslt:64")
        self.assertIn("'hipblaslt' is not one of ck, triton, vendor", e)
        self.assertIn("'cktile' has no realization", self.err("threshold=cktile:vendor:64"))
        self.assertIn("M0 'abc' is not a positive integer", self.err("threshold=ck:vendor:abc"))
        self.assertIn("M0 '0' is not a positive integer", self.err("threshold=ck:vendor:0"))
        self.assertIn("both sides are ck", self.err("threshold=ck:ck:16"))
        self.assertIn("empty policy", self.err("  "))

    def test_policy_list(self):
        with self.assertRaises(layer.LayerError) as cm:
            layer.parse_policies(["vendor", "vllm-default", "vendor"])
        self.assertIn("'vendor' is given twice", str(cm.exception))
        with self.assertRaises(layer.LayerError) as cm:
            layer.parse_policies([])
        self.assertIn("--policy", str(cm.exception))


class LayerInputTest(Temp):
    def test_example_layers(self):
        ds = layer.parse_layers_csv(os.path.join(HARNESS, "layers", "deepseek-v3-tp8-dense.csv"))
        self.assertEqual([(g.name, g.n, g.k) for g in ds], [
            ("fused_qkv_a_proj", 2112, 7168), ("q_b_proj", 3072, 1536), ("kv_b_proj", 4096, 512),
            ("o_proj", 7168, 2048), ("gate_up_proj", 4608, 7168), ("down_proj", 7168, 2304)])
        for g in ds:  # every DeepSeek-V3 GEMM has a vLLM H200 file
            self.assertTrue(os.path.isfile(os.path.join(VLLM_DIR, layer.vllm_file_name(g.n, g.k))), g)
        qw = layer.parse_layers_csv(os.path.join(HARNESS, "layers", "qwen3-32b-tp2.csv"))
        self.assertEqual([(g.name, g.n, g.k) for g in qw], [
            ("qkv_proj", 5120, 5120), ("o_proj", 5120, 4096), ("gate_up_proj", 25600, 5120), ("down_proj", 5120, 12800)])

    def test_csv_errors(self):
        def err(text):
            with self.assertRaises(layer.LayerError) as cm:
                layer.parse_layers_csv(self.write("l.csv", text))
            return str(cm.exception)
        self.assertIn("header must be name,N,K", err("layer,N,K\na,128,128\n"))
        self.assertIn("l.csv:3: K 'x' is not a positive integer", err("name,N,K\na,128,128\nb,128,x\n"))
        self.assertIn("K = 200, not a multiple of 128", err("# c\nname,N,K\na,128,200\n"))
        self.assertIn("'a' appears twice", err("name,N,K\na,128,128\na,256,128\n"))
        self.assertIn("no GEMM", err("name,N,K\n"))

    def test_layers_and_m_arguments(self):
        gs = layer.parse_layers_arg("5120:5120, o=5120:4096")
        self.assertEqual(gs, [layer.Gemm("gemm1", 5120, 5120), layer.Gemm("o", 5120, 4096)])
        with self.assertRaises(layer.LayerError) as cm:
            layer.parse_layers_arg("5120x5120")
        self.assertIn("'5120x5120': expected N:K", str(cm.exception))
        self.assertEqual(layer.parse_m_list("1, 16,4"), [1, 16, 4])
        for bad, msg in (("1,0", "'0' is not a positive"), ("1,2,1", "1 appears twice"), ("a", "'a'")):
            with self.assertRaises(layer.LayerError) as cm:
                layer.parse_m_list(bad)
            self.assertIn(msg, str(cm.exception))


class NearestMTest(Temp):
    A, B, C = tc.TritonConfig(16, 64, 128, 1, 4, 3), tc.TritonConfig(32, 64, 128, 16, 4, 3), tc.TritonConfig(64, 128, 128, 32, 8, 4)

    def test_ties_go_to_the_key_first_in_the_file(self):
        grid = [(1, "a"), (2, "b"), (4, "c"), (8, "d"), (16, "e")]
        near = lambda m, entries=grid: layer.nearest_key(entries, m)[0]  # noqa: E731
        # Hand-computed: 3 is 1 from 2 and from 4 -> 2 (first); 6 -> 4; 12 -> 8 (tie, 8 first); 13 -> 16.
        self.assertEqual([near(m) for m in (1, 3, 5, 6, 7, 12, 13, 1000)], [1, 2, 4, 4, 8, 8, 16, 16])
        # The file's order decides, not the smaller key: 12 is 4 from 16 and 8; 16 comes first.
        self.assertEqual(near(12, [(16, "x"), (8, "y")]), 16)
        self.assertEqual(near(12, [(8, "y"), (16, "x")]), 8)

    def test_tuned_resolver_reads_files_in_order_and_falls_back_to_the_default(self):
        entries = [("96", self.A), ("64", self.B), ("128", self.C)]
        text = "{" + ", ".join('"%s": %s' % (k, json.dumps(c.runtime_dict())) for k, c in entries) + "}"
        self.write(layer.vllm_file_name(512, 1024), text)
        self.write(layer.vllm_file_name(512, 2048, "NVIDIA_H100_80GB_HBM3"), text)
        r = layer.resolver(layer.parse_policy("vllm-tuned=" + self.dir.name), {})
        g = layer.Gemm("g", 512, 1024)
        # 80 is 16 from 96 and 64: 96 is first in the file.
        picks = {m: r.resolve(m, g) for m in (1, 80, 100, 113, 4096)}
        self.assertEqual({m: c.triton for m, c in picks.items()},
                         {1: self.B, 80: self.A, 100: self.A, 113: self.C, 4096: self.C})
        self.assertEqual(picks[80].source, "vLLM file N=512,K=1024, M key 96")
        self.assertEqual((picks[80].backend, picks[80].kernel_id, picks[80].kernel_name),
                         ("triton", tc.kernel_id(self.A), self.A.name()))
        other = r.resolve(16, layer.Gemm("h", 512, 2048))  # a file of another device is not read
        self.assertEqual(other.triton, tc.VLLM_DEFAULT)
        self.assertIn("vLLM default (no file N=512,K=2048,device_name=NVIDIA_H200", other.source)

    def test_the_real_files_parse(self):
        r = layer.resolver(layer.parse_policy("vllm-tuned=" + VLLM_DIR), {})
        c = r.resolve(3, layer.Gemm("o_proj", 7168, 2048))
        self.assertEqual(c.source, "vLLM file N=7168,K=2048, M key 2")
        self.assertEqual(c.triton, tc.TritonConfig(16, 64, 128, 32, 4, 3))

    def test_bad_file_and_missing_dir(self):
        self.write(layer.vllm_file_name(256, 256), '{"1": {"BLOCK_SIZE_M": 16}}')
        self.write(layer.vllm_file_name(256, 512), '{"one": %s}' % json.dumps(self.A.runtime_dict()))
        r = layer.resolver(layer.parse_policy("vllm-tuned=" + self.dir.name), {})
        with self.assertRaises(layer.LayerError) as cm:
            r.resolve(1, layer.Gemm("g", 256, 256))
        self.assertIn("M key '1': 'BLOCK_SIZE_N' must be an integer", str(cm.exception))
        with self.assertRaises(layer.LayerError) as cm:
            r.resolve(1, layer.Gemm("g", 256, 512))
        self.assertIn("M key 'one' is not an integer", str(cm.exception))
        with self.assertRaises(layer.LayerError) as cm:
            layer.resolver(layer.parse_policy("vllm-tuned=" + os.path.join(self.dir.name, "nope")), {})
        self.assertIn("is not a directory", str(cm.exception))


class ThresholdTest(unittest.TestCase):
    def test_sides_and_defaults(self):
        inst = layer.load_ck_instances()
        self.assertEqual(inst[-1].name, CK7)
        self.assertEqual(inst[-1].m_per_block, inst[7].m_per_block)
        r = layer.resolver(layer.parse_policy("threshold=ck:vendor:64"), inst)
        g = layer.Gemm("g", 5120, 5120)
        below, at = r.resolve(63, g), r.resolve(64, g)
        self.assertEqual((below.backend, below.kernel_id, below.kernel_name, below.split_k), ("ck", -1, CK7, 0))
        self.assertEqual((at.backend, at.kernel_id, at.kernel_name), ("vendor", 0, layer.VENDOR_NAME))
        self.assertEqual(below.source, "ck default, M < 64")
        r = layer.resolver(layer.parse_policy("threshold=triton:ck:16"), inst)
        self.assertEqual(r.resolve(15, g).triton, tc.VLLM_DEFAULT)
        self.assertEqual(r.resolve(15, g).kernel_id, 67703222)
        self.assertEqual(r.resolve(16, g).kernel_id, -1)
        self.assertEqual(r.resolve(10 ** 6, g).backend, "ck")


class SelectorTest(Temp):
    def setUp(self):
        Temp.setUp(self)
        self.inst = layer.load_ck_instances()

    def sel(self, text, name="select_kernel.py"):
        return layer.resolver(layer.parse_policy("selector=" + self.write(name, text)), self.inst)

    def test_a_hand_written_module(self):
        r = self.sel(SELECTOR)
        g = layer.Gemm("g", 5120, 5120)
        ck = r.resolve(8, g)
        self.assertEqual((ck.backend, ck.kernel_id, ck.split_k, ck.kernel_name), ("ck", 4, 2, CK4))
        self.assertEqual(ck.splits(5120), 4)  # 40 steps of KPerBLOCK 128 in 4 ranges of 10
        self.assertEqual(ck.splits(256), 2)  # 2 steps: the empty ranges are not launched
        row = ck.to_json(g)
        self.assertEqual((row["splitK"], row["splits"], row["source"]), (2, 4, "select -> (ck, 4, 2)"))
        tri = r.resolve(64, g)
        self.assertEqual((tri.backend, tri.triton), ("triton", tc.VLLM_DEFAULT))
        self.assertEqual(tri.to_json(g)["config"]["num_stages"], 2)
        self.assertEqual(r.resolve(256, g).backend, "vendor")
        with self.assertRaises(layer.LayerError) as cm:
            r.resolve(256, layer.Gemm("wide", 200064, 5120))
        self.assertIn("picks cktile kernel 1", str(cm.exception))
        self.assertIn("M=256 N=200064 K=5120", str(cm.exception))

    def test_bad_picks_are_named(self):
        def err(body, extra="", m=1):
            r = self.sel("def select(M, N, K):\n    return %s\n%s" % (body, extra), name="s%d.py" % abs(hash(body)))
            with self.assertRaises(layer.LayerError) as cm:
                r.resolve(m, layer.Gemm("g", 512, 512))
            return str(cm.exception)
        self.assertIn("backend 'cublas' is not one of ck, cktile, triton, vendor", err('("cublas", 0, 0)'))
        self.assertIn("not (backend, kernel_id, split_k)", err('("ck", 4)'))
        self.assertIn("split_k 1.5 is not an integer", err('("ck", 4, 1.5)'))
        self.assertIn("split_k 9 is not in 0..8", err('("ck", 4, 9)'))
        self.assertIn("CK kernelId 19 is not in the instance table", err('("ck", 19, 0)'))
        self.assertIn("triton kernel 67703222 has no entry", err('("triton", 67703222, 0)'))
        self.assertIn("must have split_k 0", err('("triton", 67703222, 1)'))
        self.assertIn("the vendor leaf must be (vendor, 0, 0)", err('("vendor", 3, 0)'))
        self.assertIn("another catalog", err('("ck", 4, 0)', 'KERNEL_NAMES = {("ck", 4): "other"}\n'))
        self.assertIn("whose id is", err('("triton", 12, 0)', 'TRITON_CONFIGS = {12: %r}\n' % tc.VLLM_DEFAULT.runtime_dict()))
        self.assertIn("select raised ZeroDivisionError", err("1 // 0"))

    def test_modules_that_cannot_be_used(self):
        for text, msg in (("x = 1\n", "defines no function select(M, N, K)"),
                          ("def select(:\n", "cannot be loaded: SyntaxError"),
                          ("def select(M, N, K):\n    pass\nKERNEL_NAMES = []\n", "KERNEL_NAMES is not a dict")):
            with self.assertRaises(layer.LayerError) as cm:
                self.sel(text, name="m%d.py" % abs(hash(text)))
            self.assertIn(msg, str(cm.exception))
        with self.assertRaises(layer.LayerError) as cm:
            layer.resolver(layer.parse_policy("selector=/nonexistent/select_kernel.py"), self.inst)
        self.assertIn("'/nonexistent/select_kernel.py': no such file", str(cm.exception))


class BuffersTest(unittest.TestCase):
    def test_layer_sets_and_rotation(self):
        gs = [layer.Gemm("a", 4096, 4096), layer.Gemm("b", 4096, 4096)]
        # One GEMM's set at M=16: 16*4096 + 4096*4096 + 4*16*32 + 4*32*32 + 2*16*4096 = 16,979,968 bytes.
        self.assertEqual(layer.layer_set_bytes(16, gs, [False, False]), 2 * 16979968)
        self.assertEqual(layer.layer_set_bytes(16, gs, [True, False]), 2 * 16979968 + 4 * 16 * 4096)
        l2 = 60 * 1024 * 1024  # 3 x L2 + 1 = 188,743,681 bytes: 5.56 sets -> 6
        self.assertEqual(layer.layer_buffer_sets(16, gs, [False, False], l2), 6)
        self.assertEqual(layer.layer_buffer_sets(16, [layer.Gemm("t", 128, 128)], [False], l2), 64)  # the cap
        self.assertEqual(layer.layer_buffer_sets(16, [layer.Gemm("w", 65536, 8192)], [False], l2), 1)
        self.assertEqual(layer.rotated(["a", "b", "c"], 1), ["b", "c", "a"])
        self.assertEqual(layer.rotated(["a", "b", "c"], 4), ["b", "c", "a"])
        self.assertEqual(layer.rotated([], 1), [])


def row(m, policy, us, recheck=None, status="ok"):
    r = {"M": m, "policy": policy, "status": status, "us": us if status == "ok" else None}
    if recheck is not None:
        r["us_recheck"] = recheck
    return r


class SummaryTest(unittest.TestCase):
    KINDS = {"mixed": "selector", "vendor": "vendor", "vllm-default": "vllm-default", "tuned": "vllm-tuned",
             "threshold=ck:vendor:4": "threshold", "threshold=ck:vendor:64": "threshold",
             "threshold=vendor:ck:64": "threshold"}
    LABELS = list(KINDS)

    def rows(self):
        # M = 1: the vendor fails (cuBLAS refuses it). Times in us.
        return [
            row(1, "mixed", 5.0, 5.0), row(2, "mixed", 8.0, 8.8), row(4, "mixed", 10.0, 10.0),
            row(1, "vendor", None, status="fail:unsupported"), row(2, "vendor", 10.0, 10.0), row(4, "vendor", 20.0, 20.0),
            row(1, "vllm-default", 10.0), row(2, "vllm-default", 16.0), row(4, "vllm-default", 40.0),
            row(1, "tuned", 4.0), row(2, "tuned", 8.0), row(4, "tuned", 12.5),
            row(1, "threshold=ck:vendor:4", 6.0), row(2, "threshold=ck:vendor:4", 9.0), row(4, "threshold=ck:vendor:4", 20.0),
            row(1, "threshold=ck:vendor:64", 6.0), row(2, "threshold=ck:vendor:64", 9.0), row(4, "threshold=ck:vendor:64", 12.0),
            row(1, "threshold=vendor:ck:64", None, status="fail:unsupported"), row(2, "threshold=vendor:ck:64", 1.0),
            row(4, "threshold=vendor:ck:64", 1.0),
        ]

    def test_ratios(self):
        d = layer.summary_data(self.rows(), self.LABELS, self.KINDS)
        self.assertEqual(d["vendor"], "vendor")
        per = {e["policy"]: e for e in d["per_policy"]}
        # mixed / vendor over M = 2, 4: sqrt(8/10 * 10/20) = sqrt(0.4).
        self.assertAlmostEqual(per["mixed"]["vs_vendor"], math.sqrt(0.4))
        self.assertEqual(per["mixed"]["vs_vendor_m"], 2)
        self.assertAlmostEqual(per["mixed"]["vs_vendor_recheck"], math.sqrt(8.8 / 10 * 0.5))
        self.assertAlmostEqual(per["mixed"]["noise_max"], 0.1)
        self.assertAlmostEqual(per["mixed"]["noise_median"], 0.0)
        self.assertEqual(per["vendor"]["failed_m"], [1])
        self.assertAlmostEqual(per["vendor"]["vs_vendor"], 1.0)
        self.assertAlmostEqual(per["vllm-default"]["vs_vendor"], math.sqrt(1.6 * 2.0))
        self.assertIsNone(per["tuned"]["noise_max"])
        mixed = {e["versus"]: e for e in d["mixed"]}
        self.assertAlmostEqual(mixed["vendor alone"]["ratio"], math.sqrt(0.4))
        # Against vLLM's default over M = 1, 2, 4: (0.5 * 0.5 * 0.25)^(1/3).
        self.assertAlmostEqual(mixed["vLLM default"]["ratio"], (0.5 * 0.5 * 0.25) ** (1 / 3))
        self.assertEqual(mixed["vLLM default"]["m"], 3)
        self.assertIsNone(mixed["vLLM default"]["recheck"])  # that policy has no recheck times
        self.assertAlmostEqual(mixed["vLLM tuned"]["ratio"], (5 / 4 * 8 / 8 * 10 / 12.5) ** (1 / 3))
        # Best threshold: vendor:ck:64 is fastest where it runs but fails at M = 1; of the two that run
        # everywhere ck:vendor:64 has the lower geomean over M = 2, 4 (9, 12 against 9, 20).
        self.assertEqual(d["best_threshold"], "threshold=ck:vendor:64")
        self.assertEqual(mixed["best threshold"]["other"], "threshold=ck:vendor:64")
        self.assertAlmostEqual(mixed["best threshold"]["ratio"], (5 / 6 * 8 / 9 * 10 / 12) ** (1 / 3))

    def test_missing_policies_and_text(self):
        rows = [r for r in self.rows() if r["policy"] in ("mixed", "vllm-default")]
        kinds = {"mixed": "selector", "vllm-default": "vllm-default"}
        d = layer.summary_data(rows, ["mixed", "vllm-default"], kinds)
        self.assertIsNone(d["vendor"])
        self.assertIsNone(d["best_threshold"])
        self.assertEqual([e["versus"] for e in d["mixed"] if e["other"] is None], ["vendor alone", "vLLM tuned",
                                                                                    "best threshold"])
        text = layer.summary_text(rows, ["mixed", "vllm-default"], kinds)
        self.assertIn("no vendor policy", text)
        self.assertIn("mixed / vendor alone: not measured", text)
        self.assertIn("mixed / vLLM default: 0.397 over 3 M", text)
        full = layer.summary_text(self.rows(), self.LABELS, self.KINDS)
        self.assertIn("mixed / best threshold [threshold=ck:vendor:64]: 0.851 over 3 M", full)
        self.assertIn("      M=1       M=2       M=4", full)

    def test_geomean(self):
        self.assertAlmostEqual(layer.geomean([2.0, 8.0]), 4.0)
        self.assertIsNone(layer.geomean([]))
        self.assertEqual(layer.ratio({1: 1.0}, {2: 1.0}), (None, 0))


class EntryPointTest(Temp):
    def run_main(self, argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = layer_sequence.main(argv)
        return code, out.getvalue(), err.getvalue()

    def test_dry_run_resolves_every_m_and_policy(self):
        sel = self.write("select_kernel.py", SELECTOR)
        path = os.path.join(self.dir.name, "plan.jsonl")
        code, _, err = self.run_main(["--layers", "q=3072:1536,o=7168:2048", "--m", "1,3,300", "--dry-run", "--out", path,
                                      "--policy", "selector=" + sel, "--policy", "vllm-tuned=" + VLLM_DIR,
                                      "--policy", "threshold=ck:vendor:4"])
        self.assertEqual(code, 0, err)
        with open(path) as f:
            rows = [json.loads(x) for x in f]
        self.assertEqual([(r["M"], r["kind"]) for r in rows][:3], [(1, "selector"), (1, "vllm-tuned"), (1, "threshold")])
        self.assertEqual(len(rows), 9)
        by = {(r["M"], r["kind"]): r["gemms"] for r in rows}
        self.assertEqual(by[(1, "selector")][0]["kernelName"], CK4)
        self.assertEqual(by[(3, "vllm-tuned")][1]["source"], "vLLM file N=7168,K=2048, M key 2")
        self.assertEqual(by[(300, "threshold")][0]["backend"], "vendor")
        self.assertEqual(by[(300, "selector")][1]["backend"], "vendor")

    def test_bad_arguments_stop_before_any_gpu_work(self):
        code, _, err = self.run_main(["--layers", "128:128", "--policy", "threshold=ck:foo:4", "--out", "x"])
        self.assertEqual(code, 2)
        self.assertIn("error: policy 'threshold=ck:foo:4': backend 'foo'", err)
        sel = self.write("bad.py", 'def select(M, N, K):\n    return ("cktile", 0, 0)\n')
        code, _, err = self.run_main(["--layers", "128:128", "--policy", "selector=" + sel, "--out", "x"])
        self.assertEqual(code, 2)
        self.assertIn("picks cktile kernel 0", err)

    def test_no_cuda_device_is_a_clear_error(self):
        # Stand-ins for torch (no CUDA device) and Triton, so the check runs without either installed.
        cuda = types.SimpleNamespace(is_available=lambda: False, device_count=lambda: 0)
        fake_torch = types.ModuleType("torch")
        fake_torch.__version__, fake_torch.cuda = "0.0-test", cuda
        fake_triton = types.ModuleType("triton")
        fake_triton.language = types.ModuleType("triton.language")
        saved = {k: sys.modules.get(k) for k in ("torch", "triton", "triton.language")}
        sys.modules.update({"torch": fake_torch, "triton": fake_triton, "triton.language": fake_triton.language})
        try:
            code, _, err = self.run_main(["--layers", "128:128", "--policy", "vendor", "--out",
                                          os.path.join(self.dir.name, "r.jsonl")])
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
        self.assertEqual(code, 5)
        self.assertIn("sees no CUDA/ROCm device", err)
        self.assertIn("times kernels on a CUDA GPU; --dry-run resolves the choices without one", err)

    def test_summarize_a_finished_run(self):
        rows = SummaryTest().rows()
        for r in rows:
            r["kind"] = SummaryTest.KINDS[r["policy"]]
        path = self.write("run.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        code, out, _ = self.run_main(["--summarize", path])
        self.assertEqual(code, 0)
        self.assertIn("mixed / vendor alone: 0.632 over 2 M", out)


if __name__ == "__main__":
    unittest.main()
