"""Pure-Python configuration rules of the harness (no torch, no Triton).

* How a CK legacy instance's template parameters become a Triton launch configuration
  (tile sizes, ``num_warps``, ``num_stages``): :class:`Mapping` and :func:`launch_config`.
* Which split-K levels are measured for a shape (:func:`split_levels`) and how K is cut into
  per-split ranges of whole KPerBLOCK steps (:func:`split_ranges`).
* How many rotating buffer sets keep the L2 cold (:func:`buffer_sets`).
"""

from dataclasses import dataclass

#: Width of one scale group along K (ScaleBlockK of every legacy instance).
SCALE_K = 128
#: Height of one weight-scale block along N (ScaleBlockN).
SCALE_N = 128
#: Tile swizzle: consecutive program ids walk GROUP_SIZE_M tile rows before moving along N.
GROUP_SIZE_M = 8


@dataclass(frozen=True)
class Mapping:
    """One rule turning (BlockSize, pipeline version) into (num_warps, num_stages).

    ``num_warps = BlockSize // threads_per_warp``; pipeline v1 gets ``stages_v1`` stages, v3 (the
    prefetching pipeline) ``stages_v3``.
    """

    threads_per_warp: int
    stages_v1: int
    stages_v3: int

    def text(self):
        return "%d:%d:%d" % (self.threads_per_warp, self.stages_v1, self.stages_v3)

    def describe(self):
        return "num_warps = BlockSize/%d; num_stages = %d for pipeline v1, %d for v3" % (
            self.threads_per_warp, self.stages_v1, self.stages_v3)


#: The rule chosen from the calibration run (harness/README.md gives the evidence).
DEFAULT_MAPPING_TEXT = "64:3:4"


def parse_mapping(text):
    """Parses ``"T:S1:S3"`` (threads per warp divisor, stages for v1, stages for v3)."""
    parts = text.split(":")
    if len(parts) != 3:
        raise ValueError("mapping %r: expected T:S1:S3, e.g. 64:2:3" % text)
    try:
        t, s1, s3 = (int(p) for p in parts)
    except ValueError:
        raise ValueError("mapping %r: every field must be an integer" % text)
    if t not in (32, 64):
        raise ValueError("mapping %r: threads per warp divisor must be 32 or 64, got %d" % (text, t))
    if not (1 <= s1 <= 8 and 1 <= s3 <= 8):
        raise ValueError("mapping %r: stages must be in 1..8" % text)
    return Mapping(t, s1, s3)


@dataclass(frozen=True)
class LaunchConfig:
    """Triton compile-time parameters realizing one instance."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int

    def key(self):
        return (self.block_m, self.block_n, self.block_k, self.num_warps, self.num_stages)


def launch_config(m_per_block, n_per_block, k_per_block, block_size, pipeline, mapping):
    """The launch configuration of a legacy instance under ``mapping``.

    Raises ValueError for parameters the kernel cannot realize (KPerBLOCK not a multiple of the
    128-wide scale group, BlockSize not a multiple of the warp divisor, unknown pipeline).
    """
    if k_per_block <= 0 or k_per_block % SCALE_K != 0:
        raise ValueError("KPerBLOCK %d is not a positive multiple of %d" % (k_per_block, SCALE_K))
    for name, v in (("MPerBLOCK", m_per_block), ("NPerBLOCK", n_per_block)):
        if v < 16 or v & (v - 1):
            raise ValueError("%s %d is not a power of two >= 16" % (name, v))
    if block_size <= 0 or block_size % mapping.threads_per_warp != 0:
        raise ValueError("BlockSize %d is not a multiple of %d" % (block_size, mapping.threads_per_warp))
    if pipeline == 1:
        stages = mapping.stages_v1
    elif pipeline == 3:
        stages = mapping.stages_v3
    else:
        raise ValueError("pipeline version %r is not 1 or 3" % (pipeline,))
    return LaunchConfig(m_per_block, n_per_block, k_per_block, block_size // mapping.threads_per_warp, stages)


def cdiv(a, b):
    return -(-a // b)


def output_tiles(m, n, block_m, block_n):
    """Workgroups of the un-split grid."""
    return cdiv(m, block_m) * cdiv(n, block_n)


def split_levels(m, n, k, block_m, block_n, block_k, cu_num, max_level=3):
    """The split-K levels (log2 KBatch) worth measuring for a shape, 0 always first.

    Level s >= 1 is measured while the un-split grid is smaller than the CU/SM count, counting the
    previous level's workgroups (``tiles * 2**(s-1) < cu_num``), and while every one of the
    ``2**s`` splits still gets at least one full KPerBLOCK step (``k // block_k >= 2**s``).
    """
    levels = [0]
    tiles = output_tiles(m, n, block_m, block_n)
    for s in range(1, max_level + 1):
        if tiles * (1 << (s - 1)) >= cu_num:
            break
        if k // block_k < (1 << s):
            break
        levels.append(s)
    return levels


def split_ranges(k, block_k, split_k):
    """Per-split ranges of 128-wide scale groups ``[(g_begin, g_end), ...]``.

    KBatch = 2**split_k; each split covers a contiguous range of whole KPerBLOCK steps
    (``ceil(steps / KBatch)`` steps each, the last split the remainder), so a split never starts in
    the middle of a step. Splits that would be empty are dropped, so fewer than KBatch ranges can
    come back when the steps do not divide evenly.
    """
    if k % SCALE_K != 0:
        raise ValueError("K %d is not a multiple of %d" % (k, SCALE_K))
    groups = k // SCALE_K
    per_step = block_k // SCALE_K
    steps = cdiv(groups, per_step)
    batch = 1 << split_k
    steps_per_split = cdiv(steps, batch)
    out = []
    g = 0
    while g < groups:
        end = min(g + steps_per_split * per_step, groups)
        out.append((g, end))
        g = end
    return out


def groups_per_split(k, block_k, split_k):
    """Scale groups per split (the kernel's runtime argument); a multiple of KPerBLOCK/128."""
    ranges = split_ranges(k, block_k, split_k)
    return ranges[0][1] - ranges[0][0]


def set_bytes(m, n, k, with_workspace):
    """Bytes one buffer set occupies: fp8 X and W, fp32 scales, bf16 output, fp32 split-K workspace."""
    b = m * k + n * k + 4 * m * (k // SCALE_K) + 4 * cdiv(n, SCALE_N) * (k // SCALE_K) + 2 * m * n
    if with_workspace:
        b += 4 * m * n
    return b


def buffer_sets(m, n, k, with_workspace, l2_bytes, factor=3, cap=64):
    """Number of rotating buffer sets whose total exceeds ``factor`` times the L2 (at least 1)."""
    per = set_bytes(m, n, k, with_workspace)
    return max(1, min(cap, cdiv(factor * l2_bytes + 1, per)))


def moved_bytes(m, n, k):
    """Bytes a GEMM must move at least once: X, W, both scales, the bf16 output."""
    return set_bytes(m, n, k, False)
