"""Pure-Python statistics used for timing summaries and the correctness ratio (no torch)."""

import math

#: AITER's checkAllclose defaults.
RTOL = 1e-2
ATOL = 1e-2
#: AITER's tuner rejects candidates whose errRatio exceeds this.
MAX_ERR_RATIO = 0.05


def percentile(values, q):
    """Linear-interpolated percentile ``q`` in [0, 100] of a non-empty sequence."""
    if not values:
        raise ValueError("percentile of an empty sequence")
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    pos = (len(xs) - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(xs) - 1)
    frac = pos - lo
    return float(xs[lo] + (xs[hi] - xs[lo]) * frac)


def median(values):
    return percentile(values, 50.0)


def summarize(times_us):
    """Timing summary of per-launch times in microseconds."""
    return {
        "us": median(times_us),
        "us_min": float(min(times_us)),
        "us_max": float(max(times_us)),
        "us_p10": percentile(times_us, 10.0),
        "us_p90": percentile(times_us, 90.0),
        "reps": len(times_us),
    }


def is_close(out, ref, rtol=RTOL, atol=ATOL):
    """torch.isclose semantics: ``|out - ref| <= atol + rtol * |ref|``; NaN is never close."""
    if math.isnan(out) or math.isnan(ref):
        return False
    if math.isinf(out) or math.isinf(ref):
        return out == ref
    return abs(out - ref) <= atol + rtol * abs(ref)


def err_ratio(out, ref, rtol=RTOL, atol=ATOL):
    """Share of elements outside tolerance, as AITER's checkAllclose reports it."""
    if len(out) != len(ref):
        raise ValueError("err_ratio: %d outputs vs %d references" % (len(out), len(ref)))
    if not out:
        raise ValueError("err_ratio of empty outputs")
    bad = sum(0 if is_close(o, r, rtol, atol) else 1 for o, r in zip(out, ref))
    return bad / len(out)


def tflops(m, n, k, us):
    return 2.0 * m * n * k / us / 1e6


def gbps(nbytes, us):
    return nbytes / us / 1e3


def screened(warm, best_us, cutoff):
    """Whether a cell is left unmeasured as slow: even its fastest warm-up launch took more than
    ``cutoff`` times the best median measured so far on the shape. The fastest launch, not the mean, so
    that one launch delayed by host work cannot screen out a config that is near the best."""
    if cutoff <= 0 or best_us is None or not warm:
        return False
    return min(warm) > cutoff * best_us
