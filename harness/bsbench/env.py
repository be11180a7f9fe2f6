"""Backend detection (CUDA or ROCm through PyTorch) and the harness's exit codes."""

import sys

#: Exit codes the driver maps to clear messages.
EXIT_USAGE = 2        # bad command line or plan file
EXIT_NO_TORCH = 3     # PyTorch is not importable
EXIT_NO_TRITON = 4    # Triton is not importable
EXIT_NO_GPU = 5       # PyTorch sees no CUDA/ROCm device
EXIT_DEVICE_LOST = 6  # the device stopped working mid-run (e.g. an illegal address poisoned the context)


class EnvError(Exception):
    def __init__(self, code, message):
        Exception.__init__(self, message)
        self.code = code


def import_torch():
    try:
        import torch  # noqa: F401
    except Exception as e:  # ImportError or a broken install
        raise EnvError(EXIT_NO_TORCH, "PyTorch is not importable by %s: %s" % (sys.executable, e))
    return torch


def import_triton():
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except Exception as e:
        raise EnvError(EXIT_NO_TRITON, "Triton is not importable by %s: %s" % (sys.executable, e))
    return triton


def fp8_dtype_name(is_hip, gfx):
    """e4m3fnuz on gfx942 (MI300 series), e4m3fn elsewhere (NVIDIA, gfx950)."""
    if is_hip and gfx.startswith("gfx94"):
        return "float8_e4m3fnuz"
    return "float8_e4m3fn"


def gfx_label(is_hip, arch_name, capability):
    """AITER's gfx column: the ROCm architecture (``gfx942``), or ``sm_90`` style on CUDA."""
    if is_hip:
        return arch_name.split(":")[0]
    return "sm_%d%d" % capability


def detect(torch, device_index=0):
    """Device facts every result row carries."""
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        raise EnvError(EXIT_NO_GPU, "PyTorch %s sees no CUDA/ROCm device" % torch.__version__)
    props = torch.cuda.get_device_properties(device_index)
    is_hip = bool(getattr(torch.version, "hip", None))
    arch = getattr(props, "gcnArchName", "") if is_hip else ""
    gfx = gfx_label(is_hip, arch, (props.major, props.minor))
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    return {
        "name": props.name,
        "gfx": gfx,
        "cu_num": int(props.multi_processor_count),
        "l2_bytes": l2 if l2 > 0 else 64 * 1024 * 1024,
        "l2_known": l2 > 0,
        "backend": ("rocm-%s" % torch.version.hip) if is_hip else ("cuda-%s" % torch.version.cuda),
        "fp8": fp8_dtype_name(is_hip, gfx),
        "is_hip": is_hip,
        "total_mem": int(props.total_memory),
    }
