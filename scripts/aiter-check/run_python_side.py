"""Runs the patched aiter/ops/gemm_op_a8w8.py of an AITER tree on shapes without a tuned row, with stubs.

Usage: run_python_side.py AITER_TREE < shapes.txt > routes.txt

Every module gemm_op_a8w8.py imports is a STAND-IN written for this check from the interfaces AITER uses
at e4048607a5 (torch, pandas, aiter.jit.core.compile_ops, chip_info, torch_guard, gemm_op_common,
utility.dtypes, and the Triton blockscale GEMM aiter.ops.triton.gemm.basic.gemm_a8w8_blockscale); none
is AITER's or PyTorch's code. The patched file itself and the generated
aiter/ops/gemm_a8w8_blockscale_select.py are loaded from AITER_TREE unchanged. The tuned-CSV lookup sees
an empty table, so every shape takes the untuned path. Per input line "M N K" it prints the route taken:
"ck-path" (the CK module called with AITER's untuned arguments: no kernelName, splitK 0) or
"triton KEY=VALUE ..." (AITER's Triton GEMM called with that config, the fp8 views and the dtype), or
"error MESSAGE" for an exception.
"""

import importlib.util
import os
import sys
import types

tree = sys.argv[1]
calls = []


def module(name, **attrs):
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    sys.modules[name] = mod
    return mod


class FakeTensor:
    def __init__(self, *shape, dtype="fp8", device="cuda"):
        self.shape, self.dtype, self.device = shape, dtype, device

    def view(self, dtype):
        return FakeTensor(*self.shape, dtype=dtype, device=self.device)


class FakeLibrary:
    def __init__(self, *args, **kwargs):
        pass


def fake_empty(*shape, dtype=None, device=None):
    return FakeTensor(*shape, dtype=dtype, device=device)


# torch (stand-in): the names gemm_op_a8w8.py reads at import and on the blockscale path.
torch = module("torch", Tensor=FakeTensor, uint8="uint8", empty=fake_empty, float32="float32", device=str)
torch.dtype = type("dtype", (), {})
module("torch.nn")
module("torch.nn.functional")
torch.nn = sys.modules["torch.nn"]
torch.nn.functional = sys.modules["torch.nn.functional"]
module("torch.library", Library=FakeLibrary)
torch.library = sys.modules["torch.library"]


# pandas (stand-in): an empty tuned table.
class FakeFrame:
    columns = ["gfx", "cu_num", "M", "N", "K", "libtype", "kernelId", "splitK", "kernelName"]

    def drop_duplicates(self):
        return self

    def set_index(self, keys):
        return self

    def to_dict(self, orient):
        return {}


module("pandas", read_csv=lambda path: FakeFrame())


class FakeLogger:
    def info(self, *args, **kwargs):
        pass

    warning = info


def compile_ops(name, fc_name=None, gen_fake=None, **kwargs):
    """Stand-in of aiter.jit.core.compile_ops: the decorated stub records its call instead of running."""

    def wrap(fn):
        def call(*args, **kw):
            calls.append((fc_name or fn.__name__, args, kw))
            return "ck-result"

        call.__name__ = fn.__name__
        return call

    return wrap


def torch_compile_guard(gen_fake=None, **kwargs):
    return lambda fn: fn


def fake_triton_blockscale(
    x, w, x_scale, w_scale, dtype=None, y=None, config=None, skip_reduce=False, kernel_type="bandwidth_bound",
    backend=None,
):
    """Stand-in of aiter.ops.triton.gemm.basic.gemm_a8w8_blockscale.gemm_a8w8_blockscale (same parameters)."""
    calls.append(("triton", (x, w, x_scale, w_scale), {"dtype": dtype, "y": y, "config": config}))
    return "triton-result"


dtypes = types.SimpleNamespace(fp8="fp8", bf16="bf16", fp16="fp16", i8="i8", fp32="fp32")
aiter = module("aiter", logger=FakeLogger())
aiter.__path__ = []
ops = module("aiter.ops")
ops.__path__ = [os.path.join(tree, "aiter", "ops")]
module(
    "aiter.jit.core",
    AITER_CONFIGS=types.SimpleNamespace(
        AITER_CONFIG_GEMM_A8W8_FILE="a8w8.csv",
        AITER_CONFIG_GEMM_A8W8_BLOCKSCALE_FILE="a8w8_blockscale.csv",
        AITER_CONFIG_GEMM_A8W8_BPRESHUFFLE_FILE="bpreshuffle.csv",
    ),
    AITER_LOG_TUNED_CONFIG=False,
    compile_ops=compile_ops,
)
module("aiter.jit")
module("aiter.jit.utils")
module("aiter.jit.utils.chip_info", get_cu_num=lambda: 304, get_gfx_runtime=lambda: "gfx942")
module("aiter.jit.utils.torch_guard", torch_compile_guard=torch_compile_guard)
module("aiter.ops.gemm_op_common", get_padded_m=lambda M, N, K, gl: M)
module("aiter.utility", dtypes=dtypes)
for name in ["aiter.ops.triton", "aiter.ops.triton.gemm", "aiter.ops.triton.gemm.basic"]:
    module(name)
module("aiter.ops.triton.gemm.basic.gemm_a8w8_blockscale", gemm_a8w8_blockscale=fake_triton_blockscale)

spec = importlib.util.spec_from_file_location("aiter.ops.gemm_op_a8w8", os.path.join(tree, "aiter/ops/gemm_op_a8w8.py"))
ops_module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = ops_module
spec.loader.exec_module(ops_module)

out = []
for line in sys.stdin:
    m, n, k = (int(v) for v in line.split())
    calls.clear()
    try:
        got = ops_module.gemm_a8w8_blockscale(
            FakeTensor(m, k, dtype="uint8"), FakeTensor(n, k), FakeTensor(m, k // 128), FakeTensor(n // 128, k // 128),
            dtype=dtypes.bf16,
        )
    except Exception as e:  # noqa: BLE001 - the route is the result
        out.append(f"error {e}")
        continue
    (name, args, kw), = calls
    if name == "gemm_a8w8_blockscale":
        # AITER's untuned arguments: Y allocated (M, N), no kernelName, no splitK.
        assert got == "ck-result" and args[4].shape == (m, n) and not kw, (args, kw)
        out.append("ck-path")
    elif name == "triton":
        assert got == "triton-result" and args[0].dtype == "fp8" and kw["dtype"] == "bf16", (args, kw)
        out.append("triton " + " ".join(f"{key}={kw['config'][key]}" for key in sorted(kw["config"])))
    else:
        out.append(f"unexpected call {name}")
sys.stdout.write("".join(line + "\n" for line in out))
