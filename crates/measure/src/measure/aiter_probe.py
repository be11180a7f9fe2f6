"""Device check before AITER's tuner runs (embedded in gemm-synth, run with the AITER checkout as cwd and on
PYTHONPATH). Prints one JSON object; exit 3: no PyTorch, 5: no GPU, 7: AITER not importable, 8: PyTorch
is not a ROCm build."""
import json
import sys

try:
    import torch
except Exception as e:  # noqa: BLE001
    sys.stderr.write(f"import torch failed: {e}\n")
    sys.exit(3)
if getattr(torch.version, "hip", None) is None:
    sys.stderr.write(f"PyTorch {torch.__version__} is not a ROCm build (torch.version.hip is None)\n")
    sys.exit(8)
if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
    sys.stderr.write("PyTorch sees no ROCm GPU (torch.cuda.is_available() is False)\n")
    sys.exit(5)
try:
    from aiter.jit.utils.chip_info import get_gfx_runtime
    gfx = get_gfx_runtime()
except Exception as e:  # noqa: BLE001
    sys.stderr.write(f"import aiter / get_gfx_runtime failed: {e}\n")
    sys.exit(7)
props = torch.cuda.get_device_properties(torch.cuda.current_device())
print(json.dumps({"name": props.name, "gfx": gfx, "cu_num": props.multi_processor_count,
                  "devices": torch.cuda.device_count(), "torch": torch.__version__, "hip": torch.version.hip}))
