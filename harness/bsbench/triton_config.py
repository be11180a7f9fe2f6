"""The block-FP8 Triton config family (the meta-parameters vLLM and SGLang tune), pure Python.

A config is ``(BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M, num_warps, num_stages)``. Its
name is ``triton_bm{BM}_bn{BN}_bk{BK}_g{G}_w{W}_s{S}`` and its ``kernelId`` a decimal packing of the
same fields (:func:`kernel_id`), so a journal row names its config twice and the two can be checked
against each other.
"""

import json
import re
from dataclasses import dataclass

#: Width of one activation/weight scale group along K (the 128x128 block recipe).
SCALE_K = 128
#: Height of one weight-scale block along N.
SCALE_N = 128

NAME_RE = re.compile(r"triton_bm([0-9]+)_bn([0-9]+)_bk([0-9]+)_g([0-9]+)_w([0-9]+)_s([0-9]+)")

#: The tuner's search space (vLLM benchmarks/kernels/benchmark_w8a8_block_fp8.py), in its loop order:
#: stages outermost, then BLOCK_SIZE_M, BLOCK_SIZE_K, BLOCK_SIZE_N, num_warps, GROUP_SIZE_M.
SPACE_STAGES = (2, 3, 4, 5)
SPACE_BM = (16, 32, 64, 128, 256)
SPACE_BK = (64, 128)
SPACE_BN = (32, 64, 128, 256)
SPACE_WARPS = (4, 8)
SPACE_GROUP_M = (1, 16, 32, 64)


def _pow2(v):
    return v > 0 and v & (v - 1) == 0


def _log2(v):
    return v.bit_length() - 1


@dataclass(frozen=True)
class TritonConfig:
    block_m: int
    block_n: int
    block_k: int
    group_m: int
    num_warps: int
    num_stages: int

    def validate(self):
        """Raises ValueError naming the first field the kernel cannot realize."""
        for field, v, lo, hi in (("BLOCK_SIZE_M", self.block_m, 16, 512), ("BLOCK_SIZE_N", self.block_n, 16, 512)):
            if not (_pow2(v) and lo <= v <= hi):
                raise ValueError("%s %d is not a power of two in %d..%d" % (field, v, lo, hi))
        if not (_pow2(self.block_k) and 16 <= self.block_k <= SCALE_K):
            raise ValueError("BLOCK_SIZE_K %d is not a power of two in 16..%d (it must divide the %d-wide scale group)"
                             % (self.block_k, SCALE_K, SCALE_K))
        if not 1 <= self.group_m <= 999:
            raise ValueError("GROUP_SIZE_M %d is not in 1..999" % self.group_m)
        if self.num_warps not in (1, 2, 4, 8, 16):
            raise ValueError("num_warps %d is not one of 1, 2, 4, 8, 16" % self.num_warps)
        if not 1 <= self.num_stages <= 9:
            raise ValueError("num_stages %d is not in 1..9" % self.num_stages)
        return self

    def name(self):
        return "triton_bm%d_bn%d_bk%d_g%d_w%d_s%d" % (self.block_m, self.block_n, self.block_k, self.group_m,
                                                      self.num_warps, self.num_stages)

    def key(self):
        return (self.block_m, self.block_n, self.block_k, self.group_m, self.num_warps, self.num_stages)

    def runtime_dict(self):
        """The config as the runtimes' JSON files spell it."""
        return {"BLOCK_SIZE_M": self.block_m, "BLOCK_SIZE_N": self.block_n, "BLOCK_SIZE_K": self.block_k,
                "GROUP_SIZE_M": self.group_m, "num_warps": self.num_warps, "num_stages": self.num_stages}


def kernel_id(cfg):
    """Decimal packing: log2(BM)·1e7 + log2(BN)·1e6 + log2(BK)·1e5 + G·1e2 + log2(warps)·10 + stages.

    Every field has its own digits (G ≤ 999, stages ≤ 9, block sizes ≤ 512), so distinct valid configs get
    distinct ids; e.g. bm64 bn128 bk128 g32 w4 s2 is 67703222.
    """
    cfg.validate()
    return (_log2(cfg.block_m) * 10_000_000 + _log2(cfg.block_n) * 1_000_000 + _log2(cfg.block_k) * 100_000
            + cfg.group_m * 100 + _log2(cfg.num_warps) * 10 + cfg.num_stages)


def parse_name(name):
    """The config a name denotes; ValueError (naming the name) for anything else."""
    m = NAME_RE.fullmatch(name) if isinstance(name, str) else None
    if not m:
        raise ValueError("%r is not a triton config name (expected triton_bm<BM>_bn<BN>_bk<BK>_g<G>_w<W>_s<S>, "
                         "e.g. triton_bm64_bn128_bk128_g32_w4_s2)" % (name,))
    digits = m.groups()
    if any(len(d) > 1 and d[0] == "0" for d in digits):
        raise ValueError("%r: numbers must not have leading zeros" % (name,))
    cfg = TritonConfig(*(int(d) for d in digits))
    try:
        cfg.validate()
    except ValueError as e:
        raise ValueError("%r: %s" % (name, e))
    return cfg


def read_runtime_file(path):
    """[(M key, config)] of one vLLM/SGLang config file, in file order (the runtimes' nearest-M lookup breaks
    ties by that order); ValueError naming the file and the M key of anything that is not such a file."""
    with open(path, encoding="utf-8") as f:
        try:
            d = json.load(f)
        except ValueError as e:
            raise ValueError("%s: not JSON (%s)" % (path, e))
    if not isinstance(d, dict) or not d:
        raise ValueError("%s: expected an object mapping M to a config" % path)
    out = []
    for key, v in d.items():
        if not re.fullmatch(r"[0-9]+", key.strip()):
            raise ValueError("%s: M key %r is not an integer" % (path, key))
        out.append((int(key), from_runtime_dict(v, "%s, M key %r" % (path, key))))
    return out


def from_runtime_dict(d, where):
    """A config from a runtime JSON entry (the six keys, integers); ValueError naming ``where``."""
    keys = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")
    vals = []
    for k in keys:
        v = d.get(k) if isinstance(d, dict) else None
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError("%s: %r must be an integer, got %r" % (where, k, v))
        vals.append(v)
    cfg = TritonConfig(*vals)
    try:
        return cfg.validate()
    except ValueError as e:
        raise ValueError("%s: %s" % (where, e))


def tuner_space():
    """The 1280 configs of the tuner, in its loop order (every BLOCK_SIZE_K divides 128)."""
    out = []
    for s in SPACE_STAGES:
        for bm in SPACE_BM:
            for bk in SPACE_BK:
                for bn in SPACE_BN:
                    for w in SPACE_WARPS:
                        for g in SPACE_GROUP_M:
                            out.append(TritonConfig(bm, bn, bk, g, w, s))
    return out


#: vLLM's config where no file matches (fp8_utils.py): BM 64, BN/BK = the block shape, GROUP_M 32, 4 warps,
#: 2 stages. SGLang's default differs only in num_stages (3).
VLLM_DEFAULT = TritonConfig(64, 128, 128, 32, 4, 2)
SGLANG_DEFAULT = TritonConfig(64, 128, 128, 32, 4, 3)


def spec_class(v):
    """Which integer specialization Triton compiles for a runtime integer argument: 1, a multiple of 16,
    or neither (each class its own compiled variant)."""
    if v == 1:
        return "one"
    if v % 16 == 0:
        return "div16"
    return "any"


def m_class(m):
    """The specialization class of M (one compiled variant of a config per class)."""
    return spec_class(m)


#: A representative value of each specialization class.
REP_OF_CLASS = {"one": 1, "div16": 16, "any": 17}
M_OF_CLASS = REP_OF_CLASS


def variant_classes(m, n, k):
    """The classes of the integer arguments that vary with the shape: M, N (also the output's row
    stride) and K/128 (the row stride of both scale tensors; K itself is a multiple of 128, so always a
    multiple of 16). Two shapes with equal classes run the same compiled variant of a config."""
    return (spec_class(m), spec_class(n), spec_class(k // SCALE_K))


def tiny_shape(classes):
    """A small (M, N, K) whose integer arguments fall in ``classes`` (for compiling a variant)."""
    cm, cn, cg = classes
    n = {"one": 1, "div16": 256, "any": 136}[cn]
    return REP_OF_CLASS[cm], n, SCALE_K * REP_OF_CLASS[cg]
