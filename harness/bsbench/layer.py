"""The layer-sequence comparison, pure Python (no torch): the layer list, the M sweep, the policies and how
each one resolves a GEMM to a concrete kernel, the buffer-set count of a whole layer, and the summary of
the measured lines.

A *policy* picks, for every GEMM (M, N, K) of a decoder layer, one of the kernels the harness can run:

* ``selector=PATH`` — a generated ``select_kernel.py`` (``synth run --backends``): ``select(M, N, K) ->
  (backend, kernel_id, split_k)``, ``KERNEL_NAMES``, ``TRITON_CONFIGS``; the mixed rule.
* ``vendor`` — ``torch._scaled_mm`` blockwise FP8 (cuBLAS on CUDA), as ``vendor_reference.py`` calls it.
* ``vllm-default`` — vLLM's config where no tuned file exists (BM 64, BN 128, BK 128, GROUP_M 32, 4 warps,
  2 stages) on the block-FP8 Triton kernel.
* ``vllm-tuned=DIR`` — vLLM's tuned files ``N={N},K={K},device_name={DEV},dtype=fp8_w8a8,
  block_shape=[128,128].json`` in DIR, looked up as vLLM's runtime does (the M key nearest M, ties to the
  key first in the file); vLLM's default config where no file exists.
* ``threshold=A:B:M0`` — backend A's default below M0, backend B's default from M0 on. Defaults: ``ck`` =
  the catalog's default CK instance (kernelId -1, an alias of instance 7) without split-K, ``triton`` =
  vLLM's default config, ``vendor`` = ``torch._scaled_mm``.
"""

import csv
import importlib.util
import math
import os
import re
from dataclasses import dataclass

from . import config, stats, triton_config

#: Backends a policy can name, and those the harness can run on this device family.
SELECT_BACKENDS = ("ck", "cktile", "triton", "vendor")
RUNNABLE_BACKENDS = ("ck", "triton", "vendor")
#: Policy kinds, in the order the summary lists them.
KINDS = ("selector", "vendor", "vllm-default", "vllm-tuned", "threshold")
POLICY_FORMS = "selector=PATH, vendor, vllm-default, vllm-tuned=DIR or threshold=A:B:M0"
#: The kernel name recorded for the vendor GEMM (as vendor_reference.py records it).
VENDOR_NAME = "vendor_scaled_mm_blockwise_1x128_128x128"
#: kernelId of the catalog's default CK instance.
CK_DEFAULT_ID = -1
#: The device name in vLLM's H200 file names.
VLLM_DEVICE = "NVIDIA_H200"
#: The largest split-K level the harness realizes (plan.py's bound).
MAX_SPLIT_K = 8


class LayerError(ValueError):
    """A layer list, M list or policy that cannot be used; the message names the bad value."""


# ---------------------------------------------------------------------------------------------------
# Layers and M values.

@dataclass(frozen=True)
class Gemm:
    """One GEMM of the layer: Y[M, N] = X[M, K] . W[N, K]^T."""

    name: str
    n: int
    k: int


def _positive_int(text, what):
    t = text.strip()
    if not re.fullmatch(r"[0-9]+", t) or int(t) <= 0:
        raise LayerError("%s %r is not a positive integer" % (what, text))
    return int(t)


def _check_gemms(gemms, where):
    if not gemms:
        raise LayerError("%s: no GEMM" % where)
    seen = set()
    for g in gemms:
        if g.k % config.SCALE_K != 0:
            raise LayerError("%s: GEMM %r has K = %d, not a multiple of %d (the scale group)"
                             % (where, g.name, g.k, config.SCALE_K))
        if g.name in seen:
            raise LayerError("%s: GEMM name %r appears twice" % (where, g.name))
        seen.add(g.name)
    return gemms


def parse_layers_csv(path):
    """The GEMMs of a CSV with the header ``name,N,K`` in execution order; lines starting with ``#`` are
    comments."""
    with open(path, newline="", encoding="utf-8") as f:
        lines = [(i, line) for i, line in enumerate(f, start=1) if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise LayerError("%s: empty (expected a header name,N,K and one line per GEMM)" % path)
    rows = list(csv.reader([line for _, line in lines]))
    header = [h.strip() for h in rows[0]]
    if header != ["name", "N", "K"]:
        raise LayerError("%s:%d: header must be name,N,K, got %s" % (path, lines[0][0], ",".join(header)))
    gemms = []
    for (lineno, _), row in zip(lines[1:], rows[1:]):
        where = "%s:%d" % (path, lineno)
        if len(row) != 3:
            raise LayerError("%s: expected 3 fields (name,N,K), got %d" % (where, len(row)))
        name = row[0].strip()
        if not name:
            raise LayerError("%s: empty name" % where)
        gemms.append(Gemm(name, _positive_int(row[1], "%s: N" % where), _positive_int(row[2], "%s: K" % where)))
    return _check_gemms(gemms, path)


def parse_layers_arg(text):
    """``N:K,N:K,...`` (each optionally ``name=N:K``) in execution order; unnamed GEMMs are ``gemm1``..."""
    gemms = []
    for i, item in enumerate(text.split(","), start=1):
        item = item.strip()
        name, _, shape = item.rpartition("=")
        parts = shape.split(":")
        if len(parts) != 2:
            raise LayerError("--layers item %r: expected N:K (or name=N:K)" % item)
        n = _positive_int(parts[0], "--layers item %r: N" % item)
        k = _positive_int(parts[1], "--layers item %r: K" % item)
        gemms.append(Gemm(name.strip() or "gemm%d" % i, n, k))
    return _check_gemms(gemms, "--layers")


def parse_m_list(text):
    """The M sweep: positive integers, comma-separated, no repeats, in the order given."""
    ms = []
    for item in text.split(","):
        m = _positive_int(item, "--m value")
        if m in ms:
            raise LayerError("--m value %d appears twice" % m)
        ms.append(m)
    return ms


# ---------------------------------------------------------------------------------------------------
# Policies: parsing.

@dataclass(frozen=True)
class Policy:
    """A parsed policy; ``label`` is its text as given (the name in the output)."""

    kind: str
    label: str
    path: str = ""
    below: str = ""
    above: str = ""
    m0: int = 0


def _check_backend(word, label):
    if word == "cktile":
        raise LayerError("policy %r: backend 'cktile' has no realization in this harness (CK-tile instances "
                         "run on ROCm only); use ck, triton or vendor" % label)
    if word not in RUNNABLE_BACKENDS:
        raise LayerError("policy %r: backend %r is not one of %s" % (label, word, ", ".join(RUNNABLE_BACKENDS)))
    return word


def parse_policy(text):
    """One policy from its text (``POLICY_FORMS``); LayerError naming the text and the bad part."""
    label = text.strip()
    if not label:
        raise LayerError("empty policy; expected %s" % POLICY_FORMS)
    kind, eq, arg = label.partition("=")
    kind = kind.strip()
    if kind not in KINDS:
        raise LayerError("policy %r: unknown kind %r; expected %s" % (label, kind, POLICY_FORMS))
    if kind in ("vendor", "vllm-default"):
        if eq:
            raise LayerError("policy %r: %s takes no value" % (label, kind))
        return Policy(kind, label)
    if not arg.strip():
        form = {"selector": "selector=PATH", "vllm-tuned": "vllm-tuned=DIR", "threshold": "threshold=A:B:M0"}[kind]
        raise LayerError("policy %r: needs a value: %s" % (label, form))
    if kind in ("selector", "vllm-tuned"):
        return Policy(kind, label, path=arg.strip())
    parts = arg.split(":")
    if len(parts) != 3:
        raise LayerError("policy %r: expected threshold=A:B:M0 (e.g. threshold=ck:vendor:64), got %d fields"
                         % (label, len(parts)))
    below, above = _check_backend(parts[0].strip(), label), _check_backend(parts[1].strip(), label)
    m0 = _positive_int(parts[2], "policy %r: M0" % label)
    if below == above:
        raise LayerError("policy %r: both sides are %s; a threshold splits two different backends" % (label, below))
    return Policy(kind, label, below=below, above=above, m0=m0)


def parse_policies(texts):
    out = [parse_policy(t) for t in texts]
    if not out:
        raise LayerError("no policy; give --policy at least once (%s)" % POLICY_FORMS)
    labels = [p.label for p in out]
    for lab in labels:
        if labels.count(lab) > 1:
            raise LayerError("policy %r is given twice" % lab)
    return out


# ---------------------------------------------------------------------------------------------------
# CK instances and choices.

@dataclass(frozen=True)
class CkInstance:
    """A CK legacy instance's geometry (a row of ck-instances/ck_a8w8_blockscale_instances.csv)."""

    kernel_id: int
    name: str
    block_size: int
    m_per_block: int
    n_per_block: int
    k_per_block: int
    pipeline: int


def default_instances_path():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(os.path.dirname(here), "ck-instances", "ck_a8w8_blockscale_instances.csv")


def load_ck_instances(path=None):
    """{kernelId: CkInstance}, the candidates 0..18 and the default -1."""
    path = path or default_instances_path()
    out = {}
    with open(path, newline="", encoding="utf-8") as f:
        for i, row in enumerate(csv.DictReader(f), start=2):
            try:
                inst = CkInstance(int(row["kernelId"]), row["kernelName"], int(row["BLOCK_SIZE"]), int(row["MPerBLOCK"]),
                                  int(row["NPerBLOCK"]), int(row["KPerBLOCK"]), int(row["PIPELINE_VERSION"]))
            except (KeyError, TypeError, ValueError) as e:
                raise LayerError("%s:%d: not an instance row (%s)" % (path, i, e))
            out[inst.kernel_id] = inst
    if CK_DEFAULT_ID not in out:
        raise LayerError("%s: no default row (kernelId -1)" % path)
    return out


@dataclass(frozen=True)
class Choice:
    """What one policy runs for one GEMM at one M."""

    backend: str
    kernel_id: int
    kernel_name: str
    split_k: int = 0
    ck: CkInstance = None
    triton: triton_config.TritonConfig = None
    source: str = ""

    def splits(self, k):
        """The K ranges launched (split-K realizes 2^split_k ranges of whole KPerBLOCK steps, fewer where
        they would be empty); 1 for unsplit kernels."""
        if self.backend != "ck" or self.split_k == 0:
            return 1
        return len(config.split_ranges(k, self.ck.k_per_block, self.split_k))

    def to_json(self, gemm):
        row = {"gemm": gemm.name, "N": gemm.n, "K": gemm.k, "backend": self.backend, "kernelId": self.kernel_id,
               "kernelName": self.kernel_name, "splitK": self.split_k, "splits": self.splits(gemm.k),
               "source": self.source}
        if self.triton is not None:
            row["config"] = self.triton.runtime_dict()
        return row


def ck_choice(instances, kernel_id, split_k, source):
    inst = instances.get(kernel_id)
    if inst is None:
        raise LayerError("CK kernelId %r is not in the instance table (ids %d..%d and -1)"
                         % (kernel_id, 0, max(instances)))
    return Choice("ck", kernel_id, inst.name, split_k, ck=inst, source=source)


def triton_choice(cfg, source):
    return Choice("triton", triton_config.kernel_id(cfg), cfg.name(), 0, triton=cfg, source=source)


def vendor_choice(source):
    return Choice("vendor", 0, VENDOR_NAME, 0, source=source)


def default_choice(backend, instances, source):
    """A backend's default: CK's default instance (-1), vLLM's default triton config, the vendor GEMM."""
    if backend == "ck":
        return ck_choice(instances, CK_DEFAULT_ID, 0, source)
    if backend == "triton":
        return triton_choice(triton_config.VLLM_DEFAULT, source)
    if backend == "vendor":
        return vendor_choice(source)
    raise LayerError("backend %r has no default here (ck, triton, vendor)" % backend)


# ---------------------------------------------------------------------------------------------------
# Policies: resolution.

def load_selector(path):
    """The generated module at ``path``; LayerError when it cannot be loaded or lacks ``select``."""
    if not os.path.isfile(path):
        raise LayerError("selector %r: no such file" % path)
    name = "_layer_selector_%d" % (abs(hash(os.path.abspath(path))) % 10 ** 8)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise LayerError("selector %r: not a Python module" % path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise LayerError("selector %r: cannot be loaded: %s: %s" % (path, type(e).__name__, e))
    if not callable(getattr(module, "select", None)):
        raise LayerError("selector %r: defines no function select(M, N, K)" % path)
    for attr in ("KERNEL_NAMES", "TRITON_CONFIGS"):
        if not isinstance(getattr(module, attr, {}), dict):
            raise LayerError("selector %r: %s is not a dict" % (path, attr))
    return module


class SelectorResolver:
    def __init__(self, policy, instances):
        self.policy = policy
        self.instances = instances
        self.module = load_selector(policy.path)
        self.names = getattr(self.module, "KERNEL_NAMES", {})
        self.configs = getattr(self.module, "TRITON_CONFIGS", {})

    def resolve(self, m, gemm):
        where = "selector %r at M=%d N=%d K=%d" % (self.policy.path, m, gemm.n, gemm.k)
        try:
            pick = self.module.select(m, gemm.n, gemm.k)
        except Exception as e:
            raise LayerError("%s: select raised %s: %s" % (where, type(e).__name__, e))
        if not isinstance(pick, (tuple, list)) or len(pick) != 3:
            raise LayerError("%s: select returned %r, not (backend, kernel_id, split_k)" % (where, pick))
        backend, kid, split = pick
        if backend not in SELECT_BACKENDS:
            raise LayerError("%s: backend %r is not one of %s" % (where, backend, ", ".join(SELECT_BACKENDS)))
        for what, v in (("kernel_id", kid), ("split_k", split)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise LayerError("%s: %s %r is not an integer" % (where, what, v))
        if not 0 <= split <= MAX_SPLIT_K:
            raise LayerError("%s: split_k %d is not in 0..%d" % (where, split, MAX_SPLIT_K))
        named = self.names.get((backend, kid))
        src = "select -> (%s, %d, %d)" % (backend, kid, split)
        if backend == "cktile":
            raise LayerError("%s: picks cktile kernel %d; CK-tile instances have no realization in this harness "
                             "(they run on ROCm only)" % (where, kid))
        if backend == "vendor":
            if kid != 0 or split != 0:
                raise LayerError("%s: the vendor leaf must be (vendor, 0, 0), got (vendor, %d, %d)" % (where, kid, split))
            return vendor_choice(src)
        if backend == "triton":
            if split != 0:
                raise LayerError("%s: a triton pick must have split_k 0 (the kernel has no split-K), got %d"
                                 % (where, split))
            if kid not in self.configs:
                raise LayerError("%s: triton kernel %d has no entry in the module's TRITON_CONFIGS" % (where, kid))
            try:
                cfg = triton_config.from_runtime_dict(self.configs[kid], "%s: TRITON_CONFIGS[%d]" % (where, kid))
            except ValueError as e:
                raise LayerError(str(e))
            if triton_config.kernel_id(cfg) != kid:
                raise LayerError("%s: TRITON_CONFIGS[%d] is %s, whose id is %d" % (where, kid, cfg.name(),
                                                                                  triton_config.kernel_id(cfg)))
            if named is not None and named != cfg.name():
                raise LayerError("%s: KERNEL_NAMES names triton %d %r, its config is %s" % (where, kid, named, cfg.name()))
            return triton_choice(cfg, src)
        try:
            choice = ck_choice(self.instances, kid, split, src)
        except LayerError as e:
            raise LayerError("%s: %s" % (where, e))
        if named is not None and named != choice.kernel_name:
            raise LayerError("%s: KERNEL_NAMES names ck %d %r but the instance table has %r (another catalog?)"
                             % (where, kid, named, choice.kernel_name))
        return choice


def vllm_file_name(n, k, device=VLLM_DEVICE):
    """The file name vLLM's runtime looks up for a block-FP8 GEMM with 128x128 blocks."""
    return "N=%d,K=%d,device_name=%s,dtype=fp8_w8a8,block_shape=[128,128].json" % (n, k, device)


def read_vllm_file(path):
    """[(M key, TritonConfig)] in file order; LayerError naming the file and the key."""
    try:
        return triton_config.read_runtime_file(path)
    except ValueError as e:
        raise LayerError(str(e))


def nearest_key(entries, m):
    """vLLM's lookup: the entry whose M key is nearest ``m``; on a tie the one first in the file
    (``min(configs.keys(), key=lambda x: abs(x - M))`` over the file's keys in order)."""
    best = None
    for key, cfg in entries:
        if best is None or abs(key - m) < abs(best[0] - m):
            best = (key, cfg)
    return best


class VllmTunedResolver:
    def __init__(self, policy, device=VLLM_DEVICE):
        if not os.path.isdir(policy.path):
            raise LayerError("policy %r: %r is not a directory" % (policy.label, policy.path))
        self.policy = policy
        self.device = device
        self.files = {}

    def entries(self, gemm):
        key = (gemm.n, gemm.k)
        if key not in self.files:
            path = os.path.join(self.policy.path, vllm_file_name(gemm.n, gemm.k, self.device))
            self.files[key] = read_vllm_file(path) if os.path.isfile(path) else None
        return self.files[key]

    def resolve(self, m, gemm):
        entries = self.entries(gemm)
        if entries is None:
            return triton_choice(triton_config.VLLM_DEFAULT, "vLLM default (no file %s)" % vllm_file_name(gemm.n, gemm.k, self.device))
        key, cfg = nearest_key(entries, m)
        return triton_choice(cfg, "vLLM file N=%d,K=%d, M key %d" % (gemm.n, gemm.k, key))


class FixedResolver:
    def __init__(self, choice):
        self.choice = choice

    def resolve(self, m, gemm):
        return self.choice


class ThresholdResolver:
    def __init__(self, policy, instances):
        self.policy = policy
        self.below = default_choice(policy.below, instances, "%s default, M < %d" % (policy.below, policy.m0))
        self.above = default_choice(policy.above, instances, "%s default, M >= %d" % (policy.above, policy.m0))

    def resolve(self, m, gemm):
        return self.below if m < self.policy.m0 else self.above


def resolver(policy, instances, vllm_device=VLLM_DEVICE):
    """An object whose ``resolve(m, gemm)`` gives the policy's Choice (LayerError for a bad pick)."""
    if policy.kind == "selector":
        return SelectorResolver(policy, instances)
    if policy.kind == "vendor":
        return FixedResolver(vendor_choice("vendor alone"))
    if policy.kind == "vllm-default":
        return FixedResolver(triton_choice(triton_config.VLLM_DEFAULT, "vLLM default"))
    if policy.kind == "vllm-tuned":
        return VllmTunedResolver(policy, vllm_device)
    if policy.kind == "threshold":
        return ThresholdResolver(policy, instances)
    raise LayerError("policy %r: unknown kind %r" % (policy.label, policy.kind))


def plan(gemms, ms, policies, resolvers):
    """{(m, label): [Choice per GEMM]} for every M and policy (all resolved before any GPU work)."""
    out = {}
    for m in ms:
        for p in policies:
            out[(m, p.label)] = [resolvers[p.label].resolve(m, g) for g in gemms]
    return out


# ---------------------------------------------------------------------------------------------------
# Buffers and order.

def layer_set_bytes(m, gemms, workspace):
    """Bytes of one buffer set of the whole layer; ``workspace[i]``: GEMM i needs an fp32 split-K workspace."""
    return sum(config.set_bytes(m, g.n, g.k, w) for g, w in zip(gemms, workspace))


def layer_buffer_sets(m, gemms, workspace, l2_bytes, factor=3, cap=64):
    """Rotating sets of the whole layer whose total exceeds ``factor`` x the L2 (the bench's rule, with the
    layer's set in place of one GEMM's)."""
    per = layer_set_bytes(m, gemms, workspace)
    return max(1, min(cap, config.cdiv(factor * l2_bytes + 1, per)))


def rotated(items, shift):
    """``items`` rotated left by ``shift`` (the recheck round's policy order)."""
    items = list(items)
    if not items:
        return items
    s = shift % len(items)
    return items[s:] + items[:s]


def layer_flops(m, gemms):
    return sum(2.0 * m * g.n * g.k for g in gemms)


# ---------------------------------------------------------------------------------------------------
# Summary.

def geomean(values):
    vals = list(values)
    if not vals:
        return None
    if any(v <= 0 for v in vals):
        raise ValueError("geomean of a non-positive value")
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def rounds_fields(results):
    """A line's fields for three or more rounds: every round's time (None where it failed) and the median
    of the ok ones (the median of an even count is the mean of the middle two)."""
    times = [r.get("us") if r.get("status") == "ok" else None for r in results]
    ok = [t for t in times if t]
    return {"us_rounds": times, "us_median_rounds": stats.median(ok) if ok else None}


def times_by_m(rows, label, field="us"):
    """{M: time} of one policy's ok lines."""
    out = {}
    for r in rows:
        if r.get("policy") == label and r.get("status") == "ok" and r.get(field):
            out[int(r["M"])] = float(r[field])
    return out


def ratio(a, b):
    """(geomean over the M both have of a[M] / b[M], the number of such M); (None, 0) without any."""
    common = sorted(set(a) & set(b))
    if not common:
        return None, 0
    return geomean(a[m] / b[m] for m in common), len(common)


def best_threshold(rows, labels):
    """The threshold policy with the fewest failed M, then the lowest geomean time over the M every
    threshold policy ran (chosen after the fact on these measurements); None without any."""
    if not labels:
        return None
    ms = sorted({int(r["M"]) for r in rows})
    times = {lab: times_by_m(rows, lab) for lab in labels}
    common = [m for m in ms if all(m in times[lab] for lab in labels)]

    def key(lab):
        g = geomean(times[lab][m] for m in common) if common else None
        return (len(ms) - len(times[lab]), g if g is not None else float("inf"), labels.index(lab))
    return min(labels, key=key)


def summary_data(rows, labels, kinds):
    """Per-policy ratios to the vendor and the mixed rule's ratios (``kinds``: {label: kind}, ``labels`` in
    output order). Ratios are geomeans over M of time / other time on the M where both ran ok; the recheck
    round's times give the same ratios again."""
    vendor = next((lab for lab in labels if kinds[lab] == "vendor"), None)
    per_policy = []
    for lab in labels:
        t, t2 = times_by_m(rows, lab), times_by_m(rows, lab, "us_recheck")
        noise = sorted(abs(t2[m] / t[m] - 1.0) for m in t if m in t2)
        entry = {"policy": lab, "ok_m": len(t), "failed_m": sorted(int(r["M"]) for r in rows
                                                                  if r.get("policy") == lab and r.get("status") != "ok"),
                 "noise_median": noise[len(noise) // 2] if noise else None, "noise_max": noise[-1] if noise else None}
        if vendor is not None:
            entry["vs_vendor"], entry["vs_vendor_m"] = ratio(t, times_by_m(rows, vendor))
            entry["vs_vendor_recheck"], _ = ratio(t2, times_by_m(rows, vendor, "us_recheck"))
        per_policy.append(entry)
    thresholds = [lab for lab in labels if kinds[lab] == "threshold"]
    best = best_threshold(rows, thresholds)
    others = [("vendor alone", vendor),
              ("vLLM default", next((lab for lab in labels if kinds[lab] == "vllm-default"), None)),
              ("vLLM tuned", next((lab for lab in labels if kinds[lab] == "vllm-tuned"), None)),
              ("best threshold", best)]
    mixed = []
    for lab in labels:
        if kinds[lab] != "selector":
            continue
        for what, other in others:
            if other is None:
                mixed.append({"policy": lab, "versus": what, "other": None, "ratio": None, "m": 0, "recheck": None,
                              "median_rounds": None})
                continue
            r, n = ratio(times_by_m(rows, lab), times_by_m(rows, other))
            r2, _ = ratio(times_by_m(rows, lab, "us_recheck"), times_by_m(rows, other, "us_recheck"))
            rm, _ = ratio(times_by_m(rows, lab, "us_median_rounds"), times_by_m(rows, other, "us_median_rounds"))
            mixed.append({"policy": lab, "versus": what, "other": other, "ratio": r, "m": n, "recheck": r2,
                          "median_rounds": rm})
    return {"vendor": vendor, "best_threshold": best, "per_policy": per_policy, "mixed": mixed}


def _fmt(v, pattern="%.3f"):
    return "-" if v is None else pattern % v


def summary_text(rows, labels, kinds):
    """The table printed at the end of a run (and by ``--summarize``)."""
    d = summary_data(rows, labels, kinds)
    ms = sorted({int(r["M"]) for r in rows})
    lines = ["# sequence time (us) per M; '-' = failed (the line's status says why)"]
    width = max([len(lab) for lab in labels] + [6])
    lines.append("%-*s %s" % (width, "policy", " ".join("%9s" % ("M=%d" % m) for m in ms)))
    for lab in labels:
        t = times_by_m(rows, lab)
        lines.append("%-*s %s" % (width, lab, " ".join("%9s" % _fmt(t.get(m), "%.1f") for m in ms)))
    lines.append("")
    vendor = d["vendor"]
    head = "time / vendor (geomean over M)" if vendor else "no vendor policy: no ratios to it"
    lines.append("%-*s %6s  %-34s %9s  %s" % (width, "policy", "M ok", head, "recheck", "noise median / max"))
    for e in d["per_policy"]:
        vs = "%s (%d M)" % (_fmt(e.get("vs_vendor")), e.get("vs_vendor_m", 0)) if vendor else ""
        noise = ("%.1f%% / %.1f%%" % (100 * e["noise_median"], 100 * e["noise_max"])
                 if e["noise_median"] is not None else "-")
        lines.append("%-*s %6d  %-34s %9s  %s" % (width, e["policy"], e["ok_m"], vs,
                                                  _fmt(e.get("vs_vendor_recheck")) if vendor else "", noise))
    lines.append("")
    if not d["mixed"]:
        lines.append("no selector policy: no mixed-rule ratios")
    else:
        lines.append("mixed rule / other (geomean over M where both ran; below 1: the mixed rule is faster)")
        for e in d["mixed"]:
            if e["other"] is None:
                lines.append("  %s / %s: not measured (no such policy given)" % (e["policy"], e["versus"]))
                continue
            other = "" if e["versus"] in ("vendor alone", "vLLM default") else " [%s]" % e["other"]
            rounds = "" if e.get("median_rounds") is None else ", median of the rounds %s" % _fmt(e["median_rounds"])
            lines.append("  %s / %s%s: %s over %d M (recheck %s%s)" % (e["policy"], e["versus"], other,
                                                                       _fmt(e["ratio"]), e["m"], _fmt(e["recheck"]),
                                                                       rounds))
        if d["best_threshold"] is not None:
            lines.append("  (the best threshold is chosen after the fact on these measurements: fewest failed M, then "
                         "lowest geomean time)")
    return "\n".join(lines)
