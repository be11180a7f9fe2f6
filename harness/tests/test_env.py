import os
import sys
import unittest

# The harness directory, so `bsbench` imports as the entry point imports it, however the tests are found.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bsbench import env  # noqa: E402


class EnvTest(unittest.TestCase):
    def test_fp8_choice(self):
        self.assertEqual(env.fp8_dtype_name(True, "gfx942"), "float8_e4m3fnuz")
        self.assertEqual(env.fp8_dtype_name(True, "gfx950"), "float8_e4m3fn")
        self.assertEqual(env.fp8_dtype_name(False, "sm_90"), "float8_e4m3fn")

    def test_gfx_label(self):
        self.assertEqual(env.gfx_label(True, "gfx942:sramecc+:xnack-", (9, 4)), "gfx942")
        self.assertEqual(env.gfx_label(False, "", (9, 0)), "sm_90")

    def test_exit_codes_distinct(self):
        codes = [env.EXIT_USAGE, env.EXIT_NO_TORCH, env.EXIT_NO_TRITON, env.EXIT_NO_GPU, env.EXIT_DEVICE_LOST]
        self.assertEqual(len(set(codes)), len(codes))


if __name__ == "__main__":
    unittest.main()
