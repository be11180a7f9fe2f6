"""The vendor GEMM's scale layouts: which (scale_a, scale_b) tensors ``torch._scaled_mm`` takes for 1x128
activation and 128x128 weight scales, and the search for the one that computes right on a shape. Shared by
``vendor_reference.py`` (one row per shape) and ``layer_runner.py`` (a layer's sequence); ``torch`` and
``runner`` are passed in, so the pure-Python tests can stand in for both."""

from . import stats

#: What the library raises when it refuses a shape or a scale layout (torch's checks raise RuntimeError,
#: some ValueError or NotImplementedError). Anything else (TypeError, AttributeError, ...) is a bug of the
#: caller and is never recorded as the library's refusal.
LIBRARY_ERRORS = (RuntimeError, ValueError, NotImplementedError)


def scale_layouts(torch, xs, ws):
    """Candidate (scale_a, scale_b) layouts; the first one the library accepts and computes right is kept.

    cuBLAS's 128x128 recipe reads the weight scales as a (K/128, N/128) column-major matrix whose leading
    dimension is the K-block count rounded up to a multiple of 4 (16-byte aligned). torch's check of the
    scale tensor has changed across releases: later ones ask for that padded leading dimension (the first
    padded form below), torch 2.11 asks for a leading dimension of exactly K/128 and passes the pointer on
    as it is, so where K/128 is not a multiple of 4 (K = 2304: 18 blocks, read at a pitch of 20) the plain
    ``b transposed view`` is accepted and silently wrong. For that check the second form is a view with the
    leading dimension torch asks for over storage laid out at the pitch cuBLAS reads (on an H100 with torch
    2.11 the padded forms were refused as "Invalid scaling configuration" and the plain view failed the
    correctness check). Where K/128 is a multiple of 4 the padded forms are the plain transposed view."""
    xs_cm = xs.t().contiguous().t()
    kb = ws.shape[1]
    ws_pad = torch.nn.functional.pad(ws, (0, -kb % 4)) if kb % 4 else ws
    pitched = ws_pad.contiguous().reshape(-1).as_strided((kb, ws.shape[0]), (1, kb))
    return [
        ("a col-major, b as-is", xs_cm, ws),
        ("a row-major, b as-is", xs, ws),
        ("a col-major, b transposed", xs_cm, ws.t().contiguous()),
        ("a col-major, b transposed view of storage padded to 4 K-blocks", xs_cm, ws_pad[:, :kb].t()),
        ("a col-major, b K/128-strided view of storage padded to 4 K-blocks", xs_cm, pitched),
        ("a col-major, b K-blocks padded to 4, transposed view", xs_cm, ws_pad.t()),
        ("a col-major, b transposed view", xs_cm, ws.t()),
        ("a row-major, b transposed", xs, ws.t().contiguous()),
        ("a col-major, b col-major", xs_cm, ws.t().contiguous().t()),
    ]


def find_layout(torch, runner, ctx, log, layouts=scale_layouts, prefix=""):
    """The first of ``layouts(torch, xs, ws)`` the library takes and computes right with on ``ctx``; None
    if none does. A layout the library refuses raises one of ``LIBRARY_ERRORS``. ``prefix`` starts every
    word "layout" of the log lines ("vendor " in a layer sequence, where other kernels log too)."""
    x, wq, xs, ws, _, _ = ctx.sets[0]
    for name, sa, sb in layouts(torch, xs, ws):
        try:
            y = torch._scaled_mm(x, wq.t(), sa, sb, out_dtype=torch.bfloat16)
            torch.cuda.synchronize()
        except LIBRARY_ERRORS as e:  # refused by the library: try the next
            log("# %slayout %s rejected at M=%d N=%d K=%d: %s" % (prefix, name, ctx.m, ctx.n, ctx.k, str(e)[:160]))
            continue
        if runner.gpu_err_ratio(y, ctx.ref) <= stats.MAX_ERR_RATIO:
            log("# %sscale layout: %s" % (prefix, name))
            return name
        log("# %slayout %s computes a different product" % (prefix, name))
    return None
